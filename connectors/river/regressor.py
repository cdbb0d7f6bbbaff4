"""ForestRegressor: the forest of a stream of features as a River regressor."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from river import base

from .driver import WindowForest


class ForestRegressor(WindowForest, base.Regressor):
    """A regression :class:`~streamforest.FeatureStreamForest` grown on a window of recent samples.

    The stream drives the forest as in :class:`ForestClassifier` (a window of the last ``window_size`` samples,
    the first forest at ``grace_period``, a generation forced to use each key once ``min_key_count`` samples of the
    window hold it, a generation on the window every ``refresh_every`` samples, bookkeeping weights under which
    old generations fade and are pruned). Before the first forest the prediction is the mean target of the window
    (0 before any sample).

    Parameters
    ----------
    window_size
        How many of the latest samples the forest trains on.
    grace_period
        Samples seen before the first forest is grown.
    refresh_every
        Samples between two generations grown on the window without a new key (``None``: never).
    refresh_backoff
        Must be 1: a regressor refreshes every ``refresh_every`` samples (the back-off of :class:`ForestClassifier`
        compares error rates).
    min_key_count
        Samples of the window that must hold a key before it becomes a feature.
    trees_per_generation
        Trees grown per generation.
    max_features
        Expected share (float) or count (int) of the features in each tree's subspace.
    split_features
        Share of a tree's subspace drawn anew at each split (``None``: all of it).
    max_depth
        Depth limit of the trees (``None``: unlimited).
    min_samples_leaf
        Least (bootstrap-weighted) number of samples in a leaf.
    max_generations
        Budget of alive generations (past it the two oldest are merged).
    prune_threshold
        Generations whose weight share falls under this are dropped.
    drift_detector
        A River drift detector fed with the forest's absolute error on each sample before it learns it; the
        default and what a detected drift does are those of :class:`ForestClassifier` (``drift.NoDrift()`` turns
        detection off).
    seed
        Random seed: the same seed and stream give the same predictions.

    Attributes
    ----------
    forest
        The :class:`~streamforest.FeatureStreamForest` (``None`` before the first one is grown).

    Examples
    --------
    >>> from river import datasets, evaluate, metrics
    >>> from streamforest.connectors.river import ForestRegressor
    >>> model = ForestRegressor(seed=42)
    >>> evaluate.progressive_val_score(datasets.TrumpApproval(), model, metrics.MAE())
    MAE: 0.520685
    >>> model.n_drifts_detected   # without detection (drift_detector=drift.NoDrift()): MAE 0.907602
    17
    """

    _task = "regression"

    def predict_one(self, x: dict[Hashable, Any], **kwargs: Any) -> base.typing.RegTarget:
        return self._driver.predict_value(x)

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        yield {"window_size": 100, "grace_period": 20, "refresh_every": 25, "min_key_count": 5,
               "trees_per_generation": 5, "max_depth": 6}
        yield {"window_size": 50, "grace_period": 5, "refresh_every": None, "min_key_count": 1,
               "trees_per_generation": 3, "max_generations": 2, "seed": 1}
