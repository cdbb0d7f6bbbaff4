"""ForestEncoder: the hashed tree encoding of a sample, as a River supervised transformer."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from river import base

from streamforest import inputs
from streamforest.encoder import EncodeOptions
from streamforest.inputs import is_int

from .driver import WindowForest

#: Width of the encoder's hashed space: wider than the library's default, because River's linear models keep one
#: weight per column seen and collisions of sparse per-sample encodings cost them more than the memory.
N_COMPONENTS = 2**20

#: ``"auto"``: the first label decides.
TASKS = ("auto", *inputs.TASKS)


# SupervisedTransformer first: River's pipeline treats a class that is only a SupervisedTransformer as a final step
# (and passes the raw x on during learning); being a Transformer too makes it an intermediate step that learns
# from (x, y) and hands its encoding to the next step.
class ForestEncoder(WindowForest, base.SupervisedTransformer, base.Transformer):
    """The nodes a sample visits in a forest grown on the stream, hashed into a sparse vector (Vens & Costa, 2011).

    ``transform_one(x)`` returns ``{column: value}``: one entry per node that ``x`` visits in every alive tree
    (or per leaf, with ``leaves_only``), each node's id hashed into ``n_components`` columns (see
    :meth:`streamforest.FeatureStreamForest.encode`). The forest learns from ``learn_one(x, y)`` exactly as in
    :class:`ForestClassifier`: a bounded window of the last ``window_size`` samples, the first forest at
    ``grace_period`` samples, a generation forced to use each key once ``min_key_count`` samples of the window
    hold it, a generation on the window every ``refresh_every`` samples, bookkeeping weights under which old
    generations fade and are pruned. Before the first forest the encoding is empty.

    The encoding of a sample changes when the forest does (new generations add columns, pruned ones remove
    theirs), so a model downstream keeps learning; in a pipeline, River encodes a sample before the encoder learns
    from it, so the model downstream never sees trees that learned the sample it is scored on.

    Parameters
    ----------
    window_size
        How many of the latest labelled samples the forest trains on.
    grace_period
        Samples seen before the first forest is grown.
    refresh_every
        Samples between two generations grown on the window without a new key (``None``: never).
    refresh_backoff
        How far the interval between refreshes may grow while the forest is not stale (classification; see
        :class:`ForestClassifier`; 1: it stays ``refresh_every``).
    min_key_count
        Samples of the window that must hold a key before it becomes a feature.
    trees_per_generation
        Trees grown per generation.
    max_features
        Expected share (float) or count (int) of the features each tree may split on.
    split_features
        Share of a tree's features drawn anew at each split (``None``: all of them).
    max_depth
        Depth limit of the trees: shallow trees give coarser, more often shared nodes.
    min_samples_leaf
        Least (bootstrap-weighted) number of samples in a leaf.
    max_generations
        Budget of alive generations (past it the two oldest are merged).
    prune_threshold
        Generations whose weight share falls under this are dropped.
    drift_detector
        A River drift detector fed with the forest's error on each sample before it learns it (0/1, or the absolute
        error of a regressor); the default and what a detected drift does are those of
        :class:`ForestClassifier` (``drift.NoDrift()`` turns detection off).
    n_components
        Width of the hashed space.
    leaves_only
        Only the leaves (one entry per tree) rather than every node on the path.
    values
        ``"weighted"``: each tree's nodes carry the square root of the tree's weight (its generation's share over its
        trees), so that the dot product of two encodings is the weighted forest's path kernel, and the trees of
        fading generations fade from the encoding too. ``"binary"``: 1 per node.
    task
        ``"classification"``, ``"regression"`` or ``"auto"`` (the first label decides: a float makes it
        regression).
    seed
        Random seed: the same seed and stream give the same encodings.

    Attributes
    ----------
    forest
        The :class:`~streamforest.FeatureStreamForest` (``None`` before the first one is grown).

    Examples
    --------
    >>> from river import datasets, evaluate, linear_model, metrics
    >>> from streamforest.connectors.river import ForestEncoder
    >>> model = ForestEncoder(seed=42) | linear_model.LogisticRegression()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.ROCAUC())
    ROCAUC: 91.46%
    >>> x, y = next(iter(datasets.Phishing()))
    >>> encoding = model["ForestEncoder"].transform_one(x)
    >>> len(encoding) > 0, all(0 <= k < N_COMPONENTS for k in encoding)
    (True, True)
    """

    def __init__(
        self,
        window_size: int = 2000,
        grace_period: int = 50,
        refresh_every: int | None = 200,
        refresh_backoff: int = 1,
        min_key_count: int = 20,
        trees_per_generation: int = 30,
        max_features: float | int = 1.0,
        split_features: float | None = 0.5,
        max_depth: int | None = 6,
        min_samples_leaf: float = 3,
        max_generations: int | None = 8,
        prune_threshold: float = 0.01,
        drift_detector: Any = None,
        n_components: int = N_COMPONENTS,
        leaves_only: bool = False,
        values: str = "weighted",
        task: str = "auto",
        seed: int | None = None,
    ) -> None:
        if not is_int(n_components, numpy=False) or n_components < 1:
            raise ValueError(f"n_components must be a positive integer, got {n_components!r}")
        if not isinstance(leaves_only, bool):
            raise ValueError(f"leaves_only must be a boolean, got {leaves_only!r}")
        options = EncodeOptions(n_components, values, leaves_only).check()
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        self.n_components = n_components
        self.leaves_only = leaves_only
        self.values = values
        self.task = task
        self._task = task
        self._options = options
        super().__init__(window_size, grace_period, refresh_every, refresh_backoff, min_key_count, trees_per_generation,
                         max_features, split_features, max_depth, min_samples_leaf, max_generations, prune_threshold,
                         drift_detector, seed)

    def transform_one(self, x: dict[Hashable, Any]) -> dict[int, float]:
        return self._driver.encode(x, self._options)

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        yield {"window_size": 100, "grace_period": 20, "refresh_every": 25, "min_key_count": 5,
               "trees_per_generation": 5, "max_depth": 4, "n_components": 2**12}
        yield {"window_size": 50, "grace_period": 5, "refresh_every": None, "min_key_count": 1,
               "trees_per_generation": 3, "leaves_only": True, "values": "binary", "task": "regression",
               "seed": 1}
