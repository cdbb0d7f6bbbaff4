"""What a forest says of samples and features: predictions, the trees they are routed through, importances.

:class:`PredictionMixin` is a base of :class:`~streamforest.FeatureStreamForest`. The alive trees are packed once
per change of the forest (:meth:`~PredictionMixin.alive_trees`) and shared by prediction, encoding
(:mod:`streamforest.encoder`) and the kernels (:mod:`streamforest.kernels`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamforest.generations import AliveTrees, alive, tree_weights
from streamforest.generations import importance as generation_importance
from streamforest.tree import route


class PredictionMixin:
    """Routing samples through the alive trees: probabilities, classes or values; the features' importances."""

    def alive_trees(self) -> AliveTrees:
        """All alive trees packed for routing, each tree's weight (summing to 1) and each tree's seed."""
        self._check_fitted()
        if self._packed is None:
            self._packed = alive(self._generations)
        return self._packed

    def binned(self, X: Any, what: str = "X") -> np.ndarray:
        """Samples binned as the trees see them: C-contiguous ``uint8``, shape ``(n_features, n_samples)``.

        ``X`` is a 2-D array with the features in arrival order, or a mapping name -> column (or one value each).
        """
        return np.ascontiguousarray(self._columns.bin(X, what))

    def _check_fitted(self) -> None:
        if not self._generations:
            raise ValueError("the forest has no trees yet: add a feature (or fit) before predicting")

    def _raw(self, X: Any) -> np.ndarray:
        self._check_fitted()
        Xb = self.binned(X)
        if self._packed is not None:
            trees, tree_w, _ = self._packed
            return route.weighted_values(trees, Xb, Xb.shape[1], tree_w)
        # Generation by generation into one sum (the same sums as through the packed trees): packing the alive
        # trees for one prediction would copy all of them (leaves of one sample on 70,000 rows: 2 GiB).
        out = None
        tree_w = tree_weights(self._generations)
        at = 0
        for g in self._generations:
            out = route.weighted_values(g.trees, Xb, Xb.shape[1], tree_w[at:at + g.n_trees], out)
            at += g.n_trees
        return out

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, the weight-averaged tree probabilities: shape ``(n, n_classes)``.

        ``X`` is a 2-D array with the features in arrival order, or a mapping name -> column.
        """
        if self.task == "regression":
            raise AttributeError("predict_proba is for classification; use predict")
        p = self._raw(X)
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted classes (most probable) or regression values."""
        raw = self._raw(X)
        if self.task == "regression":
            return raw[:, 0]
        return self.classes_[np.argmax(raw, axis=1)]

    def _importance_vector(self) -> np.ndarray:
        return generation_importance(self._generations, self.n_features_in_)

    @property
    def feature_importances_(self) -> np.ndarray:
        """Impurity-decrease importance of every feature, averaged over trees by their weight (sums to 1), aligned
        with :attr:`feature_names_in_`."""
        imp = self._importance_vector()
        total = imp.sum()
        if total > 0:
            imp = imp / total
        return imp

