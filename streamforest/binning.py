"""Binning of feature columns: each column is binned once, on arrival, into at most 255 bins plus a missing bin.

Trees never see raw values: they train and route on one byte per value. The same :class:`ColumnBinner` maps the
training column, later samples and prediction inputs, so a threshold learned on bins means the same thing
everywhere.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numba import njit, prange

from streamforest.threads import SMALL_WORK

#: The bin reserved for missing values (NaN, None, unseen categories).
MISSING_BIN = 255
#: The largest number of value bins a column may have.
MAX_BINS = 255
#: The bins of a column, the missing bin included: the rows of a histogram (a bin is one ``uint8``).
N_BINS = MISSING_BIN + 1
#: 64-bit words of a bitmap over the bins (the left categories of a nominal split).
BIN_WORDS = N_BINS // 64
#: Values binned together by one thread.
_BIN_BLOCK = 4096
#: Quantiles are estimated on at most this many values, drawn with a fixed seed (deterministic).
QUANTILE_SUBSAMPLE = 200_000
#: ``gaps=True``: a column of at most this many distinct values has empty bins between them (see
#: :func:`_gap_edges`); with more, two bins a gap would leave no room for the midway edge.
GAP_DISTINCT_MAX = (MAX_BINS - 1) // 2 + 1


def _is_nominal_array(values: np.ndarray) -> bool:
    return values.dtype.kind in "OUSb"


def _as_float(values: np.ndarray, name: str) -> np.ndarray:
    try:
        out = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"feature {name!r}: numeric values expected; declare kind='nominal' for categories ({exc})"
        ) from None
    if np.isinf(out).any():
        raise ValueError(f"feature {name!r}: infinite values are not allowed (use NaN for missing)")
    return out


@njit(cache=True)
def _bin_sorted(edges: np.ndarray, n: int, v: float) -> int:
    # How many of the first n (ascending) edges lie below v: numpy's searchsorted(side="left").
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if edges[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _bin_numeric(edges: np.ndarray, x: np.ndarray, out: np.ndarray) -> bool:
    """Bins of the numeric column ``x`` into ``out`` (one pass, no temporary arrays); False on an infinite value."""
    for i in range(x.shape[0]):
        v = x[i]
        if np.isinf(v):
            return False
        out[i] = MISSING_BIN if np.isnan(v) else _bin_sorted(edges, edges.shape[0], v)
    return True


@njit(parallel=True, cache=True)
def _bin_numeric_blocks(edges: np.ndarray, x: np.ndarray, out: np.ndarray) -> bool:
    """:func:`_bin_numeric` of a large column, blocks of values in parallel (the binary searches of a 200,000-value
    column are a few percent of its arrival)."""
    n = x.shape[0]
    n_blocks = (n + _BIN_BLOCK - 1) // _BIN_BLOCK
    finite = np.ones(n_blocks, dtype=np.bool_)
    for blk in prange(n_blocks):
        a, b = blk * _BIN_BLOCK, min(n, (blk + 1) * _BIN_BLOCK)
        finite[blk] = _bin_numeric(edges, x[a:b], out[a:b])
    return finite.all()


@njit(cache=True)
def _bin_numeric_row(edges: np.ndarray, n_edges: np.ndarray, x: np.ndarray, at: np.ndarray, out: np.ndarray) -> bool:
    """Bins of one row's numeric values ``x`` (feature ``at[r]`` against ``edges[r, :n_edges[r]]``) into ``out``;
    False on an infinite value."""
    for r in range(x.shape[0]):
        v = x[r]
        if np.isinf(v):
            return False
        out[at[r]] = MISSING_BIN if np.isnan(v) else _bin_sorted(edges[r], n_edges[r], v)
    return True


@dataclass(frozen=True)
class ColumnBinner:
    """How one feature column maps to bins.

    Parameters
    ----------
    name
        The feature's name.
    kind
        ``"numeric"``: bin ``b`` holds values ``edges[b-1] < x <= edges[b]``. ``"nominal"``: bin ``b`` is
        ``categories[b]``; the trees split nominal columns by sets of categories.
    edges
        Upper edges of the numeric bins (one fewer than the bins).
    categories
        The category values of a nominal column, in bin order.
    lows, highs
        The least and the greatest training value in each numeric bin (a tree's split placed midway between the
        values of its node reads them: ``split_threshold="midpoint"``).
    ordered
        Whether the trees split a nominal column as numbers: by a threshold on its categories' order (they must be
        numbers in increasing order, :attr:`numbers_in_order`) rather than by sets of categories. Unseen categories
        still go with the missing values. Chosen when the feature arrives (``numeric_categories``).

    With ``gaps=True`` (:meth:`fit`), a numeric column of few distinct values (at most
    :data:`GAP_DISTINCT_MAX`) gets empty bins between them, evenly spaced by value, rather than one edge midway:
    a threshold placed midway between a node's values then lands near that midpoint even when the node lacks
    values that other samples have (scikit-learn's threshold), and later values in the same gap are told apart.

    Examples
    --------
    >>> import numpy as np
    >>> b = ColumnBinner.fit("x", np.array([3.0, 1.0, np.nan, 2.0, 1.0]))
    >>> b.n_bins
    3
    >>> b.transform(np.array([1.0, 2.5, np.nan, 10.0])).tolist()
    [0, 1, 255, 2]
    >>> c = ColumnBinner.fit("colour", np.array(["red", "blue", "red", None], dtype=object))
    >>> c.kind, c.categories
    ('nominal', ['blue', 'red'])
    >>> c.transform(np.array(["red", "green", None], dtype=object)).tolist()
    [1, 255, 255]
    >>> g = ColumnBinner.fit("x", np.array([3.0, 1.0, 2.0]), gaps=True)
    >>> g.n_bins, g.transform(np.array([1.0, 1.4, 1.6, 2.0, 3.0])).tolist()
    (253, [0, 51, 76, 126, 252])
    """

    name: str
    kind: str
    edges: np.ndarray = field(default_factory=lambda: np.empty(0))
    categories: list[Any] = field(default_factory=list)
    lows: np.ndarray = field(default_factory=lambda: np.empty(0))
    highs: np.ndarray = field(default_factory=lambda: np.empty(0))
    ordered: bool = False

    def __deepcopy__(self, memo: dict) -> ColumnBinner:
        """Itself: the bins learned when a feature arrived never change (a copied forest shares them)."""
        return self

    @property
    def n_bins(self) -> int:
        """The number of value bins (the missing bin not counted)."""
        if self.kind == "nominal":
            return max(len(self.categories), 1)
        return len(self.edges) + 1

    @property
    def is_nominal(self) -> bool:
        return self.kind == "nominal"

    @property
    def splits_by_sets(self) -> bool:
        """Whether the trees split this column by sets of categories (nominal and not :attr:`ordered`)."""
        return self.kind == "nominal" and not self.ordered

    @property
    def numbers_in_order(self) -> bool:
        """Whether this is a nominal column of at least three categories that are numbers (not booleans) in
        increasing order, so that it can be split as numbers (:attr:`ordered`; with two, both rules split alike).

        Examples
        --------
        >>> import numpy as np
        >>> ColumnBinner.fit("age", np.array([30.0, 10.0, 20.0]), kind="nominal").numbers_in_order
        True
        >>> ColumnBinner.fit("c", np.array(["a", "b", "c"], dtype=object)).numbers_in_order
        False
        """
        cats = self.categories
        return (self.kind == "nominal" and len(cats) >= 3
                and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in cats)
                and all(a < b for a, b in itertools.pairwise(cats)))

    def ruled(self, numeric_categories: str) -> ColumnBinner:
        """This binner split as numbers (:attr:`ordered`) when ``numeric_categories`` is ``"order"`` and its
        categories are numbers in order (:attr:`numbers_in_order`), else itself (``"auto"`` decides after growing)."""
        if numeric_categories == "order" and self.numbers_in_order:
            return replace(self, ordered=True)
        return self

    @classmethod
    def fit(cls, name: str, values: Any, kind: str | None = None, gaps: bool = False) -> ColumnBinner:
        """Learn the bins of a column (quantile edges, or the categories of a nominal column); ``gaps``: empty bins
        between the values of a numeric column that has few (see the class)."""
        values = np.asarray(values)
        if values.ndim != 1:
            raise ValueError(f"feature {name!r}: a column must be 1-D, got shape {values.shape}")
        if kind is None:
            kind = "nominal" if _is_nominal_array(values) else "numeric"
        if kind == "nominal":
            return cls(name=name, kind="nominal", categories=_fit_categories(values))
        if kind != "numeric":
            raise ValueError(f"feature {name!r}: kind must be 'numeric' or 'nominal', got {kind!r}")
        x = _as_float(values, name)
        edges, lows, highs = _fit_edges(x[~np.isnan(x)], gaps)
        return cls(name=name, kind="numeric", edges=edges, lows=lows, highs=highs)

    def transform(self, values: Any) -> np.ndarray:
        """Map values to bins (``uint8``); missing values and unseen categories to :data:`MISSING_BIN`."""
        values = np.asarray(values)
        if values.ndim != 1:
            raise ValueError(f"feature {self.name!r}: a column must be 1-D, got shape {values.shape}")
        if self.kind == "nominal":
            return _transform_categories(values, self.categories)
        try:
            x = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            x = _as_float(values, self.name)  # raises with its message
        out = np.empty(x.shape[0], dtype=np.uint8)
        # A parallel region costs 10 us even on one thread: small inputs (a River sample's) stay serial.
        bin_numeric = _bin_numeric_blocks if x.shape[0] >= SMALL_WORK else _bin_numeric
        if not bin_numeric(self.edges, x, out):
            _as_float(values, self.name)  # raises with its message
        return out

    def threshold(self, bin_index: int) -> float:
        """The raw-value threshold of a numeric split ``bin <= bin_index`` (i.e. ``x <= threshold``)."""
        if bin_index >= len(self.edges):
            return float("inf")
        return float(self.edges[bin_index])

    def to_json(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "kind": self.kind,
            "edges": [float(e) for e in self.edges],
            "categories": list(self.categories),
            "lows": [float(v) for v in self.lows],
            "highs": [float(v) for v in self.highs],
        }
        if self.ordered:
            out["ordered"] = True
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ColumnBinner:
        edges = np.asarray(d["edges"], dtype=np.float64)
        if "lows" in d:
            lows, highs = np.asarray(d["lows"], dtype=np.float64), np.asarray(d["highs"], dtype=np.float64)
        else:
            # Saved without them: the bins' edges bound their values.
            lows, highs = _edge_bounds(edges) if d["kind"] == "numeric" else (np.empty(0), np.empty(0))
        return cls(name=d["name"], kind=d["kind"], edges=edges, categories=list(d["categories"]), lows=lows,
                   highs=highs, ordered=bool(d.get("ordered", False)))


def _fit_edges(x: np.ndarray, gaps: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bin edges (midpoints between distinct values when there are few, or empty bins between them under ``gaps``
    (:func:`_gap_edges`); quantiles otherwise), and the least and the greatest value in each bin (of the quantile
    subsample past :data:`QUANTILE_SUBSAMPLE` values)."""
    if x.size == 0:
        return np.empty(0), np.zeros(1), np.zeros(1)
    if x.size > QUANTILE_SUBSAMPLE:
        x = np.random.default_rng(0).choice(x, QUANTILE_SUBSAMPLE, replace=False)
    x = np.sort(x)  # once: the distinct values, and quantiles of a sorted array cost a third less
    distinct = x[np.concatenate(([True], x[1:] != x[:-1]))]
    if gaps and 2 <= distinct.size <= GAP_DISTINCT_MAX:
        return _gap_edges(distinct)
    if distinct.size <= MAX_BINS:
        return (distinct[:-1] + distinct[1:]) / 2.0, distinct, distinct
    qs = np.quantile(x, np.linspace(0, 1, MAX_BINS + 1)[1:-1], method="linear")
    # An edge that falls on a value would put that value in the lower bin; that is what x <= edge means.
    edges = np.unique(qs)
    # Bin b holds x[ends[b-1]:ends[b]]; a bin no value falls in is bounded by its edges (no split borders it).
    ends = np.searchsorted(x, edges, side="right")
    starts = np.concatenate(([0], ends))
    ends = np.concatenate((ends, [x.size]))
    lows, highs = _edge_bounds(edges)
    filled = ends > starts
    lows[filled] = x[starts[filled]]
    highs[filled] = x[ends[filled] - 1]
    return edges, lows, highs


def _gap_edges(distinct: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges of a bin per distinct value (its upper edge the value itself) with the same even number of bins in
    every gap between two values, spaced evenly by value, as many as :data:`MAX_BINS` allows; bounds as in
    :func:`_fit_edges`. The number is even so that one edge of each gap is its midpoint: where a node has the two
    values of a gap, the midway threshold is the one the bins without gaps give."""
    per_gap = (MAX_BINS - 1) // (distinct.size - 1) // 2 * 2
    steps = np.arange(per_gap) / per_gap
    lower = distinct[:-1]
    edges = (lower[:, None] + np.diff(distinct)[:, None] * steps[None, :]).ravel()
    lows, highs = _edge_bounds(edges)
    # Bin b holds edges[b-1] < x <= edges[b]: each value's bin is the one its own edge closes (the last: past them).
    at = np.arange(distinct.size) * per_gap
    lows[at] = distinct
    highs[at] = distinct
    return edges, lows, highs


def _edge_bounds(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of each bin's values known from its edges alone: ``(lower edge, upper edge)``, the first bin's lower and
    the last bin's upper bound taken as its one edge."""
    if edges.size == 0:
        return np.zeros(1), np.zeros(1)
    return np.concatenate((edges[:1], edges)), np.concatenate((edges, edges[-1:]))


def _category_key(v: Any) -> Any:
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return int(f) if f.is_integer() else f
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.str_):
        return str(v)
    return v


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and np.isnan(v))


