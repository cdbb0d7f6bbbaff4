"""Binned training columns, feature-major, in a buffer that grows by doubling in both directions.

Trees index ``data[feature, sample]``; passing the whole buffer (not a slice) keeps it C-contiguous for numba while
features and samples keep arriving.
"""

from __future__ import annotations

import numpy as np

from streamforest.binning import MISSING_BIN


class ColumnStore:
    """One byte per (feature, sample); unfilled cells hold the missing bin.

    Examples
    --------
    >>> s = ColumnStore(n_samples=3)
    >>> s.add_column(np.array([0, 1, 2], dtype=np.uint8))
    >>> s.add_rows(np.array([[5], ], dtype=np.uint8))
    >>> s.view().tolist()
    [[0, 1, 2, 5]]
    """

    def __init__(self, n_samples: int) -> None:
        self.n_features = 0
        self.n_samples = int(n_samples)
        self.data = np.full((4, max(self.n_samples, 4)), MISSING_BIN, dtype=np.uint8)

    def _reserve(self, n_features: int, n_samples: int) -> None:
        cap_f, cap_n = self.data.shape
        if n_features <= cap_f and n_samples <= cap_n:
            return
        new_f = cap_f if n_features <= cap_f else max(n_features, 2 * cap_f)
        new_n = cap_n if n_samples <= cap_n else max(n_samples, 2 * cap_n)
        data = np.full((new_f, new_n), MISSING_BIN, dtype=np.uint8)
        data[: self.n_features, : self.n_samples] = self.data[: self.n_features, : self.n_samples]
        self.data = data

    def add_column(self, binned: np.ndarray) -> None:
        if binned.shape != (self.n_samples,):
            raise ValueError(f"a column of {self.n_samples} values expected, got {binned.shape[0]}")
        self._reserve(self.n_features + 1, self.n_samples)
        self.data[self.n_features, : self.n_samples] = binned
        self.n_features += 1

    def add_rows(self, binned: np.ndarray) -> None:
        """Append samples: ``binned`` has shape ``(n_features, n_new)``."""
        m = binned.shape[1]
        self._reserve(self.n_features, self.n_samples + m)
        self.data[: self.n_features, self.n_samples : self.n_samples + m] = binned
        self.n_samples += m

    def view(self) -> np.ndarray:
        return self.data[: self.n_features, : self.n_samples]

    @classmethod
    def from_array(cls, binned: np.ndarray) -> ColumnStore:
        store = cls(binned.shape[1])
        store._reserve(binned.shape[0], binned.shape[1])
        store.data[: binned.shape[0], : binned.shape[1]] = binned
        store.n_features = binned.shape[0]
        return store
