"""FeatureStreamForest: a random forest that grows a generation of trees with every arriving feature.

The estimator reads as Algorithm 1 of Motl & Kordík (2019): a feature arrives, a generation of trees that must use
it is grown (:mod:`streamforest.growth`), it is weighted by the feature-use bookkeeping
(:mod:`streamforest.bookkeeping`), and negligible old generations are pruned or merged
(:mod:`streamforest.generations`). Input checking and binning live in :mod:`streamforest.inputs`, out-of-bag
accounting in :mod:`streamforest.oob`, and what a saved forest is made of in :mod:`streamforest.state`.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from streamforest import encoding, growth, inputs, persistence, sampling
from streamforest.binning import ColumnBinner
from streamforest.bookkeeping import WeightLedger
from streamforest.columns import ColumnStore
from streamforest.encoding import DEFAULT_N_COMPONENTS
from streamforest.generations import (
    DELTA_WINDOW,
    Generation,
    Graveyard,
    feature_importance,
    merge,
    pack,
    tree_weights,
    weight_shares,
)
from streamforest.generations import importance as generation_importance
from streamforest.inputs import FeatureColumns
from streamforest.oob import OutOfBag, metric_name
from streamforest.state import ForestState
from streamforest.threads import threads_for
from streamforest.tree import route
from streamforest.tree.model import Trees

#: The constructor's parameters, in its order (:meth:`FeatureStreamForest.get_params`).
PARAMS = ("trees_per_generation", "max_features", "max_depth", "min_samples_leaf", "min_category_size",
          "split_features", "policy", "feature_sampling", "max_subspace", "prune_threshold", "max_generations",
          "task", "oob_score", "random_state")


@dataclass
class FeatureReport:
    """What happened when a feature arrived: returned by :meth:`FeatureStreamForest.add_feature`."""

    feature: str
    generation: int
    log_weight: float
    weight_share: float
    n_trees: int
    pruned: list[int] = field(default_factory=list)
    merged: list[int] = field(default_factory=list)
    importance: float = 0.0
    oob_metric: str = ""
    oob_before: float | None = None
    oob_after: float | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class AliveTrees(NamedTuple):
    """The alive trees packed end to end for routing, each tree's weight (summing to 1) and each tree's seed."""

    trees: Trees
    weights: np.ndarray
    seeds: np.ndarray


class FeatureStreamForest:
    """A random forest on a stream of features (Motl & Kordík, 2019).

    Every call to :meth:`add_feature` grows a *generation* of ``trees_per_generation`` trees. Under the
    ``"challenger"`` policy every tree of the generation may use the new feature, older features join each tree so
    that a tree sees ``max_features`` of the features on average, and the generation's weight comes from the
    weighted-feature-use bookkeeping (:mod:`streamforest.bookkeeping`) so that old and new features are equally
    represented. Generations whose weight share falls under ``prune_threshold`` are dropped.

    Parameters
    ----------
    trees_per_generation
        Trees grown per arriving feature (and by :meth:`fit`).
    max_features
        Expected share (float) or count (int) of the features in a tree's subspace, the forced one counting.
    max_depth
        Depth limit of the trees (``None``: unlimited).
    min_samples_leaf
        Least (bootstrap-weighted) number of samples in a leaf, or ``"auto"``: 5 until the stream is wider than
        ``max_subspace`` can follow, then 8 (see *Wide streams*). A tree keeps the leaf size it was grown with.
    min_category_size
        In a node, categories of a nominal feature with less (bootstrap-weighted) samples than this are not placed
        by their own statistics: they go with the missing values, to the split's default side, where unseen
        categories go too. This keeps high-cardinality nominal features from overfitting.
    split_features
        Share of a tree's subspace drawn anew at every split: ``None`` for the whole subspace (the paper), a float
        in (0, 1], or ``"auto"``: the whole subspace until the stream is wider than ``max_subspace`` can follow, then
        the square root of its size, as in Breiman's forests (see *Wide streams*); and while the stream is too
        narrow for subspaces (see *Narrow streams*), every feature in every tree and ``max_features`` per split.
    policy
        ``"challenger"`` (forced new feature, bookkeeping weights) or ``"baseline"`` (every feature sampled
        alike, equal weights).
    feature_sampling
        How old features join a tree: ``"uniform"`` (the paper), ``"importance"`` (in proportion to their
        importance in the current forest, with a uniform floor) or ``"auto"`` (uniform until the stream is wider
        than ``max_subspace`` can follow).
    max_subspace
        Cap on the expected subspace size, so that a generation costs O(1) in the number of features.
    prune_threshold
        Generations whose share of the total weight is below this are dropped (0 keeps everything).
    max_generations
        Budget of alive generations; past it the two oldest are merged into one (see *Wide streams*).
    task
        ``"classification"`` or ``"regression"``.
    oob_score
        Whether :meth:`add_feature` reports the out-of-bag score before and after the new generation.
    random_state
        Seed; the same seed, data and order give the same forest in any process.

    Notes
    -----
    *Wide streams.* With a constant ``max_features`` ratio a generation costs O(d) and, once mtry is small, weights
    stop growing geometrically, so pruning by share stops bounding the forest. Four things keep it bounded and fast:
    ``max_subspace`` caps the per-tree subspace; past that cap old features are sampled by importance, so the
    informative ones stay in the trees; each split then draws the square root of the subspace
    (``split_features="auto"``), so a generation costs O(sqrt(max_subspace)) per node whatever the width, and its
    leaves hold at least 8 samples (``min_samples_leaf="auto"``: trees about 30% smaller; over nine column orders of
    a 3,000-feature stream, test AUC 0.0007 lower on average, within noise, see ``docs/wide_streams.md``); and
    ``max_generations`` bounds the alive generations by merging the two oldest: the merged generation keeps
    ``trees_per_generation`` trees, drawn from each in proportion to its weight, and carries the sum of their
    weights. Each tree then stands for the same weight as before in expectation, so the bookkeeping (total weight,
    expected weighted use of every feature) is preserved.

    *Narrow streams.* While a tree would see fewer than :data:`streamforest.sampling.NARROW_SUBSPACE` features on
    average (2/3 of 1 to 3 features), per-tree subspaces make weak trees of one or two features. Under
    ``split_features="auto"`` every tree then takes every feature, the arriving one included (the forced feature is
    in every tree, as always), and each split draws ``max_features`` of them, rounded down as scikit-learn does.
    No weight can then balance the features' use (Algorithm 1's is unbounded), so each such generation outweighs
    the newest before it by ``1 / (1 - mtry)``, as generations grow on a wider stream: the trees that have seen
    every feature carry the forest, and the earlier ones fade. Past the narrow width, the bookkeeping resumes.

    *More samples.* :meth:`add_samples` appends labelled samples and regrows every alive generation on the larger
    set with the same subspaces and seeds: the feature use, hence the bookkeeping, is unchanged, and the forest is
    the one it would have been had the samples been there from the start.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 3))
    >>> y = (X[:, 0] + X[:, 2] > 0).astype(int)
    >>> f = FeatureStreamForest(trees_per_generation=10, random_state=1)
    >>> r = f.add_feature("a", X[:, 0], y=y)
    >>> r = f.add_feature("b", X[:, 1])
    >>> r = f.add_feature("c", X[:, 2])
    >>> r.generation, r.oob_metric, r.oob_after > r.oob_before
    (2, 'auc', True)
    >>> f.predict_proba(X[:2]).shape
    (2, 2)
    >>> f.feature_names_in_[np.argmax(f.feature_importances_)] in ("a", "c")
    True
    """

    def __init__(
        self,
        trees_per_generation: int = 50,
        max_features: float | int = 2 / 3,
        max_depth: int | None = 16,
        min_samples_leaf: float | str = "auto",
        min_category_size: float = 5,
        split_features: float | str | None = "auto",
        policy: str = "challenger",
        feature_sampling: str = "auto",
        max_subspace: int | None = 64,
        prune_threshold: float = 1e-3,
        max_generations: int | None = 40,
        task: str = "classification",
        oob_score: bool = True,
        random_state: int | None = None,
    ) -> None:
        self.trees_per_generation = trees_per_generation
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.min_category_size = min_category_size
        self.split_features = split_features
        self.policy = policy
        self.feature_sampling = feature_sampling
        self.max_subspace = max_subspace
        self.prune_threshold = prune_threshold
        self.max_generations = max_generations
        self.task = task
        self.oob_score = oob_score
        self.random_state = random_state
        inputs.check_params(self.get_params())
        self._seed = int(random_state) if random_state is not None else secrets.randbits(63)
        self._reset()

    # ------------------------------------------------------------------ parameters and state

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters as plain Python values (JSON-able), as in scikit-learn.

        Examples
        --------
        >>> FeatureStreamForest(trees_per_generation=7).get_params()["trees_per_generation"]
        7
        """
        return {k: v.item() if isinstance(v, np.generic) else v for k, v in ((k, getattr(self, k)) for k in PARAMS)}

    def set_params(self, **params: Any) -> FeatureStreamForest:
        """Set parameters, as in scikit-learn; bad values are refused and leave the forest as it was.

        Changes apply to the generations grown afterwards. The task cannot change once samples are known.

        Examples
        --------
        >>> f = FeatureStreamForest().set_params(max_depth=4, random_state=3)
        >>> f.max_depth, f.get_params()["random_state"]
        (4, 3)
        """
        unknown = sorted(set(params) - set(PARAMS))
        if unknown:
            raise ValueError(f"unknown parameters {unknown} (parameters: {list(PARAMS)})")
        if "task" in params and params["task"] != self.task and self._store is not None:
            raise ValueError("task cannot change once the forest has samples")
        inputs.check_params({**self.get_params(), **params})
        for k, v in params.items():
            setattr(self, k, v)
        if "random_state" in params:
            rs = params["random_state"]
            self._seed = int(rs) if rs is not None else secrets.randbits(63)
        return self

    def state(self) -> ForestState:
        """What the forest is made of (:class:`~streamforest.state.ForestState`): what :meth:`save` writes and
        :meth:`from_state` rebuilds from. It shares its arrays with the forest: read it, do not change it."""
        return ForestState(
            params=self.get_params(), seed=self._seed, binners=list(self._columns.binners), classes=self.classes_,
            ledger=self._ledger, generations=list(self._generations), next_generation=self._next_generation,
            model_version=self.model_version_, columns=None if self._store is None else self._store.view(),
            y_cls=self._y_cls, y_reg=self._y_reg, oob_sum=self._oob.sum, oob_count=self._oob.count,
            oob_log_ref=self._oob.log_ref,
        )

    @classmethod
    def from_state(cls, state: ForestState) -> FeatureStreamForest:
        """The forest whose :meth:`state` this is; it continues learning exactly where that forest was.

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
        >>> f = FeatureStreamForest(trees_per_generation=4, random_state=0).fit(X, y)
        >>> g = FeatureStreamForest.from_state(f.state())
        >>> bool((g.predict_proba(X) == f.predict_proba(X)).all()), g.model_version_ == f.model_version_
        (True, True)
        """
        forest = cls(**state.params)
        forest._seed = int(state.seed)
        forest._columns = FeatureColumns(state.binners)
        forest.classes_ = state.classes
        # The state may be another live forest's: nothing that either forest changes in place is shared.
        forest._ledger = state.ledger.copy()
        forest._next_generation = int(state.next_generation)
        forest.model_version_ = int(state.model_version)
        # Removed generations are not part of the state: encodings from before it are re-encoded, not patched.
        forest._delta_floor = forest.model_version_
        if state.columns is not None:
            forest._store = ColumnStore.from_array(np.asarray(state.columns))
        forest._y_cls = state.y_cls
        forest._y_reg = state.y_reg
        forest._oob = OutOfBag(state.oob_sum.copy(), state.oob_count.copy(), state.oob_log_ref)
        forest._generations = [dataclasses.replace(g) for g in state.generations]
        return forest

    def _reset(self) -> None:
        self._columns = FeatureColumns()
        self._store: ColumnStore | None = None
        self._y_cls = np.zeros(0, dtype=np.int32)
        self._y_reg = np.zeros(0, dtype=np.float64)
        self.classes_: np.ndarray | None = None
        self._ledger = WeightLedger()
        self._generations: list[Generation] = []
        self._next_generation = 0
        self.model_version_ = 0
        self._graveyard = Graveyard()
        self._delta_floor = 0
        self._packed: AliveTrees | None = None
        self._oob = OutOfBag(np.zeros((0, 0)), np.zeros(0), 0.0)
        self._node_table: tuple[tuple, tuple, encoding.NodeTable] | None = None

    @property
    def _n_classes(self) -> int:
        """Number of classes, 0 for regression (the trees' convention)."""
        return 0 if self.task == "regression" else len(self.classes_)

    @property
    def n_samples_(self) -> int:
        return 0 if self._store is None else self._store.n_samples

    @property
    def n_features_in_(self) -> int:
        return len(self._columns)

    @property
    def feature_names_in_(self) -> np.ndarray:
        """The features' names in arrival order (an object array, as in scikit-learn)."""
        return np.array(self._columns.names, dtype=object)

    @property
    def n_trees_(self) -> int:
        return sum(g.n_trees for g in self._generations)

    @property
    def generations_(self) -> list[dict[str, Any]]:
        """Alive generations: id, forced feature(s), weight share, log weight, number of trees."""
        w = weight_shares(self._generations)
        return [
            {"id": g.id, "forced": list(g.forced), "weight_share": float(s), "log_weight": g.log_weight,
             "n_trees": g.n_trees}
            for g, s in zip(self._generations, w, strict=True)
        ]

    # ------------------------------------------------------------------ the stream of features (Algorithm 1)

    def add_feature(self, name: str, values: Any, y: Any = None, kind: str | None = None) -> FeatureReport:
        """A feature arrives: bin it, grow a generation that uses it, weigh it, prune.

        Parameters
        ----------
        name
            Unique feature name.
        values
            One value per training sample (NaN or None = missing; strings make a nominal column).
        y
            The training labels: required on the first call (it fixes the samples), optional and checked later.
        kind
            ``"numeric"`` or ``"nominal"``; inferred from the values when omitted.
        """
        start = time.perf_counter()
        binner, binned = self._check_feature(name, values, y, kind)
        if self._store is None:
            self._set_labels(y)
            self._store = ColumnStore(binned.shape[0])
            self._clear_oob()
        self._columns.append(binner)
        self._store.add_column(binned)

        before = self._oob_value() if self._generations else None
        gen_id = self._new_generation_id()
        masks = self._arrival_masks(gen_id)
        use = masks.sum(axis=0).astype(np.float64)
        if self.policy == "challenger" and self._narrow() and self._generations:
            log_w = self._narrow_weight(use)
        elif self.policy == "challenger":
            log_w = self._ledger.challenger(use)
        else:
            log_w = self._ledger.uniform(use)
        self._add_generation(gen_id, [name], log_w, masks)
        return self._settle(name, before, start)

    def refresh(self) -> FeatureReport:
        """Grow a generation with no forced feature on the current samples, so that the forest follows them.

        Its trees use uniformly sampled subspaces (each feature with probability ``max_features``, as in
        :meth:`fit`). Under the ``"challenger"`` policy it is weighted like a challenger whose forced "feature" is
        the fresh training set (:meth:`streamforest.bookkeeping.WeightLedger.refresh`): about ``1 / (1 - mtry)``
        times the newest generation, so older generations decay geometrically and get pruned, while every feature
        gains the same expected weighted use and a later :meth:`add_feature` is weighted on the same scale. Under
        ``"baseline"`` all generations weigh the same. Pruning and the ``max_generations`` budget apply as in
        :meth:`add_feature`.

        Returns
        -------
        FeatureReport
            With ``feature == ""`` and ``importance == 0``; the out-of-bag scores before and after (see
            :meth:`set_samples` for which generations they count).

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(300, 3)); y = (X[:, 0] > 0).astype(int)
        >>> f = FeatureStreamForest(trees_per_generation=6, random_state=0).fit(X, y)
        >>> r = f.refresh()
        >>> r.feature, r.generation, [g["forced"] for g in f.generations_], round(r.weight_share, 1)   # about 2/3
        ('', 1, [[], []], 0.7)
        """
        start = time.perf_counter()
        self._check_fitted()
        before = self._oob_value()
        gen_id = self._new_generation_id()
        masks = self._uniform_masks(gen_id)
        use = masks.sum(axis=0).astype(np.float64)
        if self.policy == "challenger" and self._narrow():
            log_w = self._narrow_weight(use)
        elif self.policy == "challenger":
            log_w = self._ledger.refresh(use, self.trees_per_generation)
        else:
            log_w = self._ledger.uniform(use)
        self._add_generation(gen_id, [], log_w, masks)
        return self._settle("", before, start)

    def _check_feature(self, name: Any, values: Any, y: Any, kind: str | None) -> tuple[ColumnBinner, np.ndarray]:
        """Refuse a bad feature before anything changes; its binner and bins."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a feature name must be a non-empty string, got {name!r}")
        if name in self._columns.names:
            raise ValueError(f"duplicate feature name {name!r}")
        values = np.asarray(values)
        if values.ndim != 1:
            raise ValueError(f"feature {name!r}: values must be 1-D, got shape {values.shape}")
        if self._store is None:
            if y is None:
                raise ValueError("y (the training labels) is required on the first call to add_feature")
            y_arr = np.asarray(y)
            if y_arr.ndim != 1 or values.shape[0] != y_arr.shape[0]:
                raise ValueError(
                    f"feature {name!r} has {values.shape[0]} values but y has {np.shape(y_arr)} labels"
                )
        elif values.shape[0] != self.n_samples_:
            raise ValueError(f"feature {name!r} has {values.shape[0]} values; the forest has {self.n_samples_} samples")
        binner = ColumnBinner.fit(name, values, kind)
        binned = binner.transform(values)
        if self._store is not None and y is not None:
            self._check_same_labels(y)
        return binner, binned

    def _check_same_labels(self, y: Any) -> None:
        y = np.asarray(y)
        if y.shape != (self.n_samples_,):
            raise ValueError(f"y has {y.shape} labels; the forest has {self.n_samples_} samples")
        codes, yr = inputs.later_labels(y, self.task, self.classes_)
        if not (np.array_equal(codes, self._y_cls) and np.array_equal(yr, self._y_reg)):
            raise ValueError("y differs from the labels given earlier (use add_samples for new samples)")

    def _set_labels(self, y: Any) -> None:
        self.classes_, self._y_cls, self._y_reg = inputs.first_labels(y, self.task)

    def _new_generation_id(self) -> int:
        gen_id = self._next_generation
        self._next_generation += 1
        return gen_id

    # ------------------------------------------------------------------ growing a generation

    def _training(self) -> growth.TrainingSet:
        return growth.TrainingSet(self._store.data, self._store.n_samples, self._y_cls, self._y_reg,
                                  self._n_classes, self._columns.is_nominal())

    def _grow(self, subspaces: list[np.ndarray], seeds: np.ndarray, split_ks: np.ndarray, min_leaf: np.ndarray,
              oob_leaves: np.ndarray | None = None) -> Trees:
        settings = growth.TreeSettings(self.max_depth, self.min_category_size)
        return growth.grow_trees(self._training(), subspaces, seeds, split_ks, min_leaf, settings, oob_leaves)

    def _capped(self) -> bool:
        return sampling.is_capped(self.n_features_in_, self.max_features, self.max_subspace)

    def _narrow(self) -> bool:
        """Whether the stream is too narrow for per-tree subspaces (``split_features="auto"``): every tree then
        takes every feature, and each split draws ``max_features`` of them."""
        return self.split_features == "auto" and sampling.is_narrow(
            self.n_features_in_, self.max_features, self.max_subspace)

    def _narrow_weight(self, use: np.ndarray) -> float:
        """Log weight of a narrow stream's generation. Every tree uses every feature: no weight balances the
        features' use (Algorithm 1's is unbounded), so it outgrows the newest as generations do on a wide stream."""
        d = self.n_features_in_
        growth_rate = sampling.narrow_log_growth(d, sampling.subspace_size(d, self.max_features, self.max_subspace))
        return self._ledger.add(max(g.log_weight for g in self._generations) + growth_rate, use)

    def _uniform_masks(self, gen_id: int) -> np.ndarray:
        if self._narrow():
            return np.ones((self.trees_per_generation, self.n_features_in_), dtype=np.bool_)
        return growth.uniform_masks(self._seed, gen_id, self.trees_per_generation, self.n_features_in_,
                                    self.max_features, self.max_subspace)

    def _arrival_masks(self, gen_id: int) -> np.ndarray:
        if self._narrow():
            return np.ones((self.trees_per_generation, self.n_features_in_), dtype=np.bool_)
        by_importance = self.feature_sampling == "importance" or (self.feature_sampling == "auto" and self._capped())
        imp = self._importance_vector() if by_importance and self._generations and self.policy != "baseline" \
            else None
        return growth.arrival_masks(self._seed, gen_id, self.trees_per_generation, self.n_features_in_,
                                    self.max_features, self.max_subspace, self.policy == "baseline", imp)

    def _add_generation(self, gen_id: int, forced: list[str], log_w: float, masks: np.ndarray) -> None:
        subspaces = sampling.masks_to_subspaces(masks)
        seeds = growth.tree_seeds(self._seed, gen_id, len(subspaces))
        if self._narrow():
            k = sampling.narrow_split_size(self.n_features_in_, self.max_features, self.max_subspace)
            split_ks = np.full(len(subspaces), k, dtype=np.int64)
        else:
            split_ks = growth.split_counts(self.split_features, subspaces, self._capped())
        min_leaf = growth.leaf_sizes(self.min_samples_leaf, len(subspaces), self._capped())
        # The out-of-bag leaves come with the trees (routed by the threads that grew them), for the sums below.
        leaves = np.empty((len(subspaces), self.n_samples_), dtype=np.int32) if self.oob_score else None
        trees = self._grow(subspaces, seeds, split_ks, min_leaf, leaves)
        gen = Generation(gen_id, forced, log_w, trees, subspaces, seeds, born=self.model_version_ + 1,
                         split_ks=split_ks, min_leaf=min_leaf, oob_leaves=leaves)
        self._generations.append(gen)
        self._packed = None
        self._oob_apply(gen, +1.0)

    # ------------------------------------------------------------------ pruning and the budget of generations

    def _settle(self, feature: str, before: float | None, start: float) -> FeatureReport:
        """After a new generation (the newest; ``max_generations >= 2`` never merges it): prune, keep the budget,
        publish the new model version, and report on the generation (``feature`` is the forced one, or "")."""
        gen = self._generations[-1]
        pruned = self._prune()
        merged = self._enforce_budget()
        after = self._oob_value()
        share = float(weight_shares(self._generations)[-1])
        importance = feature_importance(self._generations, self.n_features_in_ - 1) if feature else 0.0
        self._bump_version()
        return FeatureReport(
            feature=feature, generation=gen.id, log_weight=gen.log_weight, weight_share=share, n_trees=gen.n_trees,
            pruned=pruned, merged=merged, importance=importance, oob_metric=metric_name(self.task, self._n_classes),
            oob_before=before, oob_after=after, seconds=time.perf_counter() - start,
        )

    def _prune(self) -> list[int]:
        if self.prune_threshold <= 0 or len(self._generations) < 2:
            return []
        w = weight_shares(self._generations)
        newest = self._generations[-1]
        drop = [g for g, s in zip(self._generations, w, strict=True) if s < self.prune_threshold and g is not newest]
        for g in drop:
            self._oob_apply(g, -1.0)
            self._graveyard.bury(g, died=self.model_version_ + 1)
        self._generations = [g for g in self._generations if all(g is not d for d in drop)]
        if drop:
            self._packed = None
        return [g.id for g in drop]

    def _enforce_budget(self) -> list[int]:
        merged: list[int] = []
        while self.max_generations is not None and len(self._generations) > self.max_generations:
            a, b = self._generations[0], self._generations[1]
            # Merged before a and b leave the out-of-bag sums, which drops their cached leaves (the merged
            # generation's are some of theirs).
            gen = merge(a, b, self.trees_per_generation, born=self.model_version_ + 1)
            self._oob_apply(a, -1.0)
            self._oob_apply(b, -1.0)
            self._graveyard.bury(a, died=self.model_version_ + 1)
            self._graveyard.bury(b, died=self.model_version_ + 1)
            self._generations[:2] = [gen]
            self._oob_apply(gen, +1.0)
            self._packed = None
            merged.append(b.id)
        return merged

    def _bump_version(self) -> None:
        self.model_version_ += 1
        self._graveyard.forget_before(self.model_version_)

    # ------------------------------------------------------------------ out-of-bag score

    def _oob_apply(self, gen: Generation, sign: float) -> None:
        if self.oob_score:
            self._oob.apply(gen, sign, self._training(), self._generations)

    def _oob_value(self) -> float | None:
        if not self.oob_score:
            return None
        return self._oob.score(self.task, self._n_classes, self._y_cls, self._y_reg)

    def _clear_oob(self) -> None:
        """Empty out-of-bag sums for the current samples; no generation's votes in them (or cached) any more."""
        log_ref = max((g.log_weight for g in self._generations), default=0.0)
        self._oob = OutOfBag.empty(self.n_samples_, self._n_classes, log_ref)
        for g in self._generations:
            g.in_oob = False
            g.oob_leaves = None
            g.oob_votes = None

    # ------------------------------------------------------------------ more samples, offline fit

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
        # Every tree changed: encodings from before cannot be patched, only recomputed.
        self._graveyard.clear()
        self._bump_version()
        self._delta_floor = self.model_version_

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
        self._graveyard.clear()
        self._bump_version()
        self._delta_floor = self.model_version_

    def fit(self, X: Any, y: Any, kinds: Mapping[str, str] | None = None) -> FeatureStreamForest:
        """The offline forest: all features at once, ``trees_per_generation`` trees on random subspaces."""
        self._reset()
        names, columns = inputs.named_columns(X)
        y_arr = np.asarray(y)
        for name, col in zip(names, columns, strict=True):
            if col.shape[0] != y_arr.shape[0]:
                raise ValueError(f"feature {name!r} has {col.shape[0]} values but y has {y_arr.shape[0]} labels")
        self._set_labels(y_arr)
        self._store = ColumnStore(y_arr.shape[0])
        for name, col in zip(names, columns, strict=True):
            b = ColumnBinner.fit(name, col, (kinds or {}).get(name))
            self._columns.append(b)
            self._store.add_column(b.transform(col))
        masks = self._uniform_masks(0)
        log_w = self._ledger.uniform(masks.sum(axis=0).astype(np.float64))
        self._next_generation = 1
        self._clear_oob()
        self._add_generation(0, [], log_w, masks)
        self._bump_version()
        self._delta_floor = self.model_version_
        return self

    # ------------------------------------------------------------------ prediction

    def alive_trees(self) -> AliveTrees:
        """All alive trees packed for routing, each tree's weight (summing to 1) and each tree's seed."""
        self._check_fitted()
        if self._packed is None:
            trees, seeds = pack(self._generations)
            self._packed = AliveTrees(trees, tree_weights(self._generations), seeds)
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
        trees, tree_w, _ = self.alive_trees()
        return route.weighted_values(trees, Xb, Xb.shape[1], tree_w)

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

    def encode(
        self,
        X: Any,
        n_components: int | None = DEFAULT_N_COMPONENTS,
        values: str = "binary",
        leaves_only: bool = False,
        missing: str = "default",
        signed: bool = False,
        sample_ids: Any = None,
    ) -> sp.csr_matrix:
        """Hashed node-path encoding (Vens & Costa, 2011): a sparse row per sample, a column per hashed node.

        Parameters
        ----------
        X
            Samples: a 2-D array with the features in arrival order, or a mapping name -> column.
        n_components
            Width of the hashed space; ``None`` gives the exact (unhashed) encoding, one column per alive node.
        values
            ``"binary"``: 1 per visited node. ``"weighted"``: each tree's nodes carry the square root of the tree's
            weight, so the dot product of two encodings is the weighted forest's path kernel.
        leaves_only
            Only the leaves (the leaf-indicator encoding, like scikit-learn's ``RandomTreesEmbedding``).
        missing
            At a split on a missing value: ``"default"`` (the learned default side), ``"random"`` (one side drawn
            from the sample's id and the node, reproducibly) or ``"split"`` (both sides, mass 1/2 each).
        signed
            Signed hashing: each node's value gets a sign from its hash, so collisions cancel in expectation.
        sample_ids
            Ids keying ``missing="random"`` (default: the row number).

        Returns
        -------
        scipy.sparse.csr_matrix
            ``float32``, shape ``(n_samples, n_components)``, rows sorted with collisions summed.

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
        >>> f = FeatureStreamForest(trees_per_generation=4, max_depth=3, random_state=0)
        >>> _ = f.add_feature("a", X[:, 0], y=y)
        >>> E = f.encode(X[:3, :1], n_components=2**10)
        >>> E.shape, bool((E.sum(axis=1) >= 4).all())   # at least the root of each of the 4 trees
        ((3, 1024), True)
        """
        self._check_fitted()
        Xb = self.binned(X)
        trees, tree_w, seeds = packed = self.alive_trees()
        keys = encoding.sample_keys_from_ids(sample_ids, Xb.shape[1]) if sample_ids is not None else None
        encoding.check_arguments(n_components, values, missing)
        # The node table is rebuilt only when the packed forest or the arguments change (a new tuple per change).
        arguments = (n_components, values, signed)
        cached = self._node_table
        if cached is None or cached[0] is not packed or cached[1] != arguments:
            cached = self._node_table = (packed, arguments, encoding.node_table(trees, seeds, tree_w, *arguments))
        with threads_for(Xb.shape[1], trees.n_trees):
            return encoding.encode_binned(trees, seeds, tree_w, Xb, n_components, values, leaves_only, missing,
                                          signed, keys, table=cached[2])

    def encode_delta(self, X: Any, since: int, n_components: int | None = DEFAULT_N_COMPONENTS,
                     leaves_only: bool = False, missing: str = "default", signed: bool = False,
                     sample_ids: Any = None) -> sp.csr_matrix:
        """What to add to a binary encoding made at model version ``since`` to get the current one.

        Only the generations grown or removed since then change; the delta encodes the new generations' nodes with
        +1 and the removed generations' nodes with -1, so that ``encode(X)`` now equals
        ``encode(X) at since + encode_delta(X, since)`` (for the same arguments, ``values="binary"``). Versions
        older than the last ``DELTA_WINDOW`` changes, or from before :meth:`add_samples` regrew every tree, raise
        ``ValueError``: re-encode instead.

        Parameters
        ----------
        X
            The samples, as for :meth:`encode` (all features that have arrived by now).
        since
            A model version: the value of :attr:`model_version_` when the encoding you hold was made. The version
            grows by one with every change of the trees (add_feature, add_samples, set_samples, refresh, fit),
            and the engine stamps it on every published record as ``model_version``; a consumer keeps it beside its
            encodings and asks for the delta since then instead of re-encoding everything.
        n_components, leaves_only, missing, signed, sample_ids
            As for :meth:`encode` (the same values as the earlier encoding, or the sum is meaningless).

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(300, 2)); y = (X[:, 0] > 0).astype(int)
        >>> f = FeatureStreamForest(trees_per_generation=5, random_state=0)
        >>> _ = f.add_feature("a", X[:, 0], y=y)
        >>> before, v = f.encode(X[:10, :1]), f.model_version_
        >>> _ = f.add_feature("b", X[:, 1])
        >>> after = before + f.encode_delta(X[:10], since=v)
        >>> float(abs(after - f.encode(X[:10])).sum())
        0.0
        """
        self._check_fitted()
        if isinstance(since, bool) or not isinstance(since, (int, np.integer)):
            raise TypeError(f"since must be a model version (int), got {since!r}")
        oldest = max(self._delta_floor, self.model_version_ - DELTA_WINDOW)
        if not oldest <= since <= self.model_version_:
            raise ValueError(
                f"no delta from version {since}: deltas reach back to version {oldest} (now {self.model_version_});"
                " re-encode instead"
            )
        if n_components is None:
            raise ValueError("encode_delta needs hashed encodings (unhashed column ids change with the forest)")
        encoding.check_arguments(n_components, "binary", missing)
        Xb = self.binned(X)
        added = [g for g in self._generations if g.born > since]
        removed = self._graveyard.removed_since(since)
        keys = encoding.sample_keys_from_ids(sample_ids, Xb.shape[1]) if sample_ids is not None else None
        out = sp.csr_matrix((Xb.shape[1], n_components), dtype=np.float32)
        for gens, sign in ((added, 1.0), (removed, -1.0)):
            if gens:
                trees, seeds = pack(gens)
                part = encoding.encode_binned(trees, seeds, np.ones(trees.n_trees), Xb, n_components, "binary",
                                              leaves_only, missing, signed, keys)
                out = out + sign * part
        out.eliminate_zeros()
        return out.tocsr()

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

    # ------------------------------------------------------------------ persistence

    def save(self, path: Any) -> None:
        """Write the forest (and its training columns) to one ``.npz`` file of plain arrays and JSON; no pickle."""
        persistence.save_forest(self, path)

    @classmethod
    def load(cls, path: Any) -> FeatureStreamForest:
        """Read a forest written by :meth:`save`."""
        return persistence.load_forest(cls, path)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"
