"""Generations: the trees grown when one feature arrived, sharing one weight; packed, merged and remembered.

A :class:`Generation` is a batch of flat trees with, per tree, its subspace, seed, per-split feature count and leaf
size, so that it can be regrown identically on more samples. :func:`pack` and :func:`alive` lay the alive
generations end to end for routing; :func:`merge` folds the two oldest into one when the budget of alive
generations is exceeded; :class:`Graveyard` keeps removed generations for a while, so that encodings can be patched
by a delta.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from streamforest.bookkeeping import shares
from streamforest.tree.model import Trees, concat

#: How many model versions back an encoding delta can reach.
DELTA_WINDOW = 16


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
    # And each tree's least (bootstrap-weighted) samples in a leaf, fixed at birth for the same reason
    # (min_samples_leaf="auto" depends on the stream's width then).
    min_leaf: np.ndarray | None = None
    # The out-of-bag leaf of every tree and current sample (-1: in bag), kept (within a memory budget, see
    # :mod:`streamforest.oob`) so that pruning it, or merging it into a generation made of some of its trees, does
    # not route the samples through its trees again.
    oob_leaves: np.ndarray | None = field(default=None, repr=False)
    # And their sums per sample (votes, counts), so that pruning or merging it away adds nothing up again.
    oob_votes: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _importance: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.split_ks is None:
            self.split_ks = np.zeros(self.trees.n_trees, dtype=np.int64)

    def __deepcopy__(self, memo: dict) -> Generation:
        """A copy sharing the arrays: trees, subspaces, seeds and cached out-of-bag leaves are never changed in
        place (regrowing or dropping them replaces them), so only the containers and scalars are the copy's own. This
        makes copying a forest (the engine's validate-then-apply copies it before every change) a memcpy of its few
        mutable arrays, not one copy per tree array."""
        return dataclasses.replace(self, forced=list(self.forced), subspaces=list(self.subspaces))

    @property
    def n_trees(self) -> int:
        return self.trees.n_trees

    def regrown(self, trees: Trees, born: int) -> None:
        """Replace the trees by the same trees grown on other samples."""
        self.trees = trees
        self._importance = None
        self.born = born

    def importance(self) -> np.ndarray:
        """Mean normalised impurity-decrease importance over the generation's trees, up to the last feature they
        split on (cached: trees never change in place; regrowing replaces them and clears the cache)."""
        if self._importance is None:
            self._importance = self.trees.importances(int(max(self.trees.feature.max(initial=-1) + 1, 1))).mean(0)
        return self._importance


def weight_shares(generations: list[Generation]) -> np.ndarray:
    """Each generation's share of the total weight."""
    return shares(np.array([g.log_weight for g in generations]))


def pack(generations: list[Generation]) -> tuple[Trees, np.ndarray]:
    """The trees of several generations as one batch, and their seeds."""
    return concat([g.trees for g in generations]), np.concatenate([g.seeds for g in generations]).astype(np.uint64)


def tree_weights(generations: list[Generation]) -> np.ndarray:
    """Each tree's weight in the packed batch: its generation's share split evenly over its trees (sums to 1)."""
    w = weight_shares(generations)
    return np.concatenate([np.full(g.n_trees, s / g.n_trees) for g, s in zip(generations, w, strict=True)])


class AliveTrees(NamedTuple):
    """The alive trees packed end to end for routing, each tree's weight (summing to 1) and each tree's seed."""

    trees: Trees
    weights: np.ndarray
    seeds: np.ndarray

    def __deepcopy__(self, memo: dict) -> AliveTrees:
        """Itself: packed trees are never changed in place (a change of the forest packs anew), so a copy of the
        forest (the engine's validate-then-apply) shares them rather than copying every alive tree."""
        return self


def alive(generations: list[Generation]) -> AliveTrees:
    """The trees of the alive ``generations`` packed for routing, with their weights and seeds."""
    trees, seeds = pack(generations)
    return AliveTrees(trees, tree_weights(generations), seeds)


def importance(generations: list[Generation], n_features: int) -> np.ndarray:
    """Share-weighted importances of the generations (per-generation vectors are cached, so this stays cheap
    when thousands of features have arrived)."""
    out = np.zeros(n_features)
    if not generations:
        return out
    # Added in place, generation by generation: the same sums as adding zero-padded vectors, without allocating
    # one vector per generation (thousands of features, dozens of generations, every arrival).
    for g, s in zip(generations, weight_shares(generations), strict=True):
        own = g.importance()
        k = min(n_features, own.size)
        out[:k] += s * own[:k]
    return out


def feature_importance(generations: list[Generation], feature: int) -> float:
    """``importance(generations, n)[feature]``, the same sum, without the other features'."""
    out = 0.0
    for g, s in zip(generations, weight_shares(generations), strict=True):
        own = g.importance()
        if feature < own.size:
            out += s * own[feature]
    return float(out)


def merge(a: Generation, b: Generation, n_trees: int, born: int) -> Generation:
    """One generation for two: ``n_trees`` trees drawn from each in proportion to its weight, with the sum of their
    weights, so that each tree stands for the same weight as before in expectation (the bookkeeping holds)."""
    la, lb = a.log_weight, b.log_weight
    total = float(np.logaddexp(la, lb))
    n_a = min(round(n_trees * math.exp(la - total)), a.n_trees)
    n_b = min(n_trees - n_a, b.n_trees)
    return Generation(
        id=a.id, forced=a.forced + b.forced, log_weight=total,
        trees=concat([a.trees.take(np.arange(n_a)), b.trees.take(np.arange(n_b))]),
        subspaces=a.subspaces[:n_a] + b.subspaces[:n_b],
        seeds=np.concatenate([a.seeds[:n_a], b.seeds[:n_b]]), born=born,
        split_ks=np.concatenate([a.split_ks[:n_a], b.split_ks[:n_b]]),
        min_leaf=np.concatenate([a.min_leaf[:n_a], b.min_leaf[:n_b]]),
        in_oob=a.in_oob and b.in_oob,
        oob_leaves=None if a.oob_leaves is None or b.oob_leaves is None else np.concatenate(
            [a.oob_leaves[:n_a], b.oob_leaves[:n_b]]),
    )


class Graveyard:
    """Generations removed within the last :data:`DELTA_WINDOW` model versions, with the version they died in.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> a, b = SimpleNamespace(id="a", born=1), SimpleNamespace(id="b", born=2)
    >>> g = Graveyard()
    >>> g.bury(a, died=3); g.bury(b, died=5)
    >>> [x.id for x in g.removed_since(2)], [x.id for x in g.removed_since(4)]
    (['a', 'b'], ['b'])
    >>> g.forget_before(5 + DELTA_WINDOW); g.removed_since(2)
    []
    """

    def __init__(self) -> None:
        self.entries: list[tuple[int, Generation]] = []

    def bury(self, gen: Generation, died: int) -> None:
        self.entries = [(v, g) for v, g in self.entries if v > died - DELTA_WINDOW] + [(died, gen)]

    def forget_before(self, version: int) -> None:
        """Drop what died more than :data:`DELTA_WINDOW` versions before ``version``."""
        self.entries = [(v, g) for v, g in self.entries if v > version - DELTA_WINDOW]

    def clear(self) -> None:
        self.entries = []

    def removed_since(self, since: int) -> list[Generation]:
        """Generations alive at version ``since`` and removed after it."""
        return [g for died, g in self.entries if died > since and g.born <= since]