def _fit_categories(values: np.ndarray) -> list[Any]:
    present = [_category_key(v) for v in values.tolist() if not _is_missing(v)]
    if not all(isinstance(v, (int, float, str, bool)) for v in present):
        raise TypeError("nominal values must be strings, numbers or booleans")
    seen = set(present)
    cats = sorted(seen, key=lambda v: (type(v).__name__, v))
    if len(cats) > MAX_BINS:
        # The most frequent categories keep their own bin; the rarest fold into the missing bin.
        counts: dict[Any, int] = {}
        for v in values.tolist():
            if not _is_missing(v):
                k = _category_key(v)
                counts[k] = counts.get(k, 0) + 1
        keep = set(sorted(cats, key=lambda c: (-counts[c], type(c).__name__, c))[:MAX_BINS])
        cats = [c for c in cats if c in keep]
    return cats


def _transform_categories(values: np.ndarray, categories: list[Any]) -> np.ndarray:
    lookup = {c: i for i, c in enumerate(categories)}
    out = np.full(values.shape[0], MISSING_BIN, dtype=np.uint8)
    if values.dtype.kind in "fiu" and all(isinstance(c, (int, float)) for c in categories):
        # Numeric category codes: vectorised lookup rather than a Python loop per value.
        cat_vals = np.asarray(categories, dtype=np.float64)
        order = np.argsort(cat_vals)
        x = values.astype(np.float64)
        pos = np.searchsorted(cat_vals[order], x)
        pos = np.clip(pos, 0, max(len(categories) - 1, 0))
        if len(categories):
            hit = cat_vals[order][pos] == x
            out[hit] = order[pos[hit]].astype(np.uint8)
        return out
    for i, v in enumerate(values.tolist()):
        if not _is_missing(v):
            b = lookup.get(_category_key(v))
            if b is not None:
                out[i] = b
    return out


