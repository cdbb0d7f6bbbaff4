"""FeatureStreamForest: a random forest that grows a generation of trees with every arriving feature.

The estimator reads as Algorithm 1 of Motl & Kordík (2019): a feature arrives, a generation of trees that must use
it is grown (:mod:`streamforest.growth`), it is weighted by the feature-use bookkeeping
(:mod:`streamforest.bookkeeping`), and negligible old generations are pruned or merged
(:mod:`streamforest.pruning`, :mod:`streamforest.generations`). That loop is this module; the rest of the estimator
is in its bases, one module each: parameters (:mod:`streamforest.params`), the training samples and the offline
fit (:mod:`streamforest.samples`), prediction and importances (:mod:`streamforest.prediction`), encodings
(:mod:`streamforest.encoder`), out-of-bag accounting (:mod:`streamforest.oob`) and saving
(:mod:`streamforest.persistence`, :mod:`streamforest.state`). Input checking and binning live in
:mod:`streamforest.inputs`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from streamforest import growth, inputs, sampling
from streamforest.binning import ColumnBinner
from streamforest.bookkeeping import WeightLedger
from streamforest.columns import ColumnStore
from streamforest.encoder import Encoder, EncodingMixin
from streamforest.generations import AliveTrees, Generation, feature_importance, weight_shares
from streamforest.inputs import FeatureColumns
from streamforest.oob import OutOfBag, OutOfBagMixin, metric_name, out_of_bag_leaves, tree_votes
from streamforest.params import ParamsMixin, seed_of
from streamforest.persistence import PersistenceMixin
from streamforest.prediction import PredictionMixin
from streamforest.pruning import PruningMixin
from streamforest.rng import derive_seed
from streamforest.samples import SamplesMixin
from streamforest.tree.model import Trees, concat

#: Salt of a null twin's permutation (see ``FeatureStreamForest.add_feature``).
_NULL_SALT = 0x7417


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
    # With ``paired_null`` (see :meth:`FeatureStreamForest.add_feature`): the out-of-bag score with the permuted
    # twin generation in place of the feature's, and the standard error of ``oob_after`` minus it over the trees.
    oob_null: float | None = None
    oob_paired_se: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report's fields; the paired null's only when it was grown."""
        d = asdict(self)
        if self.oob_null is None and self.oob_paired_se is None:
            del d["oob_null"], d["oob_paired_se"]
        return d


