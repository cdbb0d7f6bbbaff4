"""How a generation is grown: which features each tree may use, its seed, how many features a split draws, how
large its leaves must be, and the trees themselves on the current training samples.

Every draw is keyed by the forest's seed and the generation id (:func:`streamforest.rng.derive_seed`), so a
generation is the same in any process, and regrowing it on more samples with its stored subspaces and seeds gives
the trees it would have had, had the samples been there from the start.
"""

from __future__ import annotations

import math

import numpy as np

from streamforest import sampling
from streamforest.rng import derive_seed, derive_seeds
from streamforest.tree.grow import TrainingSet, TreeSettings
from streamforest.tree.model import Trees, grow

#: Salt of the subspace draws (the tree seeds use the tree's index in its place).
_SUBSPACE_SALT = 0xFEA7
#: ``min_samples_leaf="auto"``: the leaf size of a stream past the narrow width until the subspaces are capped, and
#: the least leaf size of a narrow stream (see :func:`leaf_sizes`) ... On the paper's datasets of at most 4
#: features (``python -m scenarios.low_dimensional --max-d 4``, 8 seeds, with
#: :data:`~streamforest.sampling.NARROW_ARRIVAL_GROWTH`), leaves of 6 rather than 5 raised the mean test AUC by
#: 0.0007 on the tuning half and 0.0005 on the held-out half; 7 and 8 lowered it (tiny datasets lose most).
AUTO_LEAF = 6.0
#: ... the largest leaf size of a narrow stream (from 144 samples on) ...
AUTO_LEAF_MAX = 12.0
#: ... and the leaf size from the cap on.
AUTO_LEAF_CAPPED = 8.0
#: ``min_samples_leaf="auto"`` on a narrow stream of at least :data:`LEAF_CHOICE_FROM` training samples: the arriving
#: generation is also grown with its leaf size times each of these, and the one whose trees err least out of bag
#: (Brier score, or squared error) is kept. The best leaf of trees that split every node on the best of the same two
#: or three features is the data's: on the paper's datasets of at most 3 features, halving it raised the test AUC
#: of some (analcatdata_seropositive) and doubling it that of others (lupus). On the tuning half of ``python -m
#: scenarios.low_dimensional --max-d 4`` (16 splits, seeds 9200-9215), choosing from 100 samples on raised the mean
#: test AUC from 0.8433 to 0.8441 (scikit-learn's forest 0.8414), most on disclosure_z (+0.012) and hayes-roth
#: (+0.012), least on arsenic-male-bladder (-0.013).
LEAF_CHOICES = (0.5, 2.0)
#: ... from this many training samples: on fewer, out-of-bag errors are too noisy to choose by (choosing on every
#: narrow stream took chscase_health's 34 training samples from +0.007 to -0.036 against scikit-learn's forest).
LEAF_CHOICE_FROM = 100
#: Only the first trees of a narrow generation are grown with every leaf size, and the rest with the size they
#: choose (see :func:`leaf_trial_trees`): as many as make this many with the training samples (the fewer the
#: samples, the noisier a tree's out-of-bag error) ... On every dataset (``python -m scenarios.low_dimensional``),
#: against choosing on every tree, the mean test AUC moved by +0.0000 on seeds 12000-12002 (per dataset -0.0007 to
#: +0.0019) and +0.0001 on the paper's (-0.0014 to +0.0046); a fixed 20 trees from 2,000 samples on, by -0.0001 on
#: the 9 datasets of 2,000-5,000 training samples (seeds 11800-11809 and 11900-11909; worst -0.0005). A narrow
#: arrival on 2,500 samples: 178 ms choosing on all 300 trees, 103 ms on 40 (README).
LEAF_TRIAL_SAMPLES = 100_000
#: ... and at least this many. On the paper's 15 datasets of at least 8,192 rows (``--datasets ...``, seeds
#: 11500-11502 and 11600-11602), choosing on 20 trees by the error estimated for the whole generation moved the mean
#: test AUC by +0.0001 and -0.0000 (worst dataset -0.0003) against choosing on all of them, and by -0.0000 on the
#: paper's seeds 2101-2103 (worst -0.0005); on 10 trees by -0.0001 and -0.0001 (worst -0.0018), and by their own
#: error, which favours coarse trees, by -0.0005 (worst -0.0070); not choosing from 5,000 samples on by -0.0007
#: (worst -0.0065). A narrow arrival on 50,000 samples: 1.0 s choosing on all 50 trees, 0.57 s on 20 (README).
LEAF_TRIAL_TREES = 20
#: ``trees_per_generation="auto"``: a generation's trees and the training samples they are grown on multiply to at
#: most this (see :func:`auto_trees`) ...
AUTO_TREE_SAMPLES = 750_000
#: ... with at least this many trees ...
AUTO_TREES_MIN = 50
#: ... and at most this many (scikit-learn's reference forest's count in ``scenarios.low_dimensional``).
AUTO_TREES_MAX = 300