class RowBinner:
    """Bins one sample of many features at once, for the per-sample path (predicting one row at a time).

    Binning a row column by column costs a few numpy calls per feature; here the numeric features are binned in
    one vectorised comparison against their edges (padded with ``inf``), and nominal ones by a dictionary lookup.
    The bins are the ones :meth:`ColumnBinner.transform` gives.

    Examples
    --------
    >>> import numpy as np
    >>> binners = [ColumnBinner.fit("a", np.array([1.0, 2.0, 3.0])),
    ...            ColumnBinner.fit("c", np.array(["x", "y"], dtype=object))]
    >>> RowBinner(binners).transform([2.6, "y"]).tolist(), RowBinner(binners).transform([None, "z"]).tolist()
    ([2, 1], [255, 255])
    """

    def __init__(self, binners: list[ColumnBinner]) -> None:
        self.n_features = len(binners)
        self.numeric = [j for j, b in enumerate(binners) if not b.is_nominal]
        self._all_numeric = len(self.numeric) == self.n_features
        self._at = np.array(self.numeric, dtype=np.int64)
        self._n_edges = np.array([len(binners[j].edges) for j in self.numeric], dtype=np.int64)
        self.edges = np.zeros((len(self.numeric), max(self._n_edges.max(initial=0), 1)))
        for r, j in enumerate(self.numeric):
            self.edges[r, : self._n_edges[r]] = binners[j].edges
        self.nominal = [(j, {c: i for i, c in enumerate(binners[j].categories)}) for j, b in enumerate(binners)
                        if b.is_nominal]

    def transform(self, values: list[Any]) -> np.ndarray | None:
        """The bins (``uint8``, shape ``(n_features,)``) of one value per feature, in the binners' order.

        Returns ``None`` when a numeric value is neither a number nor missing, or is infinite: the column path
        (:meth:`ColumnBinner.transform`) then raises with its message.
        """
        out = np.empty(self.n_features, dtype=np.uint8)
        if self.numeric:
            try:
                x = np.array(values if self._all_numeric else [values[j] for j in self.numeric], dtype=np.float64)
            except (TypeError, ValueError):
                return None
            if not _bin_numeric_row(self.edges, self._n_edges, x, self._at, out):
                return None
        for j, lookup in self.nominal:
            v = values[j]
            out[j] = MISSING_BIN if _is_missing(v) else lookup.get(_category_key(v), MISSING_BIN)
        return out
