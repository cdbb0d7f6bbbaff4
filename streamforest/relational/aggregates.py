"""Vectorized group-by reductions on rows sorted by group.

Every function takes ``groups``, the group (owner row) of each child row, **non-decreasing**, and returns one value
per group ``0 .. n_groups-1``. Rows that do not take part (missing value, failed condition, after the cutoff) are
removed by the caller before. An empty group gives 0 for ``count``, ``sum`` and ``nunique`` and NaN otherwise.
Nothing loops over rows in Python: bincount, reduceat on segment starts and lexsort within groups.
"""

from __future__ import annotations

import numpy as np

#: Reductions of a numeric column.
NUMERIC = ("sum", "mean", "min", "max", "std", "nunique", "first", "last")
#: Reductions of a nominal column (codes).
NOMINAL = ("nunique", "mode_share", "first", "last")
#: What aggregates of aggregates may use over the per-row values below them.
OUTER = ("mean", "min", "max", "sum", "std")
FUNCS = ("count", *NUMERIC, "mode_share")


def reduce(func: str, groups: np.ndarray, n_groups: int, values: np.ndarray | None = None,
           times: np.ndarray | None = None) -> np.ndarray:
    """One reduction per group.

    Parameters
    ----------
    func
        ``count``, ``sum``, ``mean``, ``min``, ``max``, ``std`` (population), ``nunique``, ``mode_share`` (share
        of the most frequent value), ``first``/``last`` (the value at the earliest/latest ``times``; ties by row
        order).
    groups
        Group of each row, non-decreasing, in ``0 .. n_groups-1``.
    values
        The rows' values (not needed for ``count``).
    times
        The rows' times (for ``first`` and ``last``).

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
    groups = np.asarray(groups, dtype=np.int64)
    count = np.bincount(groups, minlength=n_groups).astype(np.float64)
    if func == "count":
        return count
    if values is None:
        raise ValueError(f"{func} needs values")
    x = np.asarray(values, dtype=np.float64)
    if func == "sum":
        return np.bincount(groups, weights=x, minlength=n_groups)
    empty = count == 0
    if func in ("mean", "std"):
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(groups, weights=x, minlength=n_groups) / count
            if func == "mean":
                return mean
            dev = x - mean[groups]
            return np.sqrt(np.bincount(groups, weights=dev * dev, minlength=n_groups) / count)
    out = np.full(n_groups, np.nan)
    if x.size == 0:
        return np.zeros(n_groups) if func == "nunique" else out
    starts = _starts(groups)
    owners = groups[starts]
    if func == "min":
        out[owners] = np.minimum.reduceat(x, starts)
    elif func == "max":
        out[owners] = np.maximum.reduceat(x, starts)
    elif func in ("nunique", "mode_share"):
        order = np.lexsort((x, groups))
        gs, xs = groups[order], x[order]
        new = np.ones(gs.size, dtype=bool)
        new[1:] = (gs[1:] != gs[:-1]) | (xs[1:] != xs[:-1])
        if func == "nunique":
            return np.bincount(gs[new], minlength=n_groups).astype(np.float64)
        run_starts = np.flatnonzero(new)
        run_len = np.diff(np.append(run_starts, gs.size))
        run_group = gs[run_starts]
        best = np.maximum.reduceat(run_len, _starts(run_group))
        out[run_group[_starts(run_group)]] = best / count[run_group[_starts(run_group)]]
    elif func in ("first", "last"):
        if times is None:
            raise ValueError(f"{func} needs times")
        order = np.lexsort((np.arange(groups.size), np.asarray(times, dtype=np.float64), groups))
        xs = x[order]
        ends = np.append(starts[1:], groups.size) - 1
        out[owners] = xs[starts] if func == "first" else xs[ends]
    else:
        raise ValueError(f"unknown aggregate {func!r} (expected one of {FUNCS})")
    out[empty] = np.nan
    return out


def _starts(groups: np.ndarray) -> np.ndarray:
    """Index of the first row of each run of equal groups."""
    if groups.size == 0:
        return np.zeros(0, dtype=np.int64)
    s = np.ones(groups.size, dtype=bool)
    s[1:] = groups[1:] != groups[:-1]
    return np.flatnonzero(s)


def grouping(owner: np.ndarray) -> np.ndarray:
    """Stable order that sorts rows by owner, leaving out rows without one (owner -1)."""
    order = np.argsort(owner, kind="stable")
    return order[owner[order] >= 0]
