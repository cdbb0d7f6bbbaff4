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


def bundled_names() -> list[str]:
    """Names of the datasets shipped with the package: what ``streamforest produce``, ``streamforest demo
    --dataset``, ``streamforest datasets`` and the scenarios' ``--bundled`` mode take.

    Examples
    --------
    >>> bundled_names()[:2]
    ['diabetes', 'banknote-authentication']
    """
    return [row["name"] for row in read_manifest(bundled_dir())]


def bundled_dataset(name: str) -> tuple[Path, set[str]]:
    """The CSV path and the nominal columns of the bundled dataset ``name`` (its label column is ``target``).

    Examples
    --------
    >>> path, nominal = bundled_dataset("ilpd")
    >>> path.name, sorted(nominal)
    ('ilpd_1480.csv', ['Gender'])
    """
    rows = {row["name"]: row for row in read_manifest(bundled_dir())}
    if name not in rows:
        raise ValueError(f"no bundled dataset {name!r}; the bundled ones are {', '.join(rows)} "
                         "(`streamforest datasets` lists them)")
    row = rows[name]
    return bundled_dir() / row["file"], {c for c in row["nominal_cols"].split(";") if c}


def read_manifest(directory: Path) -> list[dict[str, str]]:
    with open(directory / "MANIFEST.tsv", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _parse_column(cells: np.ndarray) -> tuple[np.ndarray, bool]:
    """Numbers as float64 (empty cells NaN); a column with any non-number stays text (None for empty)."""
    present = cells != ""
    try:
        values = np.full(cells.shape[0], np.nan)
        values[present] = np.asarray(cells[present], dtype=np.float64)
        return values, True
    except ValueError:
        out = cells.astype(object)
        out[~present] = None
        return out, False


def load_csv(path: Path, nominal: set[str] = frozenset(), name: str = "", did: int = 0,
             target: str = "target") -> Dataset:
    """Read a dataset CSV: empty cells are missing values, text columns are nominal, ``target`` is the label."""
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    if target not in header:
        raise ValueError(f"{path}: no column {target!r} (columns: {header[:10]})")
    if any(len(r) != len(header) for r in rows):
        bad = next(i for i, r in enumerate(rows) if len(r) != len(header))
        raise ValueError(f"{path}: row {bad + 2} has {len(rows[bad])} cells, the header {len(header)}")
    raw = np.array(rows, dtype=object).reshape(len(rows), len(header))
    columns: dict[str, np.ndarray] = {}
    kinds: dict[str, str] = {}
    for j, col in enumerate(header):
        if col == target:
            continue
        values, numeric = _parse_column(raw[:, j])
        columns[col] = values
        kinds[col] = "nominal" if (col in nominal or not numeric) else "numeric"
    y, numeric = _parse_column(raw[:, header.index(target)])
    if numeric:
        if np.isnan(y).any():
            raise ValueError(f"{path}: the target column {target!r} has empty cells")
        if np.all(y == np.round(y)):
            y = y.astype(np.int64)
    return Dataset(name=name or path.stem, did=did, columns=columns, kinds=kinds, y=y)


def stratified_split(y: np.ndarray, seed: int, test_fraction: float = 1 / 3) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a stratified train/test split: each class keeps its share in both parts.

    Examples
    --------
    >>> train, test = stratified_split(np.array([0] * 6 + [1] * 3), seed=0)
    >>> len(train), len(test), int(np.sum(np.array([0] * 6 + [1] * 3)[test]))
    (6, 3, 1)
    """
    rng = np.random.default_rng(seed)
    test = []
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        rng.shuffle(members)
        test.append(members[: round(len(members) * test_fraction)])
    test_idx = np.sort(np.concatenate(test))
    train_idx = np.setdiff1d(np.arange(len(y)), test_idx)
    return train_idx, test_idx
