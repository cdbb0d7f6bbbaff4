"""The last labelled samples of a River stream, as numpy columns in a ring buffer.

River hands samples one at a time as dicts whose keys come and go; the forest trains on columns. The window keeps
one row per key ever seen (in order of first sight) and one slot per sample: a numeric key's values as floats (NaN
where a sample lacks it), a nominal key's (a key whose first value is a string) as objects (None where absent).
It also counts, per key, how many samples of the window have it, so that a key's arrival in the forest can wait
until enough samples carry it. After a concept drift the window can forget all but its latest samples
(:meth:`SampleWindow.forget`); it then refills up to its limit, and can hold again those of the forgotten samples no
later one has overwritten (:meth:`SampleWindow.recall`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np


def _sort_key(key: Hashable) -> tuple[str, str]:
    # Keys of one sample may be of mixed types: order them by their text, which every key has.
    return (str(key), repr(key))


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, np.floating) and np.isnan(v))


#: The types most values have, checked before the abstract ``numbers.Real`` (an ABC check costs a microsecond).
_PLAIN_NUMBERS = (float, int, bool)


def _is_number(v: Any) -> bool:
    return type(v) in _PLAIN_NUMBERS or isinstance(v, (np.bool_, numbers.Real))


class SampleWindow:
    """A ring buffer of the last ``size`` labelled samples.

    Parameters
    ----------
    size
        How many samples the window can hold (the ring's length).
    regression
        Labels are numbers (float column) rather than class codes (int column).
    limit
        How many samples it holds (``None``: ``size``); the oldest is dropped when a new one comes past it.
        :meth:`hold` moves it up to ``size``.

    Examples
    --------
    >>> w = SampleWindow(size=3)
    >>> for x, y in [({"b": 1.0, "a": "red"}, 0), ({"a": "blue"}, 1), ({"b": 2.5}, 0), ({"c": 7}, 1)]:
    ...     _ = w.add(x, y)
    >>> w.keys, w.count.tolist()   # the first sample's keys in sorted order; "a" is now in one sample of three
    (['a', 'b', 'c'], [1, 1, 1])
    >>> w.column(1).tolist(), w.column(0).tolist(), w.labels().tolist()
    ([nan, 2.5, nan], ['blue', None, None], [1, 0, 1])
    >>> w.forget(keep=2)   # a drift: only the last two samples stay
    >>> len(w), w.count.tolist(), w.labels().tolist()
    (2, [0, 1, 1], [0, 1])
    """

    def __init__(self, size: int, regression: bool = False, limit: int | None = None) -> None:
        self.size = int(size)
        self.limit = self.size if limit is None else int(limit)
        if not 1 <= self.limit <= self.size:
            raise ValueError(f"limit must be between 1 and size ({self.size}), got {limit!r}")
        self.regression = regression
        self.keys: list[Hashable] = []
        self.index: dict[Hashable, int] = {}
        self.nominal: list[bool] = []
        self._has_nominal = False
        self.n_seen = 0
        self._first = 0  # the number (in order of arrival) of the oldest sample not forgotten
        self._count = np.zeros(0, dtype=np.int64)
        self._values = np.full((0, self.size), np.nan)
        self._objects = np.full((0, self.size), None, dtype=object)
        self._present = np.zeros((0, self.size), dtype=np.bool_)
        self._y = np.zeros(self.size, dtype=np.float64 if regression else np.int64)

    def __len__(self) -> int:
        return min(self.n_seen - self._first, self.limit)

    def hold(self, limit: int) -> None:
        """Hold up to ``limit`` samples (at most ``size``) from now on, forgetting the oldest beyond it."""
        limit = min(max(1, int(limit)), self.size)
        if limit < len(self):
            self.forget(limit)
        self.limit = limit

    @property
    def n_keys(self) -> int:
        return len(self.keys)

    @property
    def count(self) -> np.ndarray:
        """Per key, how many samples of the window hold it."""
        return self._count[: self.n_keys]

    def _reserve(self, n_keys: int) -> None:
        cap = self._values.shape[0]
        if n_keys <= cap:
            return
        new = max(n_keys, 2 * cap, 4)
        grow = new - cap
        self._values = np.vstack([self._values, np.full((grow, self.size), np.nan)])
        self._objects = np.vstack([self._objects, np.full((grow, self.size), None, dtype=object)])
        self._present = np.vstack([self._present, np.zeros((grow, self.size), dtype=np.bool_)])
        self._count = np.concatenate([self._count, np.zeros(grow, dtype=np.int64)])

    def add(self, x: Mapping[Hashable, Any], y: float | int) -> list[int]:
        """Append a sample (dropping the oldest when full); returns the indices of the keys seen for the first time.

        A key's kind is fixed by its first present value: a string makes it nominal, a number (or a boolean)
        numeric. A numeric key given a string raises ``TypeError`` and the window is left as it was.
        """
        writes: list[tuple[int, Any]] = []
        new: list[tuple[Hashable, Any]] = []
        index, nominal = self.index, self.nominal
        for key, v in x.items():
            kind = type(v)
            if kind is float:  # the common case first: a float is missing when NaN
                if v != v:
                    continue
            elif _is_missing(v):
                continue
            j = index.get(key)
            if j is None:
                if not (isinstance(v, str) or _is_number(v)):
                    raise TypeError(f"feature {key!r}: numbers, booleans or strings expected, got {type(v).__name__}")
                new.append((key, v))
            elif not nominal[j]:
                if kind not in _PLAIN_NUMBERS and not _is_number(v):
                    raise TypeError(f"feature {key!r} has had numeric values; got {v!r}")
                writes.append((j, v))
            else:
                if not (isinstance(v, str) or _is_number(v)):
                    raise TypeError(f"feature {key!r}: numbers, booleans or strings expected, got {type(v).__name__}")
                writes.append((j, v))
        # New keys get their rows in sorted order, so that the order of a dict's keys changes nothing.
        new.sort(key=lambda kv: _sort_key(kv[0]))
        added = []
        if new:
            self._reserve(self.n_keys + len(new))
            for key, v in new:
                j = len(self.keys)
                self.keys.append(key)
                self.index[key] = j
                self.nominal.append(isinstance(v, str))
                self._has_nominal = self._has_nominal or isinstance(v, str)
                writes.append((j, v))
                added.append(j)

        slot = self.n_seen % self.size
        if self.limit < self.size and self.n_seen - self._first >= self.limit:
            # The oldest held sample leaves before the ring comes round to its slot.
            self._clear((self.n_seen - self.limit) % self.size)
            self._first = self.n_seen - self.limit + 1
        self._clear(slot)
        values, objects, present, count, nominal = self._values, self._objects, self._present, self._count, self.nominal
        for j, v in writes:
            if nominal[j]:
                # A category keeps its Python value (numbers too); numpy scalars become plain ones.
                objects[j, slot] = v.item() if isinstance(v, np.generic) else v
            else:
                values[j, slot] = float(v)
            present[j, slot] = True
            count[j] += 1
        self._y[slot] = y
        self.n_seen += 1
        return added

    def _clear(self, slot: int) -> None:
        """Empty one slot (a slot never written holds no key: nothing to uncount)."""
        n = self.n_keys
        self._count[:n] -= self._present[:n, slot]
        self._present[:n, slot] = False
        self._values[:n, slot] = np.nan
        if self._has_nominal:  # the object rows of numeric keys only ever hold None
            self._objects[:n, slot] = None

    def order(self, last: int | None = None) -> np.ndarray:
        """Slots of the held samples (of the ``last`` latest only, if given), oldest first."""
        n = len(self) if last is None else min(max(0, last), len(self))
        start = (self.n_seen - n) % self.size
        out = np.arange(start, start + n)
        if start + n > self.size:  # wraps around the ring (a subtraction: a modulo per slot costs 4x as much)
            out[self.size - start:] -= self.size
        return out

    def forget(self, keep: int) -> None:
        """Drop all but the latest ``keep`` samples (the window then refills up to ``size``); keys stay known."""
        keep = max(0, int(keep))
        old = self.order()[: max(0, len(self) - keep)]
        if old.size:
            n = self.n_keys
            self._count[:n] -= self._present[:n][:, old].sum(axis=1)
            self._present[:n, old] = False
            self._values[:n, old] = np.nan
            self._objects[:n, old] = None
            self._first = self.n_seen - min(keep, len(self))

    def recall(self, before: SampleWindow) -> int:
        """Hold again the samples older than the held ones that ``before`` (a copy of this window made earlier, before
        a :meth:`forget`) held and that no later sample has overwritten since; returns how many.

        Keys seen since the copy are missing in the recalled samples, as they were."""
        start = max(before.n_seen - len(before), self.n_seen - self.limit)
        if start >= self._first:
            return 0
        slots = np.arange(start, self._first) % self.size
        n = before.n_keys
        self._values[:n, slots] = before._values[:n, slots]
        self._objects[:n, slots] = before._objects[:n, slots]
        self._present[:n, slots] = before._present[:n, slots]
        self._count[:n] += before._present[:n, slots].sum(axis=1)
        self._y[slots] = before._y[slots]
        recalled, self._first = self._first - start, start
        return recalled

    def column(self, j: int, order: np.ndarray | None = None) -> np.ndarray:
        """Key ``j``'s values over the held samples, oldest first (floats with NaN, or objects with None)."""
        order = self.order() if order is None else order
        return (self._objects if self.nominal[j] else self._values)[j, order]

    def labels(self, order: np.ndarray | None = None) -> np.ndarray:
        """The labels (class codes, or numbers under regression), oldest first."""
        return self._y[self.order() if order is None else order]
