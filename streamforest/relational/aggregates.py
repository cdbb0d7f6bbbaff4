"""Group-by reductions over a row index: one numba pass per candidate, no copy of a column.

A path's rows are indexed once (:func:`index`): ``starts`` (one entry per group, plus the end) and ``rows`` (the
rows of each group, in row order, rows without an owner left out) -- a counting sort. A reduction
(:func:`reduce_index`) then reads the column, the condition column and the times through that index, row by row,
and writes one value per group: memory is the output and one group's values. Rows that do not take part (missing
value, failed condition) are skipped inside the kernel. An empty group gives 0 for ``count``, ``sum`` and
``nunique`` and NaN otherwise (``share`` too: no rows, no proportion). Within a group values are visited in row
order, so a sum is the same float as ``np.bincount``'s.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Reductions of a numeric column.
NUMERIC = ("sum", "mean", "min", "max", "std", "nunique", "first", "last", "skew")
#: Reductions of a nominal column (codes).
NOMINAL = ("nunique", "mode_share", "first", "last")
#: What aggregates of aggregates may use over the per-row values below them.
OUTER = ("mean", "min", "max", "sum", "std")
#: Reductions of the rows alone (no column): how many meet the conditions, and what share of the group's rows.
ROWS = ("count", "share")
#: Every reduction; its position is the code the kernel reads (``_reduce``'s ``func``).
FUNCS = ("count", "sum", "mean", "min", "max", "std", "nunique", "first", "last", "mode_share", "share", "skew")
#: Condition operators of :func:`reduce_index`.
NO_CONDITION, EQUAL, GREATER = 0, 1, 2
_CODE = {f: i for i, f in enumerate(FUNCS)}
_NONE = np.zeros(0)


def index(owner: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """The row index of a grouping: ``starts`` (``n_groups + 1``) and ``rows`` (group by group, row order within).

    Rows whose owner is negative belong to no group.

    >>> starts, rows = index(np.array([2, 0, -1, 2, 0]), 3)
    >>> starts.tolist(), rows.tolist()
    ([0, 2, 2, 4], [1, 4, 0, 3])
    """
    owner = np.asarray(owner, dtype=np.int64)
    starts = _starts(owner, int(n_groups))
    # int32 row numbers below 2**31 rows: a path's index of 10 million rows is 40 MB, not 80
    rows = np.empty(int(starts[-1]), dtype=np.int32 if owner.size < 2**31 else np.int64)
    _fill(owner, starts, rows)
    return starts, rows


@njit(cache=True)
def _starts(owner: np.ndarray, n_groups: int) -> np.ndarray:
    starts = np.zeros(n_groups + 1, dtype=np.int64)
    for r in range(owner.size):
        if owner[r] >= 0:
            starts[owner[r] + 1] += 1
    for g in range(n_groups):
        starts[g + 1] += starts[g]
    return starts


@njit(cache=True)
def _fill(owner: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> None:
    at = starts[:-1].copy()
    for r in range(owner.size):
        o = owner[r]
        if o >= 0:
            rows[at[o]] = r
            at[o] += 1


def reduce_index(func: str, starts: np.ndarray, rows: np.ndarray, values: np.ndarray | None = None,
                 nominal: bool = False, cond: np.ndarray | None = None, op: int = NO_CONDITION,
                 threshold: float = 0.0, times: np.ndarray | None = None, cond2: np.ndarray | None = None,
                 op2: int = NO_CONDITION, threshold2: float = 0.0) -> np.ndarray:
    """One reduction per group of a row index.

    Parameters
    ----------
    func
        ``count``, ``sum``, ``mean``, ``min``, ``max``, ``std`` (population), ``nunique``, ``mode_share`` (share
        of the most frequent value), ``first``/``last`` (the value at the earliest/latest ``times``; ties by row
        order, unknown times after every known one), ``skew`` (the population skewness, the third central moment
        over the cubed standard deviation: NaN below 3 values, 0 when they are all equal), ``share`` (the rows
        meeting the conditions over all the group's rows: a proportion, which a count leaves to the group's size).
    starts, rows
        The index (:func:`index`).
    values
        A value per row (not needed for ``count``): float (NaN = missing) or, with ``nominal``, codes (-1 =
        missing).
    cond, op, threshold
        Rows take part only when ``cond[row] == threshold`` (``op`` :data:`EQUAL`) or ``> threshold``
        (:data:`GREATER`; NaN fails).
    cond2, op2, threshold2
        A second condition, met as well (a conjunction).
    times
        A time per row (for ``first`` and ``last``).

    >>> starts, rows = index(np.array([0, 0, 2, 0, 2]), 3)
    >>> x = np.array([1.0, 3.0, 5.0, 3.0, 7.0])
    >>> reduce_index("mean", starts, rows, x).tolist(), reduce_index("nunique", starts, rows, x).tolist()
    ([2.3333333333333335, nan, 6.0], [2.0, 0.0, 2.0])
    >>> reduce_index("count", starts, rows, cond=x, op=GREATER, threshold=2.0).tolist()
    [2.0, 0.0, 2.0]
    >>> reduce_index("share", starts, rows, cond=x, op=GREATER, threshold=2.0, cond2=x, op2=EQUAL,
    ...              threshold2=3.0).tolist()
    [0.6666666666666666, nan, 0.0]
    """
    if func not in _CODE:
        raise ValueError(f"unknown aggregate {func!r} (expected one of {FUNCS})")
    if func not in ROWS and values is None:
        raise ValueError(f"{func} needs values")
    if func in ("first", "last") and times is None:
        raise ValueError(f"{func} needs times")
    x = _NONE if func in ROWS else values
    return _reduce(_CODE[func], starts, rows, x, nominal, _NONE if cond is None else cond, op, float(threshold),
                   _NONE if times is None else np.asarray(times, dtype=np.float64),
                   _NONE if cond2 is None else cond2, op2, float(threshold2))


def reduce(func: str, groups: np.ndarray, n_groups: int, values: np.ndarray | None = None,
           times: np.ndarray | None = None) -> np.ndarray:
    """One reduction per group of rows given by their group (non-decreasing, in ``0 .. n_groups-1``); see
    :func:`reduce_index` for the functions.

    Examples
    --------
    >>> g = np.array([0, 0, 0, 2, 2])
    >>> x = np.array([1.0, 3.0, 3.0, 5.0, 7.0])
    >>> reduce("count", g, 3).tolist(), reduce("mean", g, 3, x).tolist()
    ([3.0, 0.0, 2.0], [2.3333333333333335, nan, 6.0])
    >>> reduce("max", g, 3, x).tolist(), reduce("nunique", g, 3, x).tolist(), float(reduce("mode_share", g, 3, x)[0])
    ([3.0, nan, 7.0], [2.0, 0.0, 2.0], 0.6666666666666666)
    >>> reduce("last", g, 3, x, times=np.array([5.0, 1.0, 2.0, 0.0, 0.0])).tolist()
    [1.0, nan, 7.0]
    """
    starts, rows = index(groups, n_groups)
    x = None if values is None else np.asarray(values, dtype=np.float64)
    return reduce_index(func, starts, rows, x, times=times)


@njit(cache=True)
def _before(a: float, b: float) -> bool:
    """Time order with unknown (NaN) times after every known one."""
    if a != a:
        return False
    return b != b or a < b


@njit(cache=True)
def _reduce(func: int, starts: np.ndarray, rows: np.ndarray, x: np.ndarray, nominal: bool, cond: np.ndarray,
            op: int, threshold: float, times: np.ndarray, cond2: np.ndarray, op2: int,
            threshold2: float) -> np.ndarray:
    n = starts.size - 1
    out = np.full(n, np.nan)
    widest = 0
    for g in range(n):
        widest = max(widest, starts[g + 1] - starts[g])
    buf = np.empty(widest)
    at = np.empty(widest, dtype=np.int64)
    for g in range(n):
        m = 0  # the group's values that take part, in row order
        for k in range(starts[g], starts[g + 1]):
            r = rows[k]
            if op == 1 and not (cond[r] == threshold):
                continue
            if op == 2 and not (cond[r] > threshold):
                continue
            if op2 == 1 and not (cond2[r] == threshold2):
                continue
            if op2 == 2 and not (cond2[r] > threshold2):
                continue
            if func == 0 or func == 10:
                m += 1
                continue
            v = x[r]
            if nominal:
                if v < 0:
                    continue
            elif v != v:
                continue
            buf[m] = v
            at[m] = r
            m += 1
        if func == 0:  # count
            out[g] = m
        elif func == 10:  # share
            if starts[g + 1] > starts[g]:
                out[g] = m / (starts[g + 1] - starts[g])
        elif func == 1:  # sum
            s = 0.0
            for i in range(m):
                s += buf[i]
            out[g] = s
        elif m == 0:
            if func == 6:  # nunique of nothing
                out[g] = 0.0
        elif func == 2 or func == 5 or func == 11:  # mean, std, skew
            s = 0.0
            for i in range(m):
                s += buf[i]
            mean = s / m
            if func == 2:
                out[g] = mean
            else:
                d = 0.0
                d3 = 0.0
                for i in range(m):
                    d += (buf[i] - mean) * (buf[i] - mean)
                    d3 += (buf[i] - mean) * (buf[i] - mean) * (buf[i] - mean)
                if func == 5:
                    out[g] = np.sqrt(d / m)
                elif m >= 3:
                    out[g] = 0.0 if d <= 0.0 else (d3 / m) / (d / m) ** 1.5
        elif func == 3:  # min
            best = buf[0]
            for i in range(1, m):
                best = min(best, buf[i])
            out[g] = best
        elif func == 4:  # max
            best = buf[0]
            for i in range(1, m):
                best = max(best, buf[i])
            out[g] = best
        elif func == 6 or func == 9:  # nunique, mode_share
            vals = np.sort(buf[:m])
            distinct, run, longest = 1, 1, 1
            for i in range(1, m):
                if vals[i] == vals[i - 1]:
                    run += 1
                else:
                    distinct += 1
                    run = 1
                longest = max(longest, run)
            out[g] = float(distinct) if func == 6 else longest / m
        else:  # first (7), last (8): the earliest / latest time, ties by row order
            best = 0
            for i in range(1, m):
                if func == 7:
                    if _before(times[at[i]], times[at[best]]):
                        best = i
                elif not _before(times[at[i]], times[at[best]]):
                    best = i
            out[g] = buf[best]
    return out
