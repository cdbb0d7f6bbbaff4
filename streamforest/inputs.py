"""What the forest accepts from its callers: labels checked and coded, inputs binned column by column.

:class:`FeatureColumns` holds the features in arrival order with the binner each learned on arrival, and maps any
later input (a 2-D array in arrival order, a mapping or data frame by feature name, or one sample as a mapping of
scalars) to the forest's feature-major bins. The label functions turn ``y`` into the trees' codes: class indices
under classification, float targets under regression.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from streamforest.binning import N_BINS, ColumnBinner, RowBinner

#: One value of a one-row mapping (what the per-sample prediction path bins without building columns).
_SCALARS = (int, float, str, bool, np.generic, type(None))


def is_int(value: Any, numpy: bool = True) -> bool:
    """Whether ``value`` is an integer and not a bool (``True == 1`` in Python, not in a parameter); numpy
    integers count unless ``numpy=False`` (where the value goes on to JSON, which takes Python ints only).

    Examples
    --------
    >>> is_int(3), is_int(np.int64(3)), is_int(np.int64(3), numpy=False), is_int(True), is_int(3.0)
    (True, True, False, False, False)
    """
    return isinstance(value, (int, np.integer) if numpy else int) and not isinstance(value, bool)


def is_number(value: Any, numpy: bool = True) -> bool:
    """Whether ``value`` is an integer or a float and not a bool; numpy numbers count unless ``numpy=False``.

    Examples
    --------
    >>> is_number(0.5), is_number(np.float32(0.5)), is_number(np.float32(0.5), numpy=False), is_number(False)
    (True, True, False, False)
    """
    types = (int, float, np.integer, np.floating) if numpy else (int, float)
    return isinstance(value, types) and not isinstance(value, bool)


def regression_targets(y: np.ndarray) -> np.ndarray:
    """``y`` as finite float64 regression targets."""
    try:
        yr = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("regression targets must be numbers") from None
    if not np.isfinite(yr).all():
        raise ValueError("y contains NaN or infinite values")
    return yr


def first_labels(y: Any, task: str) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The labels that fix the training samples: ``(classes, class codes, regression targets)``.

    Examples
    --------
    >>> classes, codes, _ = first_labels(np.array(["b", "a", "b"]), "classification")
    >>> classes.tolist(), codes.tolist()
    (['a', 'b'], [1, 0, 1])
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {y.shape}")
    if y.size == 0:
        raise ValueError("y is empty")
    if task == "regression":
        return None, np.zeros(y.size, dtype=np.int32), regression_targets(y)
    if y.dtype.kind == "f" and np.isnan(y).any():
        raise ValueError("y contains NaN labels")
    if y.dtype.kind == "O" and any(v is None or (isinstance(v, float) and math.isnan(v)) for v in y):
        raise ValueError("y contains missing labels")
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"y has a single class ({classes[0]!r}): at least two are needed")
    return classes, codes.astype(np.int32), np.zeros(y.size, dtype=np.float64)


def later_labels(y: np.ndarray, task: str, classes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Labels of more samples, coded like the first ones: ``(class codes, regression targets)``."""
    if task == "regression":
        yr = regression_targets(y)
        return np.zeros(yr.size, dtype=np.int32), yr
    if y.dtype.kind == "f" and np.isnan(y).any():
        raise ValueError("y contains NaN labels")
    pos = np.searchsorted(classes, y)
    pos = np.clip(pos, 0, len(classes) - 1)
    bad = classes[pos] != y
    if bad.any():
        raise ValueError(f"y contains classes not seen on the first call: {sorted(set(y[bad].tolist()))[:5]}")
    return pos.astype(np.int32), np.zeros(y.size, dtype=np.float64)


def named_columns(X: Any) -> tuple[list[str], list[np.ndarray]]:
    """The feature names and columns of a whole training set (a mapping, or a 2-D array named ``x0, x1, ...``)."""
    if isinstance(X, Mapping):
        names = [str(k) for k in X]
        columns = [np.asarray(X[k]) for k in X]
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (samples x features), got shape {X.shape}")
        names = [f"x{j}" for j in range(X.shape[1])]
        columns = [X[:, j] for j in range(X.shape[1])]
    if len(set(names)) != len(names):
        raise ValueError("duplicate feature names in X")
    if not columns:
        raise ValueError("X has no features")
    return names, columns


def _bin_values(binner: ColumnBinner, out: np.ndarray) -> None:
    """A numeric feature's row of :meth:`FeatureColumns.bin_values` written to ``out``."""
    if binner.is_nominal:
        return
    out[0] = np.inf
    out[0, : binner.edges.size] = binner.edges
    out[1, : binner.lows.size] = binner.lows
    out[2, : binner.highs.size] = binner.highs


