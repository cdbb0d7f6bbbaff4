"""Which features each tree of a generation may use (its subspace).

* challenger (Motl & Kordík 2019): the arriving feature is in every tree; each older feature joins with the
  probability that keeps the expected subspace size at ``k`` (``p_old = (k - 1) / (d - 1)``).
* baseline: every feature, the arriving one included, joins with that same probability; at least one per tree.
* offline: every feature with probability ``k / d``; at least one per tree.

Old features join either uniformly (the paper) or in proportion to their usefulness in the current forest (after
Xu et al. 2012's feature-weighted subspaces), which keeps informative features in the trees when a wide stream
caps the subspace at a small fraction of the features.
"""

from __future__ import annotations

import math

import numpy as np

from streamforest.inputs import is_int

#: Share of the subspace budget spread uniformly when sampling by importance, so that every feature keeps a chance.
EXPLORATION = 0.25
#: A stream is *narrow* while trees would see fewer features than this on average (up to 9 features at the default
#: 2/3) and its subspaces are not capped: every tree then takes every feature and each split draws its share of them,
#: as in Breiman's forests, instead of per-tree subspaces that leave each tree without a third of a few features (a
#: label made by several features together, as monks-problems-2's six, is then out of most trees' reach). With
#: ``trees_per_generation="auto"``, on the paper's datasets (``python -m scenarios.low_dimensional``), 6.5 against
#: 2.5 (narrow up to 3 features): on every dataset, seeds 2101-2103, mean test AUC 0.8507 and 0.8508 (scikit-learn's
#: forest 0.8481), ours at least as good on 64.1% and 58.6% of the 237, worst difference -0.0909 and -0.1311; on the
#: 141 datasets of 5-12 features and at most 5,000 rows (``--seed-from 11000|11100|11200 --seeds 2``) 0.8553 /
#: 0.8550, 0.8493 / 0.8477, 0.8471 / 0.8445, ours >= on 58.9% / 56.0%, 63.1% / 55.3%, 66.0% / 56.0%; on those of at
#: most 4 features (``--max-d 4 --seed-from 11000|11100|11200 --seeds 4``) 0.8332 / 0.8321, 0.8301 / 0.8300,
#: 0.8222 / 0.8217, ours >= on 70.6% / 67.6%, 69.1% / 70.6%, 66.2% / 63.2%. Narrow through 13 features (9.0) was
#: lower on the datasets of 10-12 on all three blocks (0.8741 / 0.8768, 0.8740 / 0.8755, 0.8711 / 0.8740).
NARROW_SUBSPACE = 6.5


def subspace_size(n_features: int, max_features: float | int, max_subspace: int | None) -> float:
    """Expected number of features per tree: a share of ``n_features`` (float) or a count (int), capped."""
    if is_int(max_features):
        k = float(min(max_features, n_features))
    else:
        k = float(max_features) * n_features
    if max_subspace is not None:
        k = min(k, float(max_subspace))
    return max(1.0, min(k, float(n_features)))


def is_capped(n_features: int, max_features: float | int, max_subspace: int | None) -> bool:
    """Whether the subspace cap binds (the stream is wider than ``max_subspace`` can follow uniformly)."""
    if max_subspace is None:
        return False
    uncapped = subspace_size(n_features, max_features, None)
    return math.ceil(uncapped) > max_subspace


def is_narrow(n_features: int, max_features: float | int, max_subspace: int | None) -> bool:
    """Whether a tree's expected subspace holds fewer than :data:`NARROW_SUBSPACE` features, uncapped (a capped
    stream is a wide one, whatever its cap).

    Examples
    --------
    >>> [is_narrow(d, 2 / 3, 64) for d in (1, 9, 10)], is_narrow(5, 2 / 3, 3)
    ([True, True, False], False)
    """
    return (subspace_size(n_features, max_features, max_subspace) < NARROW_SUBSPACE
            and not is_capped(n_features, max_features, max_subspace))


def narrow_split_size(n_features: int, max_features: float | int, max_subspace: int | None) -> int:
    """Features drawn at each split of a narrow stream's trees: the expected subspace size rounded down, as
    scikit-learn's ``max_features`` (0, the whole tree subspace, when that is every feature)."""
    k = max(1, int(subspace_size(n_features, max_features, max_subspace)))
    return 0 if k >= n_features else k


