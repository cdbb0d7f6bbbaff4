"""ForestRegressor: the forest of a stream of features as a River regressor."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from river import base

from .driver import DrivenEstimator, ForestDriver, check_params


class ForestRegressor(DrivenEstimator, base.Regressor):
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
    >>> evaluate.progressive_val_score(datasets.TrumpApproval(), ForestRegressor(seed=42), metrics.MAE())
    MAE: 0.988744
    """

    def __init__(
        self,
        window_size: int = 2000,
        grace_period: int = 50,
        refresh_every: int | None = 100,
        min_key_count: int = 20,
        trees_per_generation: int = 30,
        max_features: float | int = 1.0,
        split_features: float | None = 0.5,
        max_depth: int | None = 16,
        min_samples_leaf: float = 3,
        max_generations: int | None = 8,
        prune_threshold: float = 0.01,
        seed: int | None = None,
    ) -> None:
        self.window_size = window_size
        self.grace_period = grace_period
        self.refresh_every = refresh_every
        self.min_key_count = min_key_count
        self.trees_per_generation = trees_per_generation
        self.max_features = max_features
        self.split_features = split_features
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.max_generations = max_generations
        self.prune_threshold = prune_threshold
        self.seed = seed
        params = self._get_params()
        check_params(params)
        self._driver = ForestDriver(params, task="regression")

    def predict_one(self, x: dict[Hashable, Any], **kwargs: Any) -> base.typing.RegTarget:
        return self._driver.predict_value(x)

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        yield {"window_size": 100, "grace_period": 20, "refresh_every": 25, "min_key_count": 5,
               "trees_per_generation": 5, "max_depth": 6}
        yield {"window_size": 50, "grace_period": 5, "refresh_every": None, "min_key_count": 1,
               "trees_per_generation": 3, "max_generations": 2, "seed": 1}
