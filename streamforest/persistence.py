"""Saving and loading a forest as plain arrays plus JSON in one ``.npz`` file (``allow_pickle=False``).

It writes and reads a :class:`~streamforest.state.ForestState`; the forest turns itself into one and back
(:class:`PersistenceMixin`, a base of :class:`~streamforest.FeatureStreamForest`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from streamforest.binning import ColumnBinner
from streamforest.bookkeeping import WeightLedger
from streamforest.columns import ColumnStore
from streamforest.generations import Generation
from streamforest.inputs import FeatureColumns
from streamforest.oob import OutOfBag
from streamforest.state import ForestState
from streamforest.tree.model import Trees

FORMAT = "streamforest.forest"
VERSION = 1
#: Parameters newer than the format, with the value that means "as before them": written only when set otherwise,
#: so that a forest which does not use them saves the very file a reader older than them reads.
LATER_PARAMS = {"max_samples": None}

_Self = TypeVar("_Self", bound="PersistenceMixin")


def _json_safe(values: Any) -> list:
    return np.asarray(values).tolist()


def state_arrays(state: ForestState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A forest's state as named arrays and a JSON-able header."""
    arrays: dict[str, np.ndarray] = {}
    gens = []
    for k, g in enumerate(state.generations):
        prefix = f"g{k}_"
        arrays.update(g.trees.to_arrays(prefix))
        arrays[f"{prefix}seeds"] = g.seeds
        if g.split_ks is not None:
            arrays[f"{prefix}split_ks"] = g.split_ks
        if g.min_leaf is not None:
            arrays[f"{prefix}min_leaf"] = g.min_leaf
        sizes = np.array([len(s) for s in g.subspaces], dtype=np.int64)
        arrays[f"{prefix}subspace_sizes"] = sizes
        arrays[f"{prefix}subspaces"] = (
            np.concatenate(g.subspaces) if g.subspaces else np.zeros(0, dtype=np.int64)
        ).astype(np.int64)
        gens.append({"id": g.id, "forced": g.forced, "log_weight": g.log_weight, "born": g.born,
                     "in_oob": g.in_oob})
    if state.columns is not None:
        arrays["columns"] = np.ascontiguousarray(state.columns)
    arrays["y_cls"] = state.y_cls
    arrays["y_reg"] = state.y_reg
    arrays["oob_sum"] = state.oob_sum
    arrays["oob_count"] = state.oob_count
    header = {
        "format": FORMAT,
        "version": VERSION,
        "params": {k: v for k, v in state.params.items() if k not in LATER_PARAMS or v != LATER_PARAMS[k]},
        "seed": state.seed,
        "features": [b.to_json() for b in state.binners],
        "classes": None if state.classes is None else _json_safe(state.classes),
        "ledger": state.ledger.to_json(),
        "generations": gens,
        "next_generation": state.next_generation,
        "model_version": state.model_version,
        "oob_log_ref": state.oob_log_ref,
        "n_samples": 0 if state.columns is None else int(state.columns.shape[1]),
    }
    return arrays, header


def state_from_arrays(arrays: Any, header: dict[str, Any]) -> ForestState:
    """The state written by :func:`state_arrays`."""
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise ValueError(f"not a streamforest forest of version {VERSION}: {header.get('format')!r}")
    generations = []
    for k, g in enumerate(header["generations"]):
        prefix = f"g{k}_"
        sizes = np.asarray(arrays[f"{prefix}subspace_sizes"])
        flat = np.asarray(arrays[f"{prefix}subspaces"])
        subspaces = np.split(flat, np.cumsum(sizes)[:-1]) if sizes.size else []
        trees = Trees.from_arrays({key: np.asarray(arrays[key]) for key in arrays if key.startswith(prefix)}, prefix)
        generations.append(
            Generation(int(g["id"]), list(g["forced"]), float(g["log_weight"]), trees,
                       [s.astype(np.int64) for s in subspaces], np.asarray(arrays[f"{prefix}seeds"]),
                       born=int(g["born"]), in_oob=bool(g.get("in_oob", True)),
                       split_ks=np.asarray(arrays[f"{prefix}split_ks"]).astype(np.int64)
                       if f"{prefix}split_ks" in arrays else None,
                       # Files saved before leaf sizes were kept per tree: the forest's one (a number then).
                       min_leaf=np.asarray(arrays[f"{prefix}min_leaf"]).astype(np.float64)
                       if f"{prefix}min_leaf" in arrays
                       else np.full(trees.n_trees, float(header["params"]["min_samples_leaf"])))
        )
    # Files saved before thresholds could sit midway: their trees grew with thresholds at bin edges.
    params = {"split_threshold": "edge", **LATER_PARAMS, **header["params"]}
    return ForestState(
        params=params, seed=int(header["seed"]),
        binners=[ColumnBinner.from_json(b) for b in header["features"]],
        classes=None if header["classes"] is None else np.asarray(header["classes"]),
        ledger=WeightLedger.from_json(header["ledger"]), generations=generations,
        next_generation=int(header["next_generation"]), model_version=int(header["model_version"]),
        columns=np.asarray(arrays["columns"]) if "columns" in arrays else None,
        y_cls=np.asarray(arrays["y_cls"]), y_reg=np.asarray(arrays["y_reg"]),
        oob_sum=np.asarray(arrays["oob_sum"]), oob_count=np.asarray(arrays["oob_count"]),
        oob_log_ref=float(header["oob_log_ref"]),
    )