class Binned(NamedTuple):
    """Samples a forest has binned already (:meth:`~streamforest.FeatureStreamForest.binned`), given back to the same
    forest's predictions and encodings so that they are not binned again: ``bins`` has one row per feature in
    arrival order and one column per sample, ``uint8``.

    Examples
    --------
    >>> cols = FeatureColumns([ColumnBinner.fit("a", np.array([1.0, 2.0, 3.0]))])
    >>> bins = cols.bin({"a": [3.0, 1.0]})
    >>> cols.bin(Binned(bins)) is bins
    True
    """

    bins: np.ndarray


class FeatureColumns:
    """The features in arrival order and their binners: maps inputs to bins ``(n_features, n_samples)``.

    Examples
    --------
    >>> cols = FeatureColumns()
    >>> cols.append(ColumnBinner.fit("a", np.array([1.0, 2.0, 3.0])))
    >>> cols.append(ColumnBinner.fit("b", np.array(["x", "y", "x"], dtype=object)))
    >>> cols.bin({"b": ["y", None], "a": [2.0, np.nan]}).tolist()
    [[1, 255], [1, 255]]
    >>> cols.bin(np.array([[3.0, "x"]], dtype=object)).tolist()
    [[2], [0]]
    """

    def __init__(self, binners: list[ColumnBinner] | None = None) -> None:
        self.binners: list[ColumnBinner] = list(binners or [])
        self.names: list[str] = [b.name for b in self.binners]
        self._nominal = np.array([b.splits_by_sets for b in self.binners], dtype=np.bool_)
        self._row_binner: tuple[int, RowBinner] | None = None
        self._values = np.zeros((max(4, len(self.binners)), 3, N_BINS))
        for j, b in enumerate(self.binners):
            _bin_values(b, self._values[j])

    def __len__(self) -> int:
        return len(self.binners)

    def append(self, binner: ColumnBinner) -> None:
        self.binners.append(binner)
        self.names.append(binner.name)
        # Kept as it grows: the trees take it at every growth, and rebuilding it costs O(features) each time.
        self._nominal = np.append(self._nominal, binner.splits_by_sets)
        j = len(self.binners) - 1
        if j == self._values.shape[0]:
            self._values = np.concatenate((self._values, np.zeros_like(self._values)))
        _bin_values(binner, self._values[j])

    def replace_last(self, binner: ColumnBinner) -> None:
        """The last feature's binner replaced by one of the same name and bins (a change of its split rule)."""
        self.binners[-1] = binner
        self._nominal = np.append(self._nominal[:-1], binner.splits_by_sets)
        self._row_binner = None

    def is_nominal(self) -> np.ndarray:
        """Which features the trees split by sets of categories, in arrival order (do not modify)."""
        return self._nominal

    def bin_values(self) -> np.ndarray:
        """Per feature, in arrival order, its bins' upper edges (``inf`` past the last), least and greatest training
        values: shape ``(n_features, 3, N_BINS)``, zeros for nominal features (do not modify)."""
        return self._values[: len(self.binners)]

    def bin(self, X: Any, what: str = "X") -> np.ndarray:
        """Bin prediction or sample inputs to a C-contiguous ``(n_features, m)`` array (:class:`Binned` ones are
        returned as they are)."""
        d = len(self.binners)
        if isinstance(X, Binned):
            bins = X.bins
            if not isinstance(bins, np.ndarray) or bins.dtype != np.uint8 or bins.ndim != 2 or bins.shape[0] != d:
                got = f"{bins.dtype} {bins.shape}" if isinstance(bins, np.ndarray) else type(bins).__name__
                raise ValueError(f"{what}: binned samples must be uint8 of shape ({d}, n_samples), got {got}")
            return bins
        if isinstance(X, Mapping) or (hasattr(X, "keys") and hasattr(X, "__getitem__") and not hasattr(X, "shape")):
            return self._bin_mapping(X, what)
        if hasattr(X, "columns") and hasattr(X, "__getitem__"):  # a data frame: by column name
            return self._bin_mapping({str(c): X[c] for c in X.columns}, what)
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"{what} must be 2-D (samples x features), got shape {X.shape}")
        if X.shape[1] != d:
            raise ValueError(f"{what} has {X.shape[1]} columns; the forest has {d} features (in arrival order)")
        out = np.empty((d, X.shape[0]), dtype=np.uint8)
        for j, b in enumerate(self.binners):
            out[j] = b.transform(X[:, j])
        return out

    def _bin_mapping(self, X: Mapping, what: str) -> np.ndarray:
        keys = list(X.keys())
        if keys == self.names:
            # The names themselves, in the forest's own order (one sample at a time from the River adapter): the
            # values as they come, with no name lookup and no set arithmetic.
            row = list(X.values())
        else:
            names = [str(k) for k in keys]
            if names != self.names:
                known = set(self.names)
                unknown = [k for k in names if k not in known]
                if unknown:
                    raise ValueError(f"{what} has unknown feature names: {unknown[:10]}")
                given = set(names)
                missing = [k for k in self.names if k not in given]
                if missing:
                    raise ValueError(f"{what} lacks features: {missing[:10]} (pass NaN for missing values)")
            by_name = {str(k): k for k in keys}
            row = [X[by_name[name]] for name in self.names]
        if all(map(isinstance, row, repeat(_SCALARS))):  # map: no generator frame per value (once per prediction)
            bins = self._bin_row(row)
            if bins is not None:
                return bins[:, None]
        lengths = {np.asarray(v).shape[0] if np.ndim(v) else 1 for v in row}
        if len(lengths) != 1:
            raise ValueError(f"{what}: columns differ in length ({sorted(lengths)})")
        m = lengths.pop()
        out = np.empty((len(self.binners), m), dtype=np.uint8)
        for j, (v, b) in enumerate(zip(row, self.binners, strict=True)):
            out[j] = b.transform(np.atleast_1d(np.asarray(v)))
        return out

    def _bin_row(self, row: list[Any]) -> np.ndarray | None:
        """Bins of one sample given as one scalar per feature (arrival order); None if it needs the column path."""
        # Binners are only ever appended: their count identifies what the cached row binner was built from.
        cached = self._row_binner
        if cached is None or cached[0] != len(self.binners):
            cached = self._row_binner = (len(self.binners), RowBinner(self.binners))
        return cached[1].transform(row)