class FeatureStreamForest(ParamsMixin, SamplesMixin, PredictionMixin, EncodingMixin, PruningMixin, OutOfBagMixin,
                          PersistenceMixin):
    """A random forest on a stream of features (Motl & Kordík, 2019).

    Every call to :meth:`add_feature` grows a *generation* of ``trees_per_generation`` trees. Under the
    ``"challenger"`` policy every tree of the generation may use the new feature, older features join each tree so
    that a tree sees ``max_features`` of the features on average, and the generation's weight comes from the
    weighted-feature-use bookkeeping (:mod:`streamforest.bookkeeping`) so that old and new features are equally
    represented. Generations whose weight share falls under ``prune_threshold`` are dropped.

    Parameters
    ----------
    trees_per_generation
        Trees grown per arriving feature (and by :meth:`fit`), or ``"auto"``: 300 on up to 2,500 training samples,
        then fewer as the samples grow, so that a generation's trees times its samples stay at 750,000, and 50 from
        15,000 samples on (:func:`streamforest.growth.auto_trees`); and 50 once the stream is wider than
        ``max_subspace`` can follow, where many generations share the votes (see *Wide streams*). A generation keeps
        the trees it was grown with.
    max_features
        Expected share (float) or count (int) of the features in a tree's subspace, the forced one counting.
    max_depth
        Depth limit of the trees (``None``: unlimited).
    min_samples_leaf
        Least (bootstrap-weighted) number of samples in a leaf, or ``"auto"``: while the stream is narrow, the
        square root of the training samples, at least 6 and at most 12 (:func:`streamforest.growth.auto_leaf`), or
        from 100 training samples on that, half or twice it, whichever errs least out of bag (see *Narrow streams*);
        then 6 until the stream is wider than ``max_subspace`` can follow, and 8 from then on
        (see *Wide streams*). A tree keeps the leaf size it was grown with.
    min_category_size
        In a node, categories of a nominal feature with less (bootstrap-weighted) samples than this are not placed
        by their own statistics: they go with the missing values, to the split's default side, where unseen
        categories go too. This keeps high-cardinality nominal features from overfitting.
    split_features
        Share of a tree's subspace drawn anew at every split: ``None`` for the whole subspace (the paper), a float
        in (0, 1], or ``"auto"``: the whole subspace until the stream is wider than ``max_subspace`` can follow, then
        the square root of its size, as in Breiman's forests (see *Wide streams*); and while the stream is too
        narrow for subspaces (see *Narrow streams*), every feature in every tree and ``max_features`` per split.
    split_threshold
        Where a numeric split's threshold lies between the node's samples on either side: ``"edge"`` (the paper),
        at the upper edge of the left side's last bin (values between the two sides go right); or ``"midpoint"``,
        midway between the greatest value on the left and the least on the right, as scikit-learn's trees (a value
        the node's samples did not have goes to the side of the nearer one), to the precision of the feature's bins:
        a feature of at most 128 distinct training values then has empty bins between them (see
        :class:`~streamforest.binning.ColumnBinner`), so that the threshold lies near the node's own midpoint even
        where the node lacks values other samples have. ``"midpoint"`` is not the default: on the paper's datasets
        of at most 4 features it was ahead on the half tuned on and level on the other (``python -m
        scenarios.low_dimensional``, README has the figures).
    numeric_categories
        How the trees split a nominal feature whose categories are numbers (at least three, :meth:`add_feature`):
        ``"categories"`` (the paper), by sets of categories; ``"order"``, by a threshold on the numbers' order, as
        a numeric feature (unseen categories go with the missing values); or ``"auto"``: the generation of its
        arrival is grown both ways on the same bootstrap samples, and the rule whose trees err less on the
        samples they left out (Brier score, or squared error for regression) is the feature's from then on. The
        codes of a nominal feature are often ordinal (age groups, grades) and often not, and the out-of-bag error
        tells which on the data itself (on the paper's datasets of at most 4 features, ``python -m
        scenarios.low_dimensional``, the README has the figures). :meth:`fit` splits by sets of categories under
        ``"auto"``.
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
    max_samples
        Samples a tree's bootstrap draws (with replacement, by class in proportion to its size): ``None`` as many
        as there are training samples (Breiman's forests), an int at most that many, a float in (0, 1] that share
        of them, as scikit-learn's ``max_samples``. On a large training set it makes each tree cheaper and smaller
        at little cost in accuracy; the samples a tree did not draw are its out-of-bag ones. Fixed once the forest
        has samples.
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
    leaves hold at least 8 samples (``min_samples_leaf="auto"``: smaller trees, at no cost in accuracy that the
    column orders of a 3,000-feature stream tell from noise; ``docs/wide_streams.md`` has the design and figures); and
    ``max_generations`` bounds the alive generations by merging the two oldest: the merged generation keeps
    ``trees_per_generation`` trees, drawn from each in proportion to its weight, and carries the sum of their
    weights. Each tree then stands for the same weight as before in expectation, so the bookkeeping (total weight,
    expected weighted use of every feature) is preserved.

    *Narrow streams.* While a tree would see fewer than :data:`streamforest.sampling.NARROW_SUBSPACE` features on
    average (2/3 of 1 to 9 features), per-tree subspaces leave each tree without a third of a few features, and a
    label that several features make together is out of most trees' reach. Under
    ``split_features="auto"`` every tree then takes every feature, the arriving one included (the forced feature is
    in every tree, as always), and each split draws ``max_features`` of them, rounded down as scikit-learn does.
    No weight can then balance the features' use (Algorithm 1's is unbounded), so each such generation outweighs
    the newest before it tenfold (:data:`streamforest.sampling.NARROW_ARRIVAL_GROWTH`; a :meth:`refresh`, by
    ``1 / (1 - mtry)``, as generations grow on a wider stream): the trees that have seen every feature carry the
    forest, and the earlier ones fade. Their leaves grow with the training samples (``min_samples_leaf="auto"``):
    such trees split every node on the best of the same few features, and on a hundred samples leaves of 6 vote on
    noise. How coarse such trees should be is the data's: from :data:`streamforest.growth.LEAF_CHOICE_FROM`
    training samples on, each narrow generation's first trees are grown three times on the same plans and bootstrap
    samples, with that leaf size, half and twice it, the size whose trees err least on the samples they left out
    (Brier score, or squared error, estimated for the whole generation) is kept and the rest are grown once with it;
    the fewer the samples, the more trees judge (:func:`streamforest.growth.leaf_trial_trees`: all of them on a few
    hundred samples). Past the narrow width, the bookkeeping resumes.

    *More samples.* :meth:`add_samples` appends labelled samples and regrows every alive generation on the larger
    set with the same subspaces, seeds and leaf sizes: the feature use, hence the bookkeeping, is unchanged, and the
    forest is the one it would have been had the samples been there from the start, but for what was chosen on the
    samples of a generation's birth (``min_samples_leaf="auto"``'s leaf sizes on a narrow stream, the split rule
    of a nominal feature under ``numeric_categories="auto"``).

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
        trees_per_generation: int | str = "auto",
        max_features: float | int = 2 / 3,
        max_depth: int | None = 16,
        min_samples_leaf: float | str = "auto",
        min_category_size: float = 5,
        split_features: float | str | None = "auto",
        split_threshold: str = "edge",
        numeric_categories: str = "auto",
        policy: str = "challenger",
        feature_sampling: str = "auto",
        max_subspace: int | None = 64,
        prune_threshold: float = 1e-3,
        max_generations: int | None = 40,
        max_samples: int | float | None = None,
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
        self.split_threshold = split_threshold
        self.numeric_categories = numeric_categories
        self.policy = policy
        self.feature_sampling = feature_sampling
        self.max_subspace = max_subspace
        self.prune_threshold = prune_threshold
        self.max_generations = max_generations
        self.max_samples = max_samples
        self.task = task
        self.oob_score = oob_score
        self.random_state = random_state
        inputs.check_params(self.get_params())
        self._seed = seed_of(random_state)
        self._reset()

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
        self._packed: AliveTrees | None = None
        self._oob = OutOfBag(np.zeros((0, 0)), np.zeros(0), 0.0)
        self._encoder = Encoder(self)

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

    def add_feature(self, name: str, values: Any, y: Any = None, kind: str | None = None,
                    paired_null: bool = False) -> FeatureReport:
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
        paired_null
            Also grow the generation's *null twin*: the same trees' seeds, subspaces, leaf sizes and bootstrap
            samples, on the feature's values permuted across the samples. It never joins the forest; the report
            gives the out-of-bag score with it in place of the feature's generation (``oob_null``) and the
            jackknife standard error, over the pairs of trees, of ``oob_after`` minus that (``oob_paired_se``):
            whether the feature adds to the forest, with the noise of which trees and samples the generation drew
            shared by both and cancelled in the difference. It costs a second growth (and ``oob_score``).

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(300, 2))
        >>> y = (X[:, 1] > 0).astype(int)
        >>> f = FeatureStreamForest(trees_per_generation=10, random_state=0)
        >>> _ = f.add_feature("noise", X[:, 0], y=y)
        >>> r = f.add_feature("signal", X[:, 1], paired_null=True)
        >>> r.oob_after - r.oob_null > 3 * r.oob_paired_se
        True
        """
        start = time.perf_counter()
        binner, binned = self._check_feature(name, values, y, kind)
        binner = binner.ruled(self.numeric_categories)
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
            log_w = self._narrow_weight(use, math.log(sampling.NARROW_ARRIVAL_GROWTH))
        elif self.policy == "challenger":
            log_w = self._ledger.challenger(use)
        else:
            log_w = self._ledger.uniform(use)
        self._add_generation(gen_id, [name], log_w, masks)
        if self.numeric_categories == "auto" and binner.numbers_in_order:
            self._choose_category_rule(binner)
        twin = self._null_twin() if paired_null and self.oob_score else None
        report = self._settle(name, before, start)
        if twin is not None:
            report.oob_null, report.oob_paired_se = self._paired_null_scores(*twin)
            report.seconds = time.perf_counter() - start
        return report

    def _null_twin(self) -> tuple[Generation, np.ndarray, np.ndarray, np.ndarray]:
        """The newest generation (of the newest feature) and its null twin, grown from the same plans on that
        feature's bins permuted across the samples: both generations' per-tree out-of-bag votes, and which samples
        each tree left out (the same for both: the bootstrap samples come from the trees' seeds)."""
        gen = self._generations[-1]
        training = self._training()
        n = training.n_samples
        columns = training.columns.copy()
        last = self.n_features_in_ - 1
        rng = np.random.default_rng(derive_seed(self._seed, gen.id, _NULL_SALT))
        columns[last, :n] = columns[last, rng.permutation(n)]
        null_leaves = np.empty((gen.n_trees, n), dtype=np.int32)
        null_trees = growth.grow_trees(training._replace(columns=columns), gen.subspaces, gen.seeds, gen.split_ks,
                                       gen.min_leaf, self._tree_settings(), null_leaves)
        leaves = gen.oob_leaves if gen.oob_leaves is not None else out_of_bag_leaves(gen, training)
        return gen, tree_votes(gen.trees, leaves), tree_votes(null_trees, null_leaves), leaves >= 0

    def _choose_category_rule(self, binner: ColumnBinner) -> None:
        """The newest feature's generation (grown splitting it by sets of categories) against the same trees'
        plans grown splitting it as numbers: the rule whose trees err less out of bag (Brier score, or squared
        error) is the feature's from now on (a tie keeps sets)."""
        by_sets = self._generations[-1]
        self._columns.replace_last(dataclasses.replace(binner, ordered=True))
        by_order = self._make_generation(by_sets.id, by_sets.forced, by_sets.log_weight, by_sets.subspaces,
                                         by_sets.split_ks, by_sets.min_leaf)
        if self._least_oob_error(by_sets, [by_order]) is by_sets:
            self._columns.replace_last(binner)
            return
        self._oob_apply(by_sets, -1.0)
        self._generations[-1] = by_order
        self._packed = None
        self._oob_apply(by_order, +1.0)

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
            d = self.n_features_in_
            k = sampling.subspace_size(d, self.max_features, self.max_subspace)
            log_w = self._narrow_weight(use, sampling.narrow_log_growth(d, k))
        elif self.policy == "challenger":
            log_w = self._ledger.refresh(use, masks.shape[0])
        else:
            log_w = self._ledger.uniform(use)
        self._add_generation(gen_id, [], log_w, masks)
        return self._settle("", before, start)

    def newest_report(self) -> FeatureReport:
        """The newest generation as a :class:`FeatureReport` with no feature: its weight and trees and the forest's
        out-of-bag score now (``oob_after``). What :meth:`fit` grew, told the way :meth:`add_feature` tells a
        feature's generation.

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)
        >>> r = FeatureStreamForest(trees_per_generation=20, random_state=0).fit(X, y).newest_report()
        >>> r.feature, r.generation, r.n_trees, r.weight_share, r.oob_metric, r.oob_after > 0.9
        ('', 0, 20, 1.0, 'auc', True)
        """
        self._check_fitted()
        gen = self._generations[-1]
        return FeatureReport(
            feature="", generation=gen.id, log_weight=gen.log_weight,
            weight_share=float(weight_shares(self._generations)[-1]), n_trees=gen.n_trees,
            oob_metric=metric_name(self.task, self._n_classes), oob_after=self._oob_value(),
        )

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
        binner = ColumnBinner.fit(name, values, kind, gaps=self.split_threshold == "midpoint")
        binned = binner.transform(values)
        if self._store is not None and y is not None:
            self._check_same_labels(y)
        return binner, binned

    def _new_generation_id(self) -> int:
        gen_id = self._next_generation
        self._next_generation += 1
        return gen_id

    # ------------------------------------------------------------------ growing a generation

    def _training(self) -> growth.TrainingSet:
        n = self._store.n_samples
        return growth.TrainingSet(self._store.data, n, self._y_cls, self._y_reg, self._n_classes,
                                  self._columns.is_nominal(), self._columns.bin_values(),
                                  growth.bootstrap_draws(self.max_samples, n))

    def _tree_settings(self) -> growth.TreeSettings:
        return growth.TreeSettings(self.max_depth, self.min_category_size, midpoint=self.split_threshold == "midpoint")

    def _grow(self, subspaces: list[np.ndarray], seeds: np.ndarray, split_ks: np.ndarray, min_leaf: np.ndarray,
              oob_leaves: np.ndarray | None = None) -> Trees:
        return growth.grow_trees(self._training(), subspaces, seeds, split_ks, min_leaf, self._tree_settings(),
                                 oob_leaves)

    def _capped(self) -> bool:
        return sampling.is_capped(self.n_features_in_, self.max_features, self.max_subspace)

    def _narrow(self) -> bool:
        """Whether the stream is too narrow for per-tree subspaces (``split_features="auto"``): every tree then
        takes every feature, and each split draws ``max_features`` of them."""
        return self.split_features == "auto" and sampling.is_narrow(
            self.n_features_in_, self.max_features, self.max_subspace)

    def _narrow_weight(self, use: np.ndarray, growth_rate: float) -> float:
        """Log weight of a narrow stream's generation: the newest's times ``exp(growth_rate)``. Every tree uses every
        feature: no weight balances the features' use (Algorithm 1's is unbounded), so it outgrows the newest: by
        :data:`~streamforest.sampling.NARROW_ARRIVAL_GROWTH` when a feature arrives (only its trees see that feature
        with the others), as generations grow on a wide stream when it refreshes."""
        return self._ledger.add(max(g.log_weight for g in self._generations) + growth_rate, use)

    def _generation_size(self) -> int:
        """Trees in a generation grown now (``trees_per_generation``, resolved on the current samples)."""
        if self.trees_per_generation != "auto":
            return self.trees_per_generation
        return growth.AUTO_TREES_MIN if self._capped() else growth.auto_trees(self.n_samples_)

    def _uniform_masks(self, gen_id: int) -> np.ndarray:
        if self._narrow():
            return np.ones((self._generation_size(), self.n_features_in_), dtype=np.bool_)
        return growth.uniform_masks(self._seed, gen_id, self._generation_size(), self.n_features_in_,
                                    self.max_features, self.max_subspace)

    def _arrival_masks(self, gen_id: int) -> np.ndarray:
        if self._narrow():
            return np.ones((self._generation_size(), self.n_features_in_), dtype=np.bool_)
        by_importance = self.feature_sampling == "importance" or (self.feature_sampling == "auto" and self._capped())
        imp = self._importance_vector() if by_importance and self._generations and self.policy != "baseline" \
            else None
        return growth.arrival_masks(self._seed, gen_id, self._generation_size(), self.n_features_in_,
                                    self.max_features, self.max_subspace, self.policy == "baseline", imp)

    def _add_generation(self, gen_id: int, forced: list[str], log_w: float, masks: np.ndarray) -> None:
        subspaces = sampling.masks_to_subspaces(masks)
        if self._narrow():
            k = sampling.narrow_split_size(self.n_features_in_, self.max_features, self.max_subspace)
            split_ks = np.full(len(subspaces), k, dtype=np.int64)
        else:
            split_ks = growth.split_counts(self.split_features, subspaces, self._capped())
        min_leaf = growth.leaf_sizes(self.min_samples_leaf, len(subspaces), self._capped(), self._narrow(),
                                       self.n_samples_)
        if self.min_samples_leaf == "auto" and self._narrow() and self.n_samples_ >= growth.LEAF_CHOICE_FROM:
            gen = self._leaf_choice(gen_id, forced, log_w, subspaces, split_ks, min_leaf)
        else:
            gen = self._make_generation(gen_id, forced, log_w, subspaces, split_ks, min_leaf)
        self._generations.append(gen)
        self._packed = None
        self._oob_apply(gen, +1.0)

    def _leaf_choice(self, gen_id: int, forced: list[str], log_w: float, subspaces: list[np.ndarray],
                     split_ks: np.ndarray, min_leaf: np.ndarray) -> Generation:
        """The generation grown with the leaf size, of ``min_leaf`` times 1 and each of
        :data:`~streamforest.growth.LEAF_CHOICES`, whose trees err least out of bag (:meth:`_least_oob_error`). Only
        its first :func:`~streamforest.growth.leaf_trial_trees` trees (fewer the more samples there are) are grown
        with every size, judged by the error estimated for the whole generation, and the rest with the chosen size:
        a tree depends on its seed and plan alone, so the generation is the one grown whole with that size."""
        n_trees = len(subspaces)
        k = growth.leaf_trial_trees(n_trees, self.n_samples_)
        sizes = [min_leaf] + [np.maximum(1.0, min_leaf * m) for m in growth.LEAF_CHOICES]
        trials = [self._make_generation(gen_id, forced, log_w, subspaces[:k], split_ks[:k], size[:k])
                  for size in sizes]
        best = self._least_oob_error(trials[0], trials[1:], n_trees)
        if k == n_trees:
            return best
        chosen = next(size for size, trial in zip(sizes, trials, strict=True) if trial is best)
        rest = self._make_generation(gen_id, forced, log_w, subspaces[k:], split_ks[k:], chosen[k:], first=k)
        return dataclasses.replace(
            best, trees=concat([best.trees, rest.trees]), subspaces=subspaces, seeds=np.concatenate([best.seeds,
            rest.seeds]), split_ks=split_ks, min_leaf=chosen,
            oob_leaves=None if rest.oob_leaves is None else np.concatenate([best.oob_leaves, rest.oob_leaves]))

    def _least_oob_error(self, gen: Generation, others: list[Generation], n_trees: int | None = None) -> Generation:
        """Of generations grown from the same plans but for one setting, the one whose trees err least on the
        samples they left out (:meth:`_generation_oob_error`, ``n_trees`` too; ties and unknown errors keep
        ``gen``)."""
        best, best_error = gen, self._generation_oob_error(gen, n_trees)
        for other in others:
            error = self._generation_oob_error(other, n_trees)
            if best_error is not None and error is not None and error < best_error:
                best, best_error = other, error
        return best

    def _make_generation(self, gen_id: int, forced: list[str], log_w: float, subspaces: list[np.ndarray],
                         split_ks: np.ndarray, min_leaf: np.ndarray, first: int = 0) -> Generation:
        """A generation grown on the current samples from its trees' plans (not yet in the forest); ``first``: the
        index of its first tree in the generation it is part of (which seeds it takes)."""
        seeds = growth.tree_seeds(self._seed, gen_id, first + len(subspaces))[first:]
        # The out-of-bag leaves come with the trees (found by the threads that grew them), for the out-of-bag sums.
        leaves = np.empty((len(subspaces), self.n_samples_), dtype=np.int32) if self.oob_score else None
        trees = self._grow(subspaces, seeds, split_ks, min_leaf, leaves)
        return Generation(gen_id, forced, log_w, trees, subspaces, seeds, born=self.model_version_ + 1,
                          split_ks=split_ks, min_leaf=min_leaf, oob_leaves=leaves)

    # ------------------------------------------------------------------ pruning and the budget of generations

    def _settle(self, feature: str, before: float | None, start: float) -> FeatureReport:
        """After a new generation (the newest; ``max_generations >= 2`` never merges it): prune, keep the budget,
        publish the new model version, and report on the generation (``feature`` is the forced one, or "")."""
        pruned = self._prune()
        merged = self._enforce_budget()
        importance = feature_importance(self._generations, self.n_features_in_ - 1) if feature else 0.0
        self._bump_version()
        return dataclasses.replace(self.newest_report(), feature=feature, pruned=pruned, merged=merged,
                                   importance=importance, oob_before=before, seconds=time.perf_counter() - start)