def forest_arrays(forest: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A forest (anything with a ``state()``) as named arrays and a JSON-able header (engine checkpoints)."""
    return state_arrays(forest.state())


def restore_forest(cls: type, arrays: Any, header: dict[str, Any]) -> Any:
    """The forest of class ``cls`` (anything with a ``from_state``) written by :func:`forest_arrays`."""
    return cls.from_state(state_from_arrays(arrays, header))


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
    write_npz_atomic(path, *forest_arrays(forest))


def load_forest(cls: type, path: str | os.PathLike) -> Any:
    return restore_forest(cls, *read_npz(path))


class PersistenceMixin:
    """A forest's :meth:`state` and the forest of a state (:meth:`from_state`); one ``.npz`` file of them."""

    def state(self) -> ForestState:
        """What the forest is made of (:class:`~streamforest.state.ForestState`): what :meth:`save` writes and
        :meth:`from_state` rebuilds from. It shares its arrays with the forest: read it, do not change it."""
        return ForestState(
            params=self.get_params(), seed=self._seed, binners=list(self._columns.binners), classes=self.classes_,
            ledger=self._ledger, generations=list(self._generations), next_generation=self._next_generation,
            model_version=self.model_version_, columns=None if self._store is None else self._store.view(),
            y_cls=self._y_cls, y_reg=self._y_reg, oob_sum=self._oob.sum, oob_count=self._oob.count,
            oob_log_ref=self._oob.log_ref,
        )

    @classmethod
    def from_state(cls: type[_Self], state: ForestState) -> _Self:
        """The forest whose :meth:`state` this is; it continues learning exactly where that forest was.

        Examples
        --------
        >>> import numpy as np
        >>> from streamforest import FeatureStreamForest
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
        >>> f = FeatureStreamForest(trees_per_generation=4, random_state=0).fit(X, y)
        >>> g = FeatureStreamForest.from_state(f.state())
        >>> bool((g.predict_proba(X) == f.predict_proba(X)).all()), g.model_version_ == f.model_version_
        (True, True)
        """
        forest = cls(**state.params)
        forest._seed = int(state.seed)
        forest._columns = FeatureColumns(state.binners)
        forest.classes_ = state.classes
        # The state may be another live forest's: nothing that either forest changes in place is shared.
        forest._ledger = state.ledger.copy()
        forest._next_generation = int(state.next_generation)
        forest.model_version_ = int(state.model_version)
        # Removed generations are not part of the state: encodings from before it are re-encoded, not patched.
        forest.encoder.restart(forest.model_version_)
        if state.columns is not None:
            forest._store = ColumnStore.from_array(np.asarray(state.columns))
        forest._y_cls = state.y_cls
        forest._y_reg = state.y_reg
        forest._oob = OutOfBag(state.oob_sum.copy(), state.oob_count.copy(), state.oob_log_ref)
        forest._generations = [dataclasses.replace(g) for g in state.generations]
        return forest

    def save(self, path: Any) -> None:
        """Write the forest (and its training columns) to one ``.npz`` file of plain arrays and JSON; no pickle."""
        save_forest(self, path)

    @classmethod
    def load(cls: type[_Self], path: Any) -> _Self:
        """Read a forest written by :meth:`save`."""
        return load_forest(cls, path)