POLICIES = ("challenger", "baseline")
SPLIT_THRESHOLDS = ("midpoint", "edge")
NUMERIC_CATEGORIES = ("auto", "categories", "order")
TASKS = ("classification", "regression")
FEATURE_SAMPLING = ("auto", "uniform", "importance")


def check_params(p: Mapping[str, Any]) -> None:
    """Refuse bad parameters of :class:`~streamforest.FeatureStreamForest` (``p``: name -> value) with a message
    naming the parameter."""

    def positive_int(name: str, allow_none: bool = False) -> None:
        v = p[name]
        if v is None and allow_none:
            return
        if not is_int(v) or v < 1:
            raise ValueError(f"{name} must be a positive integer{' or None' if allow_none else ''}, got {v!r}")

    tpg = p["trees_per_generation"]
    if tpg != "auto" and not (is_int(tpg) and tpg >= 1):
        raise ValueError(f"trees_per_generation must be a positive integer or 'auto', got {tpg!r}")
    positive_int("max_depth", allow_none=True)
    positive_int("max_subspace", allow_none=True)
    positive_int("max_generations", allow_none=True)
    if p["max_generations"] is not None and p["max_generations"] < 2:
        raise ValueError(f"max_generations must be at least 2, got {p['max_generations']}")
    mf = p["max_features"]
    if not is_number(mf):
        raise TypeError(f"max_features must be a float in (0, 1] or a positive int, got {mf!r}")
    if isinstance(mf, (float, np.floating)) and not 0 < mf <= 1:
        raise ValueError(f"max_features as a share must be in (0, 1], got {mf}")
    if isinstance(mf, (int, np.integer)) and mf < 1:
        raise ValueError(f"max_features as a count must be >= 1, got {mf}")
    msl = p["min_samples_leaf"]
    if msl != "auto" and not (is_number(msl, numpy=False) and msl >= 1):
        raise ValueError(f"min_samples_leaf must be a number >= 1 or 'auto', got {msl!r}")
    if not (isinstance(p["min_category_size"], (int, float)) and p["min_category_size"] >= 0):
        raise ValueError(f"min_category_size must be a number >= 0, got {p['min_category_size']!r}")
    if p["split_threshold"] not in SPLIT_THRESHOLDS:
        raise ValueError(f"split_threshold must be one of {SPLIT_THRESHOLDS}, got {p['split_threshold']!r}")
    if p["numeric_categories"] not in NUMERIC_CATEGORIES:
        raise ValueError(f"numeric_categories must be one of {NUMERIC_CATEGORIES}, got {p['numeric_categories']!r}")
    sf = p["split_features"]
    if sf is not None and sf != "auto" and (not is_number(sf, numpy=False) or not 0 < sf <= 1):
        raise ValueError(f"split_features must be in (0, 1], None or 'auto', got {sf!r}")
    if p["policy"] not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {p['policy']!r}")
    if p["feature_sampling"] not in FEATURE_SAMPLING:
        raise ValueError(f"feature_sampling must be one of {FEATURE_SAMPLING}, got {p['feature_sampling']!r}")
    if not isinstance(p["prune_threshold"], (int, float)) or not 0 <= p["prune_threshold"] < 1:
        raise ValueError(f"prune_threshold must be in [0, 1), got {p['prune_threshold']!r}")
    ms = p["max_samples"]
    if ms is not None and not (is_int(ms) and ms >= 1) and not (isinstance(ms, float) and 0 < ms <= 1):
        raise ValueError(f"max_samples must be a positive integer, a float in (0, 1] or None, got {ms!r}")
    if p["task"] not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {p['task']!r}")
