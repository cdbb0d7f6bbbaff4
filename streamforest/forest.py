"""FeatureStreamForest: a random forest that grows a generation of trees with every arriving feature."""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from streamforest import encoding, sampling
from streamforest._random import derive_seed
from streamforest.binning import ColumnBinner, RowBinner
from streamforest.bookkeeping import WeightLedger, shares
from streamforest.columns import ColumnStore
from streamforest.metrics import log_loss, r2, roc_auc
from streamforest.tree import route
from streamforest.tree.model import Trees, concat, grow

POLICIES = ("challenger", "baseline")
#: One value of a one-row mapping (what the per-sample prediction path bins without building columns).
_SCALARS = (int, float, str, bool, np.generic, type(None))
#: How many model versions back :meth:`FeatureStreamForest.encode_delta` can reach.
DELTA_WINDOW = 16
#: Memory for the alive generations' cached out-of-bag votes (beyond it they are recomputed when needed).
OOB_CACHE_BYTES = 128 * 2**20
TASKS = ("classification", "regression")
FEATURE_SAMPLING = ("auto", "uniform", "importance")


@dataclass
class Generation:
    """The trees grown when one feature arrived (or several, once merged), sharing one weight."""

    id: int
    forced: list[str]
    log_weight: float
    trees: Trees
    subspaces: list[np.ndarray]
    seeds: np.ndarray
    born: int = 0  # the model version in which these trees became alive
    # Whether the out-of-bag sums hold this generation's votes: only trees grown on the current training samples
    # can say which of them they did not see (set_samples replaces the samples under older trees).
    in_oob: bool = True
    # Features each tree draws at every split (0: its whole subspace), fixed at birth so that regrowing on more
    # samples grows the same trees (None, from files saved before it existed: 0 for every tree).
    split_ks: np.ndarray | None = None
    # This generation's out-of-bag votes and counts on the current samples, kept (within OOB_CACHE_BYTES) so that
    # pruning or merging it away does not route the samples through its trees a second time.
    _oob_votes: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _importance: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.split_ks is None:
            self.split_ks = np.zeros(self.trees.n_trees, dtype=np.int64)

    @property
    def n_trees(self) -> int:
        return self.trees.n_trees

    def importance(self, n_features: int) -> np.ndarray:
        """Mean normalised impurity-decrease importance over the generation's trees (cached: trees never change
        in place; regrowing replaces them and clears the cache)."""
        if self._importance is None:
            self._importance = self.trees.importances(int(max(self.trees.feature.max(initial=-1) + 1, 1))).mean(0)
        out = np.zeros(n_features)
        k = min(n_features, self._importance.size)
        out[:k] = self._importance[:k]
        return out


