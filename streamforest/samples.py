"""The forest's training samples: the labels that fix them, more of them, a new set, and the offline fit.

:class:`SamplesMixin` is a base of :class:`~streamforest.FeatureStreamForest`. The first feature's labels fix the
samples; :meth:`~SamplesMixin.add_samples` appends labelled ones and regrows every alive generation on all of them,
:meth:`~SamplesMixin.set_samples` replaces them (a moving window), and :meth:`~SamplesMixin.fit` is the offline
forest: all samples and features at once, one generation of trees on random subspaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from streamforest import inputs
from streamforest.binning import ColumnBinner
from streamforest.columns import ColumnStore

_Self = TypeVar("_Self", bound="SamplesMixin")


class SamplesMixin:
    """Labels, more samples, a new set of samples, and the offline :meth:`fit`."""

    def _check_same_labels(self, y: Any) -> None:
        y = np.asarray(y)
        if y.shape != (self.n_samples_,):
            raise ValueError(f"y has {y.shape} labels; the forest has {self.n_samples_} samples")
        codes, yr = inputs.later_labels(y, self.task, self.classes_)
        if not (np.array_equal(codes, self._y_cls) and np.array_equal(yr, self._y_reg)):
            raise ValueError("y differs from the labels given earlier (use add_samples for new samples)")

    def _set_labels(self, y: Any) -> None:
        self.classes_, self._y_cls, self._y_reg = inputs.first_labels(y, self.task)

    def add_samples(self, X_rows: Any, y_rows: Any) -> None:
        """More labelled samples; every alive generation is regrown on all samples with the same subspaces."""
        if self._store is None:
            raise ValueError("add_samples needs at least one feature first (call add_feature with y)")
        Xb = self._columns.bin(X_rows, "X_rows")
        y_rows = np.asarray(y_rows)
        if y_rows.ndim != 1 or y_rows.shape[0] != Xb.shape[1]:
            raise ValueError(f"y_rows must be 1-D with one label per row ({Xb.shape[1]}), got shape {y_rows.shape}")
        codes, yr = inputs.later_labels(y_rows, self.task, self.classes_)
        self._store.add_rows(Xb)
        self._y_cls = np.concatenate([self._y_cls, codes])
        self._y_reg = np.concatenate([self._y_reg, yr])
        for g in self._generations:
            g.regrown(self._grow(g.subspaces, g.seeds, g.split_ks, g.min_leaf), born=self.model_version_ + 1)
        self._packed = None
        self._clear_oob()
        for g in self._generations:
            g.in_oob = True
            self._oob_apply(g, +1.0)
        self._bump_version()
        # Every tree changed: encodings from before cannot be patched, only recomputed.
        self.encoder.restart(self.model_version_)

    def set_samples(self, X: Any, y: Any) -> None:
        """Replace the training samples: later generations grow on these; alive generations keep their trees.

        This is how the forest follows a moving window of samples (:mod:`streamforest.connectors.river`): the
        window's current samples go in, then :meth:`refresh` or :meth:`add_feature` grows a generation on them,
        and the bookkeeping weights let the older generations, grown on older samples, fade out and be pruned.

        Parameters
        ----------
        X
            Values of every known feature, binned with the bins learned when each feature arrived: a mapping name ->
            column, or a 2-D array with the features in arrival order (NaN or None = missing). The number of
            samples may differ from the current one.
        y
            One label per sample; under classification, only classes the forest already knows.

        Notes
        -----
        The trees alive were grown on other samples, so their out-of-bag state means nothing for these: it is
        reset. Out-of-bag scores (in the reports of :meth:`refresh` and :meth:`add_feature`) afterwards count only
        the generations grown on the current samples, and are ``None`` until one is. The model version goes up
        and, as after :meth:`add_samples`, encodings made before are re-encoded rather than patched by
        :meth:`encode_delta`.

        Examples
        --------
        >>> import numpy as np
        >>> from streamforest import FeatureStreamForest
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(600, 2)); y = (X[:, 0] > 0).astype(int)
        >>> f = FeatureStreamForest(trees_per_generation=5, random_state=0).fit(X[:300], y[:300])
        >>> f.set_samples(X[300:], y[300:])
        >>> f.n_samples_, f.n_trees_, f.refresh().oob_after > 0.9
        (300, 5, True)
        """
        if self._store is None:
            raise ValueError("set_samples needs at least one feature first (call add_feature with y, or fit)")
        Xb = np.ascontiguousarray(self._columns.bin(X, "X"))
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != Xb.shape[1]:
            raise ValueError(f"y must be 1-D with one label per sample ({Xb.shape[1]}), got shape {y.shape}")
        if y.size == 0:
            raise ValueError("set_samples needs at least one sample")
        codes, yr = inputs.later_labels(y, self.task, self.classes_)
        self._store = ColumnStore.from_array(Xb)
        self._y_cls, self._y_reg = codes, yr
        self._clear_oob()
        self._bump_version()
        self.encoder.restart(self.model_version_)

    def fit(self: _Self, X: Any, y: Any, kinds: Mapping[str, str] | None = None) -> _Self:
        """The offline forest: all features at once, one generation of ``trees_per_generation`` trees on random
        subspaces."""
        self._reset()
        names, columns = inputs.named_columns(X)
        y_arr = np.asarray(y)
        for name, col in zip(names, columns, strict=True):
            if col.shape[0] != y_arr.shape[0]:
                raise ValueError(f"feature {name!r} has {col.shape[0]} values but y has {y_arr.shape[0]} labels")
        self._set_labels(y_arr)
        self._store = ColumnStore(y_arr.shape[0])
        for name, col in zip(names, columns, strict=True):
            b = ColumnBinner.fit(name, col, (kinds or {}).get(name), gaps=self.split_threshold == "midpoint")
            b = b.ruled(self.numeric_categories)
            self._columns.append(b)
            self._store.add_column(b.transform(col))
        masks = self._uniform_masks(0)
        log_w = self._ledger.uniform(masks.sum(axis=0).astype(np.float64))
        self._next_generation = 1
        self._clear_oob()
        self._add_generation(0, [], log_w, masks)
        self._bump_version()
        self.encoder.restart(self.model_version_)
        return self