#: How much a narrow stream's generation grown on a feature's arrival outweighs the newest before it: its trees are
#: the only ones that see the arriving feature with every other, so it takes about 90% of the weight. On the paper's
#: datasets of at most 4 features (``python -m scenarios.low_dimensional --max-d 4``, 8 seeds), this rather than the
#: bookkeeping's growth (:func:`narrow_log_growth`, 3-fold at 2/3) raised the mean test AUC by 0.003 on the held-out
#: half and lowered it by 0.0005 on the tuning half.
NARROW_ARRIVAL_GROWTH = 10.0


def narrow_log_growth(n_features: int, k: float) -> float:
    """Log of how much a narrow stream's generation outweighs the newest before it: ``1 / (1 - k / d)``, the growth
    of the bookkeeping weights on a wide stream whose trees see ``k`` of the ``d`` features (at most 10-fold).

    Examples
    --------
    >>> round(math.exp(narrow_log_growth(3, 2.0)), 6)
    3.0
    """
    return -math.log(1.0 - min(k / n_features, 0.9))


def fill_probabilities(scores: np.ndarray, budget: float) -> np.ndarray:
    """Inclusion probabilities proportional to ``scores`` that sum to ``budget``, none above 1 (water filling).

    Examples
    --------
    >>> fill_probabilities(np.array([8.0, 1.0, 1.0]), 2.0).round(3).tolist()
    [1.0, 0.5, 0.5]
    """
    scores = np.asarray(scores, dtype=np.float64)
    p = np.zeros_like(scores)
    if scores.size == 0 or budget <= 0:
        return p
    if budget >= scores.size:
        return np.ones_like(scores)
    free = np.ones(scores.size, dtype=bool)
    left = float(budget)
    for _ in range(scores.size):
        total = scores[free].sum()
        if total <= 0:
            p[free] = left / free.sum()
            break
        trial = left * scores / total
        over = free & (trial >= 1.0)
        if not over.any():
            p[free] = trial[free]
            break
        p[over] = 1.0
        free &= ~over
        left = budget - p[~free].sum()
        if left <= 0 or not free.any():
            break
    return np.clip(p, 0.0, 1.0)


def old_feature_probabilities(
    n_features: int, k: float, importances: np.ndarray | None
) -> np.ndarray:
    """Per old feature (all but the newest), the probability of joining a challenger tree."""
    n_old = n_features - 1
    if n_old <= 0:
        return np.zeros(0)
    budget = max(0.0, k - 1.0)
    if importances is None:
        return np.full(n_old, min(1.0, budget / n_old))
    imp = np.asarray(importances[:n_old], dtype=np.float64)
    total = imp.sum()
    scores = np.full(n_old, 1.0 / n_old)
    if total > 0:
        scores = (1.0 - EXPLORATION) * imp / total + EXPLORATION * scores
    return fill_probabilities(scores, budget)


def challenger(rng: np.random.Generator, n_trees: int, p_old: np.ndarray) -> np.ndarray:
    """Boolean masks ``(n_trees, d)``: the last (arriving) feature always, older ones with ``p_old``."""
    n_old = p_old.size
    masks = np.ones((n_trees, n_old + 1), dtype=bool)
    if n_old:
        masks[:, :n_old] = rng.random((n_trees, n_old)) < p_old
    return masks


def uniform(rng: np.random.Generator, n_trees: int, n_features: int, p: float) -> np.ndarray:
    """Boolean masks ``(n_trees, d)``, each feature with probability ``p``, redrawn until no tree is empty."""
    masks = rng.random((n_trees, n_features)) < p
    empty = ~masks.any(axis=1)
    while empty.any():
        masks[empty] = rng.random((int(empty.sum()), n_features)) < p
        empty = ~masks.any(axis=1)
    return masks


def masks_to_subspaces(masks: np.ndarray) -> list[np.ndarray]:
    """Each row's features, ascending (one ``int64`` array per row): one ``nonzero`` over the whole mask, split by
    row (every growth takes them; one ``flatnonzero`` per tree cost four times as much)."""
    if not len(masks):
        return []
    features = np.nonzero(masks)[1].astype(np.int64)  # row by row, each row's in ascending order
    ends = np.cumsum(masks.sum(axis=1)).tolist()
    return [features[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]
