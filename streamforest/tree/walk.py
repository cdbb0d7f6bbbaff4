"""Walking one sample down a tree: the rule a split applies to a bin, shared by routing, encoding and growth.

``trees`` is any named tuple with the flat node arrays of :class:`~streamforest.tree.model.Trees` (``feature``,
``threshold``, ``missing_left``, ``nominal``, ``cat_row``, ``cats``, ``left``, ``right``); node ``base + i`` is node
``i`` of the tree that starts at ``base``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamforest.binning import MISSING_BIN

#: Samples taken through a batch of trees together, tree by tree: a tree reads a few feature rows, and consecutive
#: samples of a row share cache lines, where sample by sample through every tree of a wide stream would miss.
SAMPLE_BLOCK = 256


@njit(inline="always")
def goes_left(trees, g, b) -> bool:
    """Whether bin ``b`` goes left at node ``g`` (a global node index)."""
    if b == MISSING_BIN:
        return trees.missing_left[g] == 1
    if trees.nominal[g] == 1:
        row = trees.cat_row[g]
        if row < 0:  # no category words: none goes left
            return False
        return ((trees.cats[row, b >> 6] >> np.uint64(b & 63)) & np.uint64(1)) == np.uint64(1)
    return b <= trees.threshold[g]


@njit(inline="always")
def leaf_of(trees, Xb, i, base) -> int:
    """The leaf (local index) sample ``i`` reaches in the tree whose nodes start at ``base``."""
    node = 0
    while trees.left[base + node] >= 0:
        g = base + node
        if goes_left(trees, g, Xb[trees.feature[g], i]):
            node = trees.left[g]
        else:
            node = trees.right[g]
    return node
