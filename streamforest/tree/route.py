"""Routing binned samples through packed trees, in numba, parallel over samples."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from streamforest.threads import SERIAL_BELOW, threads_for
from streamforest.tree.grow import class_slots, seeded_counts
from streamforest.tree.model import Trees
from streamforest.tree.walk import SAMPLE_BLOCK, goes_left, leaf_of


@njit(inline="always")
def _advance(trees, Xb, i, base, node) -> tuple:
    """One step of sample ``i``'s walk down the tree at ``base``: the child of ``node`` it goes to and True, or
    ``node`` itself and False at a leaf."""
    g = base + node
    if trees.left[g] < 0:
        return node, False
    return (trees.left[g] if goes_left(trees, g, Xb[trees.feature[g], i]) else trees.right[g]), True


@njit(inline="always")
def _add_leaf(trees, i, base, leaf, wt, out) -> None:
    for k in range(trees.value.shape[1]):
        out[i, k] += wt * trees.value[base + leaf, k]


@njit(inline="always")
def _weighted_row(trees, Xb, i, tree_w, out):
    # Four trees walked side by side: each step of a walk waits for the node it reads, and four walks keep four reads
    # in flight (one sample through the alive forest, a few hundred trees, is the River adapter's prediction). The
    # votes are still added tree by tree, in order: the same sums.
    n_trees = trees.offsets.shape[0] - 1
    t = 0
    while t + 4 <= n_trees:
        b0, b1, b2, b3 = trees.offsets[t], trees.offsets[t + 1], trees.offsets[t + 2], trees.offsets[t + 3]
        n0 = n1 = n2 = n3 = 0
        while True:
            n0, m0 = _advance(trees, Xb, i, b0, n0)
            n1, m1 = _advance(trees, Xb, i, b1, n1)
            n2, m2 = _advance(trees, Xb, i, b2, n2)
            n3, m3 = _advance(trees, Xb, i, b3, n3)
            if not (m0 or m1 or m2 or m3):
                break
        _add_leaf(trees, i, b0, n0, tree_w[t], out)
        _add_leaf(trees, i, b1, n1, tree_w[t + 1], out)
        _add_leaf(trees, i, b2, n2, tree_w[t + 2], out)
        _add_leaf(trees, i, b3, n3, tree_w[t + 3], out)
        t += 4
    for u in range(t, n_trees):
        base = trees.offsets[u]
        _add_leaf(trees, i, base, leaf_of(trees, Xb, i, base), tree_w[u], out)


@njit(parallel=True, cache=True)
def _weighted_values(trees, Xb, m, tree_w, out):
    # Blocks of samples, each taken through one tree at a time (see SAMPLE_BLOCK): a forest of large trees (leaves
    # of one sample on 100,000 rows: a megabyte a tree) is then read once per block, not once per sample. Every
    # sample still adds its trees in tree order: the same sums to the bit.
    n_blocks = (m + SAMPLE_BLOCK - 1) // SAMPLE_BLOCK
    for blk in prange(n_blocks):
        end = min(m, (blk + 1) * SAMPLE_BLOCK)
        for t in range(trees.offsets.shape[0] - 1):
            base = trees.offsets[t]
            wt = tree_w[t]
            for i in range(blk * SAMPLE_BLOCK, end):
                leaf = leaf_of(trees, Xb, i, base)
                for k in range(trees.value.shape[1]):
                    out[i, k] += wt * trees.value[base + leaf, k]


# Without reference counting (_nrt=False; it allocates nothing, its caller holds every array): each step of the
# side-by-side walks takes the tuple of the trees' arrays, and numba would count a reference to each of them,
# atomically, at every step.
@njit(cache=True, _nrt=False)
def _weighted_values_serial(trees, Xb, m, tree_w, out):
    for i in range(m):
        _weighted_row(trees, Xb, i, tree_w, out)


@njit(inline="always")
def _leaves_row(trees, Xb, i, out):
    for t in range(trees.offsets.shape[0] - 1):
        out[i, t] = leaf_of(trees, Xb, i, trees.offsets[t])


@njit(parallel=True, cache=True)
def _leaves(trees, Xb, m, out):
    for i in prange(m):
        _leaves_row(trees, Xb, i, out)


@njit(cache=True)
def _leaves_serial(trees, Xb, m, out):
    for i in range(m):
        _leaves_row(trees, Xb, i, out)


def _run(serial: Any, parallel: Any, trees: Trees, Xb: np.ndarray, n_samples: int, *args: Any) -> None:
    """The serial kernel for a small batch, which sets no thread count (a few microseconds per call, per sample for
    the River adapter), else the parallel one with the threads the work calls for."""
    if n_samples < SERIAL_BELOW:
        serial(trees, Xb, n_samples, *args)
        return
    with threads_for(n_samples, trees.n_trees):
        parallel(trees, Xb, n_samples, *args)


def weighted_values(trees: Trees, Xb: np.ndarray, n_samples: int, tree_weights: np.ndarray,
                    out: np.ndarray | None = None) -> np.ndarray:
    """``sum_t tree_weights[t] * leaf_value_t(x)`` for every sample: shape ``(n_samples, n_outputs)``.

    Given ``out``, the trees' votes are added to it: batches routed one after the other into one ``out`` give the
    sums of their concatenation to the bit (every sample adds its trees in order).
    """
    if out is None:
        out = np.zeros((n_samples, trees.value.shape[1]), dtype=np.float64)
    _run(_weighted_values_serial, _weighted_values, trees, Xb, n_samples,
         np.ascontiguousarray(tree_weights, dtype=np.float64), out)
    return out


def leaves(trees: Trees, Xb: np.ndarray, n_samples: int) -> np.ndarray:
    """The leaf (local node index) each sample reaches in each tree: shape ``(n_samples, n_trees)``, int32."""
    out = np.empty((n_samples, trees.n_trees), dtype=np.int32)
    _run(_leaves_serial, _leaves, trees, Xb, n_samples, out)
    return out


@njit(parallel=True, cache=True)
def _inbag(n, y_cls, n_classes, stratified, draws, seeds, out):
    classes = class_slots(y_cls, n if stratified else 0, n_classes)
    for t in prange(seeds.shape[0]):
        counts = seeded_counts(n, classes, stratified, draws, seeds[t])
        for i in range(n):
            out[t, i] = counts[i] > 0


@njit(parallel=True, cache=True)
def _oob_leaves(trees, Xb, n, inbag, leaves):
    # Blocks of samples, each taken through one tree at a time (see SAMPLE_BLOCK).
    n_blocks = (n + SAMPLE_BLOCK - 1) // SAMPLE_BLOCK
    for blk in prange(n_blocks):
        for t in range(trees.offsets.shape[0] - 1):
            base = trees.offsets[t]
            for i in range(blk * SAMPLE_BLOCK, min(n, (blk + 1) * SAMPLE_BLOCK)):
                leaves[t, i] = -1 if inbag[t, i] else leaf_of(trees, Xb, i, base)


@njit(parallel=True, cache=True)
def _oob_votes(trees, leaves, out, count):
    n = leaves.shape[1]
    n_out = trees.value.shape[1]
    n_blocks = (n + SAMPLE_BLOCK - 1) // SAMPLE_BLOCK
    for blk in prange(n_blocks):
        for i in range(blk * SAMPLE_BLOCK, min(n, (blk + 1) * SAMPLE_BLOCK)):
            # A sample's votes summed over the trees in tree order, in registers for one or two outputs (regression,
            # binary): summing in place loads and stores the sum at each tree's vote, twice as slow. Every tree
            # adds, an in-bag one (leaf -1) zeros: a tree leaves about a third of the samples out, at random, and a
            # branch on it is mispredicted that often; adding 0.0 leaves a sum as it is.
            c = count[i]
            s0 = out[i, 0]
            s1 = out[i, n_out - 1]  # one output: the same sum as s0
            for t in range(leaves.shape[0]):
                leaf = leaves[t, i]
                keep = np.float64(leaf >= 0)
                row = trees.offsets[t] + max(leaf, 0)
                c += keep
                if n_out <= 2:
                    s0 += trees.value[row, 0] * keep
                    s1 += trees.value[row, n_out - 1] * keep
                else:
                    for k in range(n_out):
                        out[i, k] += trees.value[row, k] * keep
            count[i] = c
            if n_out <= 2:
                out[i, 0] = s0
                out[i, n_out - 1] = s1


@njit(parallel=True, cache=True)
def _oob_squares(trees, leaves, out):
    n = leaves.shape[1]
    n_blocks = (n + SAMPLE_BLOCK - 1) // SAMPLE_BLOCK
    for blk in prange(n_blocks):
        for i in range(blk * SAMPLE_BLOCK, min(n, (blk + 1) * SAMPLE_BLOCK)):
            s = 0.0
            for t in range(leaves.shape[0]):
                leaf = leaves[t, i]
                if leaf >= 0:
                    row = trees.offsets[t] + leaf
                    for k in range(trees.value.shape[1]):
                        s += trees.value[row, k] * trees.value[row, k]
            out[i] = s


def out_of_bag_leaves(
    trees: Trees, Xb: np.ndarray, n_samples: int, y_cls: np.ndarray, n_classes: int, seeds: np.ndarray,
    draws: int = 0,
) -> np.ndarray:
    """Per tree and training sample, the leaf the sample reaches if the tree left it out of bag, else -1: shape
    ``(n_trees, n_samples)``, int32.

    The in-bag draws (``draws`` per tree, 0: ``n_samples``, as the trees were grown) are regenerated from the
    trees' seeds (the same draws they were grown on), so nothing per tree and sample has to be stored.
    """
    inbag = np.empty((len(seeds), n_samples), dtype=np.bool_)
    leaves = np.empty((len(seeds), n_samples), dtype=np.int32)
    with threads_for(n_samples, len(seeds)):
        _inbag(n_samples, y_cls, max(n_classes, 1), n_classes > 0, int(draws), seeds.astype(np.uint64), inbag)
        _oob_leaves(trees, Xb, n_samples, inbag, leaves)
    return leaves


def out_of_bag_votes(trees: Trees, leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per training sample, the sum of leaf values over the trees it was out of bag for, and how many trees, from
    :func:`out_of_bag_leaves` (a tree's votes are added in tree order, whatever trees the batch was taken from)."""
    n_samples = leaves.shape[1]
    out = np.zeros((n_samples, trees.value.shape[1]), dtype=np.float64)
    count = np.zeros(n_samples, dtype=np.float64)
    with threads_for(n_samples, leaves.shape[0]):
        _oob_votes(trees, leaves, out, count)
    return out, count


def out_of_bag_squares(trees: Trees, leaves: np.ndarray) -> np.ndarray:
    """Per training sample, the sum of its squared leaf values (over the outputs) over the trees it was out of bag
    for, from :func:`out_of_bag_leaves`: with :func:`out_of_bag_votes`, the spread of its votes."""
    out = np.zeros(leaves.shape[1], dtype=np.float64)
    with threads_for(leaves.shape[1], leaves.shape[0]):
        _oob_squares(trees, leaves, out)
    return out
