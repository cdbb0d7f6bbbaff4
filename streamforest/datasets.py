"""The benchmark datasets of Motl & Kordík (2019) as CSV: features, then a last ``target`` column (0/1).

A few small ones ship with the package (``streamforest/data``); the full set lives in
``shared/datasets/motl2019`` beside a checkout. ``MANIFEST.tsv`` says which columns are nominal.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np


@dataclass
class Dataset:
    name: str
    did: int
    columns: dict[str, np.ndarray]  # float64, NaN = missing (nominal columns hold integer codes)
    kinds: dict[str, str]  # "numeric" | "nominal"
    y: np.ndarray  # int 0/1

    @property
    def X(self) -> np.ndarray:
        return np.column_stack(list(self.columns.values()))

    @property
    def n(self) -> int:
        return self.y.shape[0]

    @property
    def d(self) -> int:
        return len(self.columns)


def bundled_dir() -> Path:
    return Path(str(resources.files("streamforest") / "data"))


def read_manifest(directory: Path) -> list[dict[str, str]]:
    with open(directory / "MANIFEST.tsv", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def load_csv(path: Path, nominal: set[str] = frozenset(), name: str = "", did: int = 0,
             target: str = "target") -> Dataset:
    """Read a dataset CSV: empty cells are missing values, ``target`` is the label column."""
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    if target not in header:
        raise ValueError(f"{path}: no column {target!r}")
    raw = np.array(rows, dtype=object).reshape(len(rows), len(header))
    columns: dict[str, np.ndarray] = {}
    kinds: dict[str, str] = {}
    for j, col in enumerate(header):
        if col == target:
            continue
        cells = raw[:, j]
        values = np.full(len(rows), np.nan)
        present = cells != ""
        values[present] = np.asarray(cells[present], dtype=np.float64)
        columns[col] = values
        kinds[col] = "nominal" if col in nominal else "numeric"
    y = np.asarray(raw[:, header.index(target)], dtype=np.float64).astype(np.int64)
    return Dataset(name=name or path.stem, did=did, columns=columns, kinds=kinds, y=y)


def load_directory(directory: Path, names: list[str] | None = None) -> list[Dataset]:
    """All (or the named) datasets listed in a directory's ``MANIFEST.tsv``."""
    out = []
    for row in read_manifest(directory):
        if names is not None and row["name"] not in names:
            continue
        nominal = {c for c in row["nominal_cols"].split(";") if c}
        out.append(load_csv(directory / row["file"], nominal, row["name"], int(row["did"])))
    return out


def manifest_rows(directory: Path) -> list[dict[str, str]]:
    return read_manifest(directory)