def tree_seeds(seed: int, generation: int, n_trees: int) -> np.ndarray:
    """The seeds of a generation's trees."""
    return derive_seeds(seed, generation, n=n_trees)


def uniform_masks(seed: int, generation: int, n_trees: int, n_features: int, max_features: float | int,
                  max_subspace: int | None) -> np.ndarray:
    """Subspaces where every feature joins with the same probability (the offline forest, refreshes)."""
    rng = np.random.default_rng(derive_seed(seed, generation, _SUBSPACE_SALT))
    k = sampling.subspace_size(n_features, max_features, max_subspace)
    return sampling.uniform(rng, n_trees, n_features, k / n_features)


def arrival_masks(seed: int, generation: int, n_trees: int, n_features: int, max_features: float | int,
                  max_subspace: int | None, baseline: bool, importances: np.ndarray | None) -> np.ndarray:
    """Subspaces of the generation grown when the last of ``n_features`` arrives: under the challenger policy it is
    forced into every tree and older features join uniformly, or by ``importances`` when given; under the baseline
    every feature joins alike."""
    rng = np.random.default_rng(derive_seed(seed, generation, _SUBSPACE_SALT))
    k = sampling.subspace_size(n_features, max_features, max_subspace)
    p_old = (k - 1.0) / (n_features - 1.0) if n_features > 1 else 1.0
    if baseline:
        return sampling.uniform(rng, n_trees, n_features, min(1.0, p_old))
    return sampling.challenger(rng, n_trees, sampling.old_feature_probabilities(n_features, k, importances))


def split_counts(split_features: float | str | None, subspaces: list[np.ndarray], capped: bool) -> np.ndarray:
    """How many features each tree draws at every split (0: its whole subspace), see ``split_features``."""
    if split_features == "auto":
        if not capped:
            return np.zeros(len(subspaces), dtype=np.int64)
        # Once capped, the subspace is already the useful part of the stream: Breiman's sqrt(d) per split keeps
        # a split's cost O(sqrt(max_subspace)) and decorrelates trees that share the important features.
        return np.array([math.ceil(math.sqrt(len(s))) for s in subspaces], dtype=np.int64)
    return np.array([0 if split_features is None else max(1, math.ceil(split_features * len(s))) for s in subspaces],
                    dtype=np.int64)


def auto_leaf(n_samples: int) -> float:
    """``min_samples_leaf="auto"``'s leaf size on a narrow stream: ``sqrt(n_samples)`` within ``[AUTO_LEAF,
    AUTO_LEAF_MAX]``.

    A narrow stream's trees take every feature (:func:`streamforest.sampling.is_narrow`): each of their nodes splits
    on the best of the same two or three features, and what keeps them from splitting on noise is the leaf size. A
    leaf of 6 is a noisy vote on a hundred samples and a fine one on ten thousand: leaves that grow with the samples
    keep a small set's trees coarse, and the least size keeps a set of a few dozen samples splittable. On the paper's
    datasets of at most 4 features (``python -m scenarios.low_dimensional --max-d 4``), against leaves of 6, this
    raised the share of datasets where the streamed forest is at least as good as scikit-learn's from 39.4% to 48.5%
    on the held-out half (seeds 2105-2108) and from 54.3% to 60.0% on the tuning half (seeds 2101-2104); README has
    the figures. Past the narrow width, where trees see different subspaces, leaves stay at :data:`AUTO_LEAF`: the
    same rule at every width lowered the mean test AUC on the paper's 144 datasets of 5-12 features and at most
    5,000 rows (same protocol, seeds 2101-2102) from 0.8466 to 0.8433 (scikit-learn's forest 0.8472).

    Examples
    --------
    >>> [auto_leaf(n) for n in (20, 81, 1000)]
    [6.0, 9.0, 12.0]
    """
    return min(AUTO_LEAF_MAX, max(AUTO_LEAF, math.sqrt(n_samples)))