def _pack(generations: list[Generation]) -> tuple[Trees, np.ndarray]:
    """The trees of several generations as one batch, and their seeds."""
    return concat([g.trees for g in generations]), np.concatenate([g.seeds for g in generations]).astype(np.uint64)


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
        Least (bootstrap-weighted) number of samples in a leaf.
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
    (``split_features="auto"``), so a generation costs O(sqrt(max_subspace)) per node whatever the width; and
    ``max_generations`` bounds the alive generations by merging the two
    oldest: the merged generation keeps ``trees_per_generation`` trees, drawn from each in proportion to its weight,
    and carries the sum of their weights. Each tree then stands for the same weight as before in expectation, so the
    bookkeeping (total weight, expected weighted use of every feature) is preserved.

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
    >>> max(f.feature_importances_, key=f.feature_importances_.get) in ("a", "c")
    True
    """

    def __init__(
        self,
        trees_per_generation: int = 50,
        max_features: float | int = 2 / 3,
        max_depth: int | None = 16,
        min_samples_leaf: float = 3,
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
        self._check_params()
        self._seed = int(random_state) if random_state is not None else secrets.randbits(63)
        self._reset()

    # ------------------------------------------------------------------ parameters and state

    def _params(self) -> dict[str, Any]:
        """The constructor's parameters as plain Python values (JSON-able)."""
        params = {
            "trees_per_generation": self.trees_per_generation,
            "max_features": self.max_features,
            "max_depth": self.max_depth,
            "min_samples_leaf": self.min_samples_leaf,
            "min_category_size": self.min_category_size,
            "split_features": self.split_features,
            "policy": self.policy,
            "feature_sampling": self.feature_sampling,
            "max_subspace": self.max_subspace,
            "prune_threshold": self.prune_threshold,
            "max_generations": self.max_generations,
            "task": self.task,
            "oob_score": self.oob_score,
            "random_state": self.random_state,
        }
        return {k: v.item() if isinstance(v, np.generic) else v for k, v in params.items()}

    def _check_params(self) -> None:
        def positive_int(name: str, v: Any, allow_none: bool = False) -> None:
            if v is None and allow_none:
                return
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer{' or None' if allow_none else ''}, got {v!r}")

        positive_int("trees_per_generation", self.trees_per_generation)
        positive_int("max_depth", self.max_depth, allow_none=True)
        positive_int("max_subspace", self.max_subspace, allow_none=True)
        positive_int("max_generations", self.max_generations, allow_none=True)
        if self.max_generations is not None and self.max_generations < 2:
            raise ValueError(f"max_generations must be at least 2, got {self.max_generations}")
        mf = self.max_features
        if isinstance(mf, bool) or not isinstance(mf, (int, float, np.integer, np.floating)):
            raise TypeError(f"max_features must be a float in (0, 1] or a positive int, got {mf!r}")
        if isinstance(mf, (float, np.floating)) and not 0 < mf <= 1:
            raise ValueError(f"max_features as a share must be in (0, 1], got {mf}")
        if isinstance(mf, (int, np.integer)) and mf < 1:
            raise ValueError(f"max_features as a count must be >= 1, got {mf}")
        if not (isinstance(self.min_samples_leaf, (int, float)) and self.min_samples_leaf >= 1):
            raise ValueError(f"min_samples_leaf must be a number >= 1, got {self.min_samples_leaf!r}")
        if not (isinstance(self.min_category_size, (int, float)) and self.min_category_size >= 0):
            raise ValueError(f"min_category_size must be a number >= 0, got {self.min_category_size!r}")
        sf = self.split_features
        if sf is not None and sf != "auto" and (
            isinstance(sf, bool) or not isinstance(sf, (int, float)) or not 0 < sf <= 1
        ):
            raise ValueError(f"split_features must be in (0, 1], None or 'auto', got {sf!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.feature_sampling not in FEATURE_SAMPLING:
            raise ValueError(f"feature_sampling must be one of {FEATURE_SAMPLING}, got {self.feature_sampling!r}")
        if not isinstance(self.prune_threshold, (int, float)) or not 0 <= self.prune_threshold < 1:
            raise ValueError(f"prune_threshold must be in [0, 1), got {self.prune_threshold!r}")
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")

    def _reset(self) -> None:
        self.feature_names_: list[str] = []
        self._binners: list[ColumnBinner] = []
        self._store: ColumnStore | None = None
        self._y_cls = np.zeros(0, dtype=np.int32)
        self._y_reg = np.zeros(0, dtype=np.float64)
        self.classes_: np.ndarray | None = None
        self._ledger = WeightLedger()
        self._generations: list[Generation] = []
        self._next_generation = 0
        self.model_version_ = 0
        self._graveyard: list[tuple[int, Generation]] = []
        self._delta_floor = 0
        self._packed: tuple[Trees, np.ndarray, np.ndarray] | None = None
        self._oob_sum = np.zeros((0, 0))
        self._oob_count = np.zeros(0)
        self._oob_log_ref = 0.0
        self._row_binner: tuple[list[ColumnBinner], int, RowBinner] | None = None
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
        return len(self.feature_names_)

    @property
    def n_trees_(self) -> int:
        return sum(g.n_trees for g in self._generations)

    @property
    def generations_(self) -> list[dict[str, Any]]:
        """Alive generations: id, forced feature(s), weight share, log weight, number of trees."""
        w = shares(np.array([g.log_weight for g in self._generations]))
        return [
            {"id": g.id, "forced": list(g.forced), "weight_share": float(s), "log_weight": g.log_weight,
             "n_trees": g.n_trees}
            for g, s in zip(self._generations, w, strict=True)
        ]

    # ------------------------------------------------------------------ input checks

    def _set_target(self, y: Any) -> np.ndarray:
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D, got shape {y.shape}")
        if y.size == 0:
            raise ValueError("y is empty")
        if self.task == "regression":
            try:
                yr = y.astype(np.float64)
            except (TypeError, ValueError):
                raise TypeError("regression targets must be numbers") from None
            if not np.isfinite(yr).all():
                raise ValueError("y contains NaN or infinite values")
            self._y_reg = yr
            self._y_cls = np.zeros(y.size, dtype=np.int32)
            return y
        if y.dtype.kind == "f" and np.isnan(y).any():
            raise ValueError("y contains NaN labels")
        if y.dtype.kind == "O" and any(v is None or (isinstance(v, float) and math.isnan(v)) for v in y):
            raise ValueError("y contains missing labels")
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"y has a single class ({classes[0]!r}): at least two are needed")
        self.classes_ = classes
        self._y_cls = codes.astype(np.int32)
        self._y_reg = np.zeros(y.size, dtype=np.float64)
        return y

    def _encode_labels(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.task == "regression":
            try:
                yr = np.asarray(y, dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError("regression targets must be numbers") from None
            if not np.isfinite(yr).all():
                raise ValueError("y contains NaN or infinite values")
            return np.zeros(yr.size, dtype=np.int32), yr
        if y.dtype.kind == "f" and np.isnan(y).any():
            raise ValueError("y contains NaN labels")
        pos = np.searchsorted(self.classes_, y)
        pos = np.clip(pos, 0, len(self.classes_) - 1)
        bad = self.classes_[pos] != y
        if bad.any():
            raise ValueError(f"y contains classes not seen on the first call: {sorted(set(y[bad].tolist()))[:5]}")
        return pos.astype(np.int32), np.zeros(y.size, dtype=np.float64)

    def _bin_inputs(self, X: Any, what: str = "X") -> np.ndarray:
        """Bin prediction or sample inputs to a C-contiguous ``(n_features, m)`` array."""
        d = self.n_features_in_
        if isinstance(X, Mapping) or (hasattr(X, "keys") and hasattr(X, "__getitem__") and not hasattr(X, "shape")):
            return self._bin_mapping(X, what)
        if hasattr(X, "columns") and hasattr(X, "__getitem__"):  # a data frame: by column name
            return self._bin_mapping({str(c): X[c] for c in X.columns}, what)
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"{what} must be 2-D (samples x features), got shape {X.shape}")
        if X.shape[1] != d:
            raise ValueError(f"{what} has {X.shape[1]} columns; the forest has {d} features (in arrival order)")
        out = np.empty((d, X.shape[0]), dtype=np.uint8)
        for j, b in enumerate(self._binners):
            out[j] = b.transform(X[:, j])
        return out

    def _bin_mapping(self, X: Mapping, what: str) -> np.ndarray:
        names = [str(k) for k in X.keys()]
        known = set(self.feature_names_)
        unknown = [k for k in names if k not in known]
        if unknown:
            raise ValueError(f"{what} has unknown feature names: {unknown[:10]}")
        given = set(names)
        missing = [k for k in self.feature_names_ if k not in given]
        if missing:
            raise ValueError(f"{what} lacks features: {missing[:10]} (pass NaN for missing values)")
        by_name = {str(k): k for k in X.keys()}
        row = [X[by_name[name]] for name in self.feature_names_]
        if all(isinstance(v, _SCALARS) for v in row):
            bins = self._bin_row(row)
            if bins is not None:
                return bins[:, None]
        lengths = {np.asarray(X[k]).shape[0] if np.ndim(X[k]) else 1 for k in X.keys()}
        if len(lengths) != 1:
            raise ValueError(f"{what}: columns differ in length ({sorted(lengths)})")
        m = lengths.pop()
        out = np.empty((self.n_features_in_, m), dtype=np.uint8)
        for j, (name, b) in enumerate(zip(self.feature_names_, self._binners, strict=True)):
            out[j] = b.transform(np.atleast_1d(np.asarray(X[by_name[name]])))
        return out

    def _bin_row(self, row: list[Any]) -> np.ndarray | None:
        """Bins of one sample given as one scalar per feature (arrival order); None if it needs the column path."""
        cached = self._row_binner
        # Binners are only ever appended to (or the list replaced, by fit and load): the list and its length
        # identify what the cached row binner was built from.
        if cached is None or cached[0] is not self._binners or cached[1] != len(self._binners):
            cached = self._row_binner = (self._binners, len(self._binners), RowBinner(self._binners))
        return cached[2].transform(row)

    # ------------------------------------------------------------------ growing

    def _narrow(self) -> bool:
        """Whether the stream is too narrow for per-tree subspaces (``split_features="auto"``): every tree then
        takes every feature, and each split draws ``max_features`` of them."""
        return self.split_features == "auto" and sampling.is_narrow(
            self.n_features_in_, self.max_features, self.max_subspace)

    def _narrow_weight(self, use: np.ndarray) -> float:
        """Log weight of a narrow stream's generation. Every tree uses every feature: no weight balances the
        features' use (Algorithm 1's is unbounded), so it outgrows the newest as generations do on a wide stream."""
        d = self.n_features_in_
        growth = sampling.narrow_log_growth(d, sampling.subspace_size(d, self.max_features, self.max_subspace))
        return self._ledger.add(max(g.log_weight for g in self._generations) + growth, use)

    def _split_ks(self, subspaces: list[np.ndarray]) -> np.ndarray:
        """How many features each tree of a generation born now draws at every split (see ``split_features``)."""
        share = self.split_features
        if self._narrow():
            k = sampling.narrow_split_size(self.n_features_in_, self.max_features, self.max_subspace)
            return np.full(len(subspaces), k, dtype=np.int64)
        if share == "auto":
            if not sampling.is_capped(self.n_features_in_, self.max_features, self.max_subspace):
                return np.zeros(len(subspaces), dtype=np.int64)
            # Once capped, the subspace is already the useful part of the stream: Breiman's sqrt(d) per split keeps
            # a split's cost O(sqrt(max_subspace)) and decorrelates trees that share the important features.
            return np.array([math.ceil(math.sqrt(len(s))) for s in subspaces], dtype=np.int64)
        return np.array([0 if share is None else max(1, math.ceil(share * len(s))) for s in subspaces], dtype=np.int64)

    def _grow(self, subspaces: list[np.ndarray], seeds: np.ndarray, split_ks: np.ndarray) -> Trees:
        is_nominal = np.array([b.is_nominal for b in self._binners], dtype=np.bool_)
        return grow(
            self._store.data, self._store.n_samples, self._y_cls, self._y_reg, self._n_classes, subspaces, seeds,
            is_nominal, max_depth=self.max_depth if self.max_depth is not None else 10_000,
            min_samples_leaf=self.min_samples_leaf, split_features=split_ks,
            min_category_weight=self.min_category_size,
        )

    def _seeds(self, generation: int, n_trees: int) -> np.ndarray:
        return np.array([derive_seed(self._seed, generation, t) for t in range(n_trees)], dtype=np.uint64)

    def _uniform_masks(self, generation: int) -> np.ndarray:
        """Subspaces where every feature joins with the same probability (the offline forest, refreshes)."""
        d = self.n_features_in_
        if self._narrow():
            return np.ones((self.trees_per_generation, d), dtype=np.bool_)
        rng = np.random.default_rng(derive_seed(self._seed, generation, 0xFEA7))
        k = sampling.subspace_size(d, self.max_features, self.max_subspace)
        return sampling.uniform(rng, self.trees_per_generation, d, k / d)

    def _sample_masks(self, generation: int) -> np.ndarray:
        d = self.n_features_in_
        T = self.trees_per_generation
        if self._narrow():
            return np.ones((T, d), dtype=np.bool_)
        rng = np.random.default_rng(derive_seed(self._seed, generation, 0xFEA7))
        k = sampling.subspace_size(d, self.max_features, self.max_subspace)
        p_old = (k - 1.0) / (d - 1.0) if d > 1 else 1.0
        if self.policy == "baseline":
            return sampling.uniform(rng, T, d, min(1.0, p_old))
        by_importance = self.feature_sampling == "importance" or (
            self.feature_sampling == "auto" and sampling.is_capped(d, self.max_features, self.max_subspace)
        )
        imp = self._importance_vector() if by_importance and self._generations else None
        return sampling.challenger(rng, T, sampling.old_feature_probabilities(d, k, imp))

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
        if not isinstance(name, str) or not name:
            raise TypeError(f"a feature name must be a non-empty string, got {name!r}")
        if name in self.feature_names_:
            raise ValueError(f"duplicate feature name {name!r}")
        values = np.asarray(values)
        if values.ndim != 1:
            raise ValueError(f"feature {name!r}: values must be 1-D, got shape {values.shape}")
        first = self._store is None
        if first:
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
        if first:
            self._set_target(y)
            self._store = ColumnStore(values.shape[0])
            self._clear_oob()
        elif y is not None:
            self._check_same_labels(y)
        self._binners.append(binner)
        self.feature_names_.append(name)
        self._store.add_column(binned)

        before = self._oob_value() if self._generations else None
        gen_id = self._next_generation
        self._next_generation += 1
        masks = self._sample_masks(gen_id)
        use = masks.sum(axis=0).astype(np.float64)
        if self.policy == "challenger" and self._narrow() and self._generations:
            log_w = self._narrow_weight(use)
        elif self.policy == "challenger":
            log_w = self._ledger.challenger(use)
        else:
            log_w = self._ledger.uniform(use)
        self._add_generation(gen_id, [name], log_w, sampling.masks_to_subspaces(masks))
        return self._settle(name, before, start)

    def _settle(self, feature: str, before: float | None, start: float) -> FeatureReport:
        """After a new generation (the newest; ``max_generations >= 2`` never merges it): prune, keep the budget,
        publish the new model version, and report on the generation (``feature`` is the forced one, or "")."""
        gen = self._generations[-1]
        pruned = self._prune()
        merged = self._enforce_budget()
        after = self._oob_value()
        share = float(shares(np.array([g.log_weight for g in self._generations]))[-1])
        importance = float(self._importance_vector()[-1]) if feature else 0.0
        self._bump_version()
        return FeatureReport(
            feature=feature, generation=gen.id, log_weight=gen.log_weight, weight_share=share, n_trees=gen.n_trees,
            pruned=pruned, merged=merged, importance=importance, oob_metric=self._oob_metric_name(),
            oob_before=before, oob_after=after, seconds=time.perf_counter() - start,
        )

    def _check_same_labels(self, y: Any) -> None:
        y = np.asarray(y)
        if y.shape != (self.n_samples_,):
            raise ValueError(f"y has {y.shape} labels; the forest has {self.n_samples_} samples")
        codes, yr = self._encode_labels(y)
        if not (np.array_equal(codes, self._y_cls) and np.array_equal(yr, self._y_reg)):
            raise ValueError("y differs from the labels given earlier (use add_samples for new samples)")

    def _add_generation(self, gen_id: int, forced: list[str], log_w: float, subspaces: list[np.ndarray]) -> None:
        seeds = self._seeds(gen_id, len(subspaces))
        split_ks = self._split_ks(subspaces)
        trees = self._grow(subspaces, seeds, split_ks)
        gen = Generation(gen_id, forced, log_w, trees, subspaces, seeds, born=self.model_version_ + 1,
                         split_ks=split_ks)
        self._generations.append(gen)
        self._packed = None
        self._oob_apply(gen, +1.0)

    def _prune(self) -> list[int]:
        if self.prune_threshold <= 0 or len(self._generations) < 2:
            return []
        w = shares(np.array([g.log_weight for g in self._generations]))
        newest = self._generations[-1]
        drop = [g for g, s in zip(self._generations, w, strict=True) if s < self.prune_threshold and g is not newest]
        for g in drop:
            self._oob_apply(g, -1.0)
            self._bury(g)
        self._generations = [g for g in self._generations if all(g is not d for d in drop)]
        if drop:
            self._packed = None
        return [g.id for g in drop]

    def _enforce_budget(self) -> list[int]:
        merged: list[int] = []
        while self.max_generations is not None and len(self._generations) > self.max_generations:
            a, b = self._generations[0], self._generations[1]
            self._oob_apply(a, -1.0)
            self._oob_apply(b, -1.0)
            la, lb = a.log_weight, b.log_weight
            total = float(np.logaddexp(la, lb))
            T = self.trees_per_generation
            n_a = round(T * math.exp(la - total))
            n_a = min(n_a, a.n_trees)
            n_b = min(T - n_a, b.n_trees)
            trees = concat([a.trees.take(np.arange(n_a)), b.trees.take(np.arange(n_b))])
            gen = Generation(
                id=a.id, forced=a.forced + b.forced, log_weight=total, trees=trees,
                subspaces=a.subspaces[:n_a] + b.subspaces[:n_b],
                seeds=np.concatenate([a.seeds[:n_a], b.seeds[:n_b]]), born=self.model_version_ + 1,
                split_ks=np.concatenate([a.split_ks[:n_a], b.split_ks[:n_b]]),
                in_oob=a.in_oob and b.in_oob,
            )
            self._bury(a)
            self._bury(b)
            self._generations[:2] = [gen]
            self._oob_apply(gen, +1.0)
            self._packed = None
            merged.append(b.id)
        return merged

    def _bury(self, gen: Generation) -> None:
        """Keep a removed generation for a while, so that encodings can be updated by a delta."""
        died = self.model_version_ + 1
        self._graveyard = [(v, g) for v, g in self._graveyard if v > died - DELTA_WINDOW] + [(died, gen)]

    def _bump_version(self) -> None:
        self.model_version_ += 1
        self._graveyard = [(v, g) for v, g in self._graveyard if v > self.model_version_ - DELTA_WINDOW]

    # ------------------------------------------------------------------ out-of-bag bookkeeping

    def _oob_apply(self, gen: Generation, sign: float) -> None:
        """Add (sign +1) or remove (-1) a generation's out-of-bag votes, kept relative to a reference weight."""
        if not self.oob_score or not gen.in_oob:
            return
        if gen._oob_votes is not None:
            votes, counts = gen._oob_votes
        else:
            votes, counts = route.out_of_bag(
                gen.trees, self._store.data, self._store.n_samples, self._y_cls, self._n_classes, gen.seeds
            )
        # Recomputing gives the very same numbers, so whether a generation is cached changes speed, never results.
        cached = sum(g._oob_votes[0].nbytes + g._oob_votes[1].nbytes for g in self._generations
                     if g._oob_votes is not None and g is not gen)
        keep = sign > 0 and cached + votes.nbytes + counts.nbytes <= OOB_CACHE_BYTES
        gen._oob_votes = (votes, counts) if keep else None
        if sign > 0 and gen.log_weight > self._oob_log_ref:
            scale = math.exp(self._oob_log_ref - gen.log_weight) if self._oob_count.any() else 0.0
            self._oob_sum *= scale
            self._oob_count *= scale
            self._oob_log_ref = gen.log_weight
        factor = sign * math.exp(gen.log_weight - self._oob_log_ref) / gen.n_trees
        self._oob_sum += factor * votes
        self._oob_count += factor * counts

    def _oob_metric_name(self) -> str:
        if self.task == "regression":
            return "r2"
        return "auc" if self._n_classes == 2 else "log_loss"

    def _oob_value(self) -> float | None:
        if not self.oob_score or not self._oob_count.size:
            return None
        top = float(self._oob_count.max())
        ok = self._oob_count > 1e-9 * top if top > 0 else np.zeros_like(self._oob_count, dtype=bool)
        if ok.sum() < 2:
            return None
        pred = self._oob_sum[ok] / self._oob_count[ok, None]
        if self.task == "regression":
            return r2(self._y_reg[ok], pred[:, 0])
        if self._n_classes == 2:
            return roc_auc(self._y_cls[ok] == 1, pred[:, 1])
        return log_loss(self._y_cls[ok], pred)

    def _clear_oob(self) -> None:
        """Empty out-of-bag sums for the current samples; no generation's votes in them (or cached) any more."""
        self._oob_sum = np.zeros((self.n_samples_, max(self._n_classes, 1)))
        self._oob_count = np.zeros(self.n_samples_)
        self._oob_log_ref = max((g.log_weight for g in self._generations), default=0.0)
        for g in self._generations:
            g.in_oob = False
            g._oob_votes = None

    def _recompute_oob(self) -> None:
        self._clear_oob()
        for g in self._generations:
            g.in_oob = True
            self._oob_apply(g, +1.0)

    # ------------------------------------------------------------------ more samples, offline fit

    def add_samples(self, X_rows: Any, y_rows: Any) -> None:
        """More labelled samples; every alive generation is regrown on all samples with the same subspaces."""
        if self._store is None:
            raise ValueError("add_samples needs at least one feature first (call add_feature with y)")
        Xb = self._bin_inputs(X_rows, "X_rows")
        y_rows = np.asarray(y_rows)
        if y_rows.ndim != 1 or y_rows.shape[0] != Xb.shape[1]:
            raise ValueError(f"y_rows must be 1-D with one label per row ({Xb.shape[1]}), got shape {y_rows.shape}")
        codes, yr = self._encode_labels(y_rows)
        self._store.add_rows(Xb)
        self._y_cls = np.concatenate([self._y_cls, codes])
        self._y_reg = np.concatenate([self._y_reg, yr])
        for g in self._generations:
            g.trees = self._grow(g.subspaces, g.seeds, g.split_ks)
            g._importance = None
            g.born = self.model_version_ + 1
        self._packed = None
        self._recompute_oob()
        # Every tree changed: encodings from before cannot be patched, only recomputed.
        self._graveyard = []
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
        Xb = np.ascontiguousarray(self._bin_inputs(X, "X"))
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != Xb.shape[1]:
            raise ValueError(f"y must be 1-D with one label per sample ({Xb.shape[1]}), got shape {y.shape}")
        if y.size == 0:
            raise ValueError("set_samples needs at least one sample")
        codes, yr = self._encode_labels(y)
        self._store = ColumnStore.from_array(Xb)
        self._y_cls, self._y_reg = codes, yr
        self._clear_oob()
        self._graveyard = []
        self._bump_version()
        self._delta_floor = self.model_version_

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
        gen_id = self._next_generation
        self._next_generation += 1
        masks = self._uniform_masks(gen_id)
        use = masks.sum(axis=0).astype(np.float64)
        if self.policy == "challenger" and self._narrow():
            log_w = self._narrow_weight(use)
        elif self.policy == "challenger":
            log_w = self._ledger.refresh(use, self.trees_per_generation)
        else:
            log_w = self._ledger.uniform(use)
        self._add_generation(gen_id, [], log_w, sampling.masks_to_subspaces(masks))
        return self._settle("", before, start)

    def fit(self, X: Any, y: Any, kinds: Mapping[str, str] | None = None) -> FeatureStreamForest:
        """The offline forest: all features at once, ``trees_per_generation`` trees on random subspaces."""
        self._reset()
        if isinstance(X, Mapping):
            names = [str(k) for k in X]
            columns = [np.asarray(X[k]) for k in X]
        else:
            X = np.asarray(X)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D (samples x features), got shape {X.shape}")
            names = [f"x{j}" for j in range(X.shape[1])]
            columns = [X[:, j] for j in range(X.shape[1])]
        if len(set(names)) != len(names):
            raise ValueError("duplicate feature names in X")
        y_arr = np.asarray(y)
        if not columns:
            raise ValueError("X has no features")
        for name, col in zip(names, columns, strict=True):
            if col.shape[0] != y_arr.shape[0]:
                raise ValueError(f"feature {name!r} has {col.shape[0]} values but y has {y_arr.shape[0]} labels")
        self._set_target(y_arr)
        self._store = ColumnStore(y_arr.shape[0])
        for name, col in zip(names, columns, strict=True):
            b = ColumnBinner.fit(name, col, (kinds or {}).get(name))
            self._binners.append(b)
            self.feature_names_.append(name)
            self._store.add_column(b.transform(col))
        masks = self._uniform_masks(0)
        log_w = self._ledger.uniform(masks.sum(axis=0).astype(np.float64))
        self._next_generation = 1
        self._clear_oob()
        self._add_generation(0, [], log_w, sampling.masks_to_subspaces(masks))
        self._bump_version()
        self._delta_floor = self.model_version_
        return self

    # ------------------------------------------------------------------ prediction

    def _forest(self) -> tuple[Trees, np.ndarray, np.ndarray]:
        """All alive trees packed for routing, each tree's weight (summing to 1) and each tree's seed."""
        if self._packed is None:
            w = shares(np.array([g.log_weight for g in self._generations]))
            tree_w = np.concatenate(
                [np.full(g.n_trees, s / g.n_trees) for g, s in zip(self._generations, w, strict=True)]
            )
            trees, seeds = _pack(self._generations)
            self._packed = (trees, tree_w, seeds)
        return self._packed

    def _check_fitted(self) -> None:
        if not self._generations:
            raise ValueError("the forest has no trees yet: add a feature (or fit) before predicting")

    def _raw(self, X: Any) -> np.ndarray:
        self._check_fitted()
        Xb = np.ascontiguousarray(self._bin_inputs(X))
        trees, tree_w, _ = self._forest()
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
        n_components: int | None = 2**18,
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
        Xb = np.ascontiguousarray(self._bin_inputs(X))
        trees, tree_w, seeds = packed = self._forest()
        keys = encoding.sample_keys_from_ids(sample_ids, Xb.shape[1]) if sample_ids is not None else None
        encoding.check_arguments(n_components, values, missing)
        # The node table is rebuilt only when the packed forest or the arguments change (a new tuple per change).
        arguments = (n_components, values, signed)
        cached = self._node_table
        if cached is None or cached[0] is not packed or cached[1] != arguments:
            cached = self._node_table = (packed, arguments, encoding.node_table(trees, seeds, tree_w, *arguments))
        with route.threads_for(Xb.shape[1]):
            return encoding.encode_binned(trees, seeds, tree_w, Xb, n_components, values, leaves_only, missing,
                                          signed, keys, table=cached[2])

    def encode_delta(self, X: Any, since: int, n_components: int | None = 2**18, leaves_only: bool = False,
                     missing: str = "default", signed: bool = False, sample_ids: Any = None) -> sp.csr_matrix:
        """What to add to a binary encoding made at model version ``since`` to get the current one.

        Only the generations grown or removed since then change; the delta encodes the new generations' nodes with
        +1 and the removed generations' nodes with -1, so that ``encode(X)`` now equals
        ``encode(X) at since + encode_delta(X, since)`` (for the same arguments, ``values="binary"``). Versions
        older than the last ``DELTA_WINDOW`` changes, or from before :meth:`add_samples` regrew every tree, raise
        ``ValueError``: re-encode instead.

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
        Xb = np.ascontiguousarray(self._bin_inputs(X))
        added = [g for g in self._generations if g.born > since]
        removed = [g for died, g in self._graveyard if died > since and g.born <= since]
        keys = encoding.sample_keys_from_ids(sample_ids, Xb.shape[1]) if sample_ids is not None else None
        out = sp.csr_matrix((Xb.shape[1], n_components), dtype=np.float32)
        for gens, sign in ((added, 1.0), (removed, -1.0)):
            if gens:
                trees, seeds = _pack(gens)
                part = encoding.encode_binned(trees, seeds, np.ones(trees.n_trees), Xb, n_components, "binary",
                                              leaves_only, missing, signed, keys)
                out = out + sign * part
        out.eliminate_zeros()
        return out.tocsr()

    def _importance_vector(self) -> np.ndarray:
        """Share-weighted importances of the generations (per-generation vectors are cached, so this stays cheap
        when thousands of features have arrived)."""
        d = self.n_features_in_
        if not self._generations:
            return np.zeros(d)
        w = shares(np.array([g.log_weight for g in self._generations]))
        return sum((s * g.importance(d) for g, s in zip(self._generations, w, strict=True)), np.zeros(d))

    @property
    def feature_importances_(self) -> dict[str, float]:
        """Impurity-decrease importance of every feature, averaged over trees by their weight (sums to 1)."""
        imp = self._importance_vector()
        total = imp.sum()
        if total > 0:
            imp = imp / total
        return {name: float(v) for name, v in zip(self.feature_names_, imp, strict=True)}

    # ------------------------------------------------------------------ persistence

    def save(self, path: Any) -> None:
        """Write the forest (and its training columns) to one ``.npz`` file of plain arrays and JSON; no pickle."""
        from streamforest.persistence import save_forest

        save_forest(self, path)

    @classmethod
    def load(cls, path: Any) -> FeatureStreamForest:
        """Read a forest written by :meth:`save`."""
        from streamforest.persistence import load_forest

        return load_forest(cls, path)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"
