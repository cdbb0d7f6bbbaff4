"""Saving and loading a forest as plain arrays plus JSON in one ``.npz`` file (``allow_pickle=False``)."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from streamforest.binning import ColumnBinner
from streamforest.bookkeeping import WeightLedger
from streamforest.columns import ColumnStore
from streamforest.tree.model import Trees

FORMAT = "streamforest.forest"
VERSION = 1


def _json_safe(values: Any) -> list:
    return np.asarray(values).tolist()


def forest_arrays(forest: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The forest as named arrays and a JSON-able header (also used by engine checkpoints)."""
    arrays: dict[str, np.ndarray] = {}
    gens = []
    for k, g in enumerate(forest._generations):
        prefix = f"g{k}_"
        arrays.update(g.trees.to_arrays(prefix))
        arrays[f"{prefix}seeds"] = g.seeds
        if g.split_ks is not None:
            arrays[f"{prefix}split_ks"] = g.split_ks
        sizes = np.array([len(s) for s in g.subspaces], dtype=np.int64)
        arrays[f"{prefix}subspace_sizes"] = sizes
        arrays[f"{prefix}subspaces"] = (
            np.concatenate(g.subspaces) if g.subspaces else np.zeros(0, dtype=np.int64)
        ).astype(np.int64)
        gens.append({"id": g.id, "forced": g.forced, "log_weight": g.log_weight, "born": g.born,
                     "in_oob": g.in_oob})
    if forest._store is not None:
        arrays["columns"] = np.ascontiguousarray(forest._store.view())
    arrays["y_cls"] = forest._y_cls
    arrays["y_reg"] = forest._y_reg
    arrays["oob_sum"] = forest._oob_sum
    arrays["oob_count"] = forest._oob_count
    header = {
        "format": FORMAT,
        "version": VERSION,
        "params": forest._params(),
        "seed": forest._seed,
        "features": [b.to_json() for b in forest._binners],
        "classes": None if forest.classes_ is None else _json_safe(forest.classes_),
        "ledger": forest._ledger.to_json(),
        "generations": gens,
        "next_generation": forest._next_generation,
        "model_version": forest.model_version_,
        "oob_log_ref": forest._oob_log_ref,
        "n_samples": forest.n_samples_,
    }
    return arrays, header


def restore_forest(cls: type, arrays: Any, header: dict[str, Any]) -> Any:
    from streamforest.forest import Generation

    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise ValueError(f"not a streamforest forest of version {VERSION}: {header.get('format')!r}")
    forest = cls(**header["params"])
    forest._seed = int(header["seed"])
    forest._binners = [ColumnBinner.from_json(b) for b in header["features"]]
    forest.feature_names_ = [b.name for b in forest._binners]
    forest.classes_ = None if header["classes"] is None else np.asarray(header["classes"])
    forest._ledger = WeightLedger.from_json(header["ledger"])
    forest._next_generation = int(header["next_generation"])
    forest.model_version_ = int(header["model_version"])
    # Removed generations are not saved: encodings from before the save are re-encoded, not patched.
    forest._delta_floor = forest.model_version_
    forest._oob_log_ref = float(header["oob_log_ref"])
    if "columns" in arrays:
        forest._store = ColumnStore.from_array(np.asarray(arrays["columns"]))
    forest._y_cls = np.asarray(arrays["y_cls"])
    forest._y_reg = np.asarray(arrays["y_reg"])
    forest._oob_sum = np.asarray(arrays["oob_sum"])
    forest._oob_count = np.asarray(arrays["oob_count"])
    for k, g in enumerate(header["generations"]):
        prefix = f"g{k}_"
        sizes = np.asarray(arrays[f"{prefix}subspace_sizes"])
        flat = np.asarray(arrays[f"{prefix}subspaces"])
        subspaces = np.split(flat, np.cumsum(sizes)[:-1]) if sizes.size else []
        trees = Trees.from_arrays({key: np.asarray(arrays[key]) for key in arrays if key.startswith(prefix)}, prefix)
        forest._generations.append(
            Generation(int(g["id"]), list(g["forced"]), float(g["log_weight"]), trees,
                       [s.astype(np.int64) for s in subspaces], np.asarray(arrays[f"{prefix}seeds"]),
                       born=int(g["born"]), in_oob=bool(g.get("in_oob", True)),
                       split_ks=np.asarray(arrays[f"{prefix}split_ks"]).astype(np.int64)
                       if f"{prefix}split_ks" in arrays else None)
        )
    return forest


def write_npz_atomic(path: str | os.PathLike, arrays: dict[str, np.ndarray], header: dict[str, Any]) -> None:
    """Write arrays and a JSON header to ``path`` atomically (temporary file, fsync, rename)."""
    path = Path(path)
    buf = io.BytesIO()
    payload = dict(arrays)
    payload["__header__"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    np.savez(buf, **payload)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(buf.getbuffer())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_npz(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "__header__"}
        if "__header__" not in z.files:
            raise ValueError(f"{path}: no streamforest header")
        header = json.loads(bytes(z["__header__"]).decode("utf-8"))
    return arrays, header


def save_forest(forest: Any, path: str | os.PathLike) -> None:
    arrays, header = forest_arrays(forest)
    write_npz_atomic(path, arrays, header)


def load_forest(cls: type, path: str | os.PathLike) -> Any:
    arrays, header = read_npz(path)
    return restore_forest(cls, arrays, header)