def auto_trees(n_samples: int) -> int:
    """``trees_per_generation="auto"``'s trees per generation on ``n_samples`` training samples:
    :data:`AUTO_TREE_SAMPLES` / ``n_samples`` within ``[AUTO_TREES_MIN, AUTO_TREES_MAX]``.

    Until the subspaces are capped, most of a streamed forest's weight lies on its newest generations (the
    bookkeeping's weights grow geometrically with the arrivals), so a generation's trees are most of the forest's
    votes, and on a small training set their number is what keeps it from the variance of a few dozen trees. The
    growth, out-of-bag scoring and memory of a generation go with its trees times its samples: fixing that product
    spends on a small set what a large one costs anyway, and leaves a large one (from 15,000 samples on) at
    :data:`AUTO_TREES_MIN`. On the paper's 141 datasets of 5-12 features and at most 5,000 rows (``python -m
    scenarios.low_dimensional --datasets ... --seed-from 11000 --seeds 2``, narrow up to 3 features), 50, 150, 300
    and 600 trees per generation gave a mean test AUC of 0.8515, 0.8533, 0.8550 and 0.8550 (scikit-learn's 300 trees
    0.8529) and were at least as good on 48.2%, 51.8%, 56.0% and 58.9% of them; README has the figures on other
    blocks.

    Examples
    --------
    >>> [auto_trees(n) for n in (100, 2_500, 5_000, 10_000, 15_000, 200_000)]
    [300, 300, 150, 75, 50, 50]
    """
    return min(AUTO_TREES_MAX, max(AUTO_TREES_MIN, round(AUTO_TREE_SAMPLES / max(n_samples, 1))))


def leaf_trial_trees(n_trees: int, n_samples: int) -> int:
    """How many of a narrow generation's ``n_trees`` trees grown on ``n_samples`` are grown with every leaf size
    of ``min_samples_leaf="auto"``'s choice (:data:`LEAF_CHOICES`): trees and samples multiply to
    :data:`LEAF_TRIAL_SAMPLES`, so that the fewer the samples, the more trees judge (their out-of-bag errors are
    noisier), with at least :data:`LEAF_TRIAL_TREES` (a generation of 50 trees on 50,000 samples grows 90 trees
    rather than 150; one of 300 on 2,500 samples 380 rather than 900).

    Examples
    --------
    >>> [leaf_trial_trees(300, 200), leaf_trial_trees(300, 2_500), leaf_trial_trees(150, 5_000)]
    [300, 40, 20]
    """
    return min(n_trees, max(LEAF_TRIAL_TREES, math.ceil(LEAF_TRIAL_SAMPLES / max(n_samples, 1))))


def bootstrap_draws(max_samples: int | float | None, n_samples: int) -> int:
    """How many samples a tree's bootstrap draws out of ``n_samples`` under ``max_samples`` (see
    :class:`~streamforest.FeatureStreamForest`), 0 meaning all of them (the kernels' convention).

    Examples
    --------
    >>> [bootstrap_draws(None, 500), bootstrap_draws(100, 500), bootstrap_draws(0.5, 500), bootstrap_draws(900, 500)]
    [0, 100, 250, 0]
    """
    if max_samples is None:
        return 0
    draws = max(1, round(max_samples * n_samples)) if isinstance(max_samples, float) else int(max_samples)
    return 0 if draws >= n_samples else draws


def leaf_sizes(min_samples_leaf: float | str, n_trees: int, capped: bool, narrow: bool, n_samples: int) -> np.ndarray:
    """The least (bootstrap-weighted) samples in a leaf of each tree grown on ``n_samples`` while the stream is
    ``narrow`` or not (:func:`streamforest.sampling.is_narrow`) and ``capped`` or not, see ``min_samples_leaf``."""
    if min_samples_leaf == "auto" and narrow:
        min_samples_leaf = auto_leaf(n_samples)
    if min_samples_leaf == "auto":
        # Once capped, the stream is wide and its trees many: larger leaves grow smaller trees (about 30% fewer
        # nodes on the wide benchmark stream, which runs faster) at a test AUC within noise (docs/wide_streams.md).
        min_samples_leaf = AUTO_LEAF_CAPPED if capped else AUTO_LEAF
    return np.full(n_trees, float(min_samples_leaf))


def grow_trees(training: TrainingSet, subspaces: list[np.ndarray], seeds: np.ndarray, split_ks: np.ndarray,
               min_leaf: np.ndarray, settings: TreeSettings, oob_leaves: np.ndarray | None = None) -> Trees:
    """One tree per subspace, grown on the training samples with its per-split feature count and leaf size
    (``oob_leaves``: see :func:`~streamforest.tree.model.grow`)."""
    return grow(training, subspaces, seeds, settings, min_samples_leaf=min_leaf, split_features=split_ks,
                oob_leaves=oob_leaves)
