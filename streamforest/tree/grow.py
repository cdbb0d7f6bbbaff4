"""Histogram CART in numba: grow many trees on binned columns, in parallel over trees.

Columns are stored feature-major (``columns[feature, sample]``, ``uint8``, bin ``MISSING_BIN`` = missing). A tree
sees a subset of the features (its subspace). It is grown depth first from a bootstrap sample: at each node the
candidate features' histograms are scanned for the best split (:mod:`streamforest.tree.split`, the criterion), and
the node's samples are partitioned in place to its children. Large nodes keep whole histograms, so that a child's
is its parent's minus its sibling's.

Output arrays follow scikit-learn's flat ``tree_`` layout, one row per tree, ``cap`` nodes per row.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from streamforest.binning import BIN_WORDS, MISSING_BIN, N_BINS
from streamforest.rng import next_below
from streamforest.tree.split import (
    NodeBins,
    ScanScratch,
    Split,
    best_split,
    copy_all,
    fill_dense,
    fill_dense_pair,
    midpoint_bin,
    set_all,
    set_all_2d,
    weight,
)

LEAF = -1

#: Nodes with at least this many in-bag samples keep whole histograms, so that a child's can be the parent's minus
#: its sibling's (below it, building a histogram costs less than subtracting ``N_BINS`` bins).
SUBTRACT_FROM = 512
#: Memory for one tree's stored histograms (they live only while their node or its pending children need them).
HIST_POOL_BYTES = 32 * 2**20
#: Nodes with at least this many in-bag samples fill a feature's histogram without tracking which bins they touch,
#: and scan all of them: most bins are touched anyway, and tracking them (a read-modify-write of a bitmap word per
#: sample) costs more than the scan; in smaller nodes (128 samples, say) the tracking is the cheaper.
DENSE_FROM = 256


#: :attr:`TrainingSet.bin_values` when thresholds stay at bin edges (nothing to read).
NO_BIN_VALUES = np.zeros((0, 3, N_BINS))


class TrainingSet(NamedTuple):
    """The samples trees grow on: feature-major bins (a buffer whose first ``n_samples`` columns are the samples),
    class codes or regression targets, ``n_classes`` (0 for regression), which features are nominal, and the
    numeric bins' edges and values (:meth:`~streamforest.inputs.FeatureColumns.bin_values`; read only under
    :attr:`TreeSettings.midpoint`)."""

    columns: np.ndarray
    n_samples: int
    y_cls: np.ndarray
    y_reg: np.ndarray
    n_classes: int
    is_nominal: np.ndarray
    bin_values: np.ndarray = NO_BIN_VALUES
    draws: int = 0


class TreeSettings(NamedTuple):
    """The parameters that are the same for every tree of a batch: the depth bound (None: unbounded), the least
    weight of a category placed on its own (lighter ones join the missing values' side), whether trees grow on a
    bootstrap sample, the node size from which histograms are filled untracked (:data:`DENSE_FROM`: a speed
    setting that never changes the trees), and whether a numeric split's threshold is placed midway by value
    between the node's samples on either side (:func:`~streamforest.tree.split.midpoint_bin`), else at the upper
    edge of the last bin on the left."""

    max_depth: int | None
    min_category_size: float
    bootstrap: bool = True
    dense_from: int = DENSE_FROM
    midpoint: bool = False


class TreePlans(NamedTuple):
    """Per tree: its subspace (feature ids, padded with -1), the subspace's size, its seed, how many of its
    features a split draws (0: all) and the least (bootstrap-weighted) samples in its leaves."""

    subspaces: np.ndarray
    sizes: np.ndarray
    seeds: np.ndarray
    split_ks: np.ndarray
    min_leaf: np.ndarray


class GrownNodes(NamedTuple):
    """The grown trees, one row of ``cap`` nodes per tree (the flat layout of :class:`~streamforest.tree.model.Trees`
    before the rows are packed end to end), and each tree's node count."""

    feature: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    nominal: np.ndarray
    cats: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    gain: np.ndarray
    weight: np.ndarray
    n_nodes: np.ndarray
    oob_leaf: np.ndarray  # (n_trees, n) int32: each sample's leaf in a tree that left it out of bag, else -1;
    # shape (0, 0) when not wanted


class Samples(NamedTuple):
    """A tree's in-bag samples, each node's a contiguous run: sample index, draw count (its weight), class code and
    weighted target side by side, so that the histogram loops read them in order and gather only the bins."""

    idx: np.ndarray
    w: np.ndarray
    cls: np.ndarray
    wy: np.ndarray


class TreeWork(NamedTuple):
    """What growing one tree reads and writes besides its output: its plan (subspace, split draw, leaf size), the
    task, its samples (and a spare set for partitions), and the work arrays of a node's split (:class:`NodeBins`,
    :class:`ScanScratch`, the node's statistics, its candidate features' slots and a nominal split's categories)."""

    feats: np.ndarray
    n_feats: int
    split_k: int
    min_leaf: float
    is_reg: bool
    state: np.ndarray
    samples: Samples
    spare: Samples
    bins: NodeBins
    scan: ScanScratch
    parent: np.ndarray
    cand: np.ndarray
    cats: np.ndarray


class Pending(NamedTuple):
    """The stack of nodes waiting to be grown: id, sample run ``[start, end)``, depth, the stored histograms they
    inherit (-1: none), their statistics (summed by the parent's partition, in the order of the run) and their run
    of out-of-bag samples ``[oob_start, oob_end)``."""

    node: np.ndarray
    start: np.ndarray
    end: np.ndarray
    depth: np.ndarray
    buf: np.ndarray
    stats: np.ndarray
    oob_start: np.ndarray
    oob_end: np.ndarray


class HistPool(NamedTuple):
    """A tree's stored histograms: ``arrays[buf]`` for ``buf`` in ``free[:n_free[0]]`` are unused; the last one is
    the scratch of a sibling too small to keep its own."""

    arrays: np.ndarray
    free: np.ndarray
    n_free: np.ndarray


@njit(cache=True)
def _build_histograms(H, Xb, feats, n_feats, samples, start, end, is_reg):
    """Histograms of a node's samples over every feature of the subspace (the last bin: missing)."""
    for j in range(n_feats):
        set_all_2d(H[j], 0.0)
    # Two features per pass over the samples: their index, class and weight are read once for both (each bin still
    # adds its samples in the same order, so the sums are those of one feature at a time).
    for j in range(0, n_feats - 1, 2):
        fill_dense_pair(Xb, feats[j], feats[j + 1], samples, start, end, is_reg, H[j], H[j + 1])
    if n_feats % 2 == 1:
        fill_dense(Xb, feats[n_feats - 1], samples, start, end, is_reg, H[n_feats - 1])


@njit(cache=True)
def class_slots(y_cls: np.ndarray, n: int, n_classes: int) -> tuple:
    """Where each sample sits among the samples of its class, the classes side by side in code order: ``(starts,
    slot)``, class ``c``'s slots ``starts[c]:starts[c + 1]`` in sample order. The same for every tree of a batch."""
    starts = np.zeros(n_classes + 1, dtype=np.int64)
    for i in range(n):
        starts[y_cls[i] + 1] += 1
    for c in range(n_classes):
        starts[c + 1] += starts[c]
    fill = starts[:-1].copy()
    slot = np.empty(n, dtype=np.int64)
    for i in range(n):
        c = y_cls[i]
        slot[i] = fill[c]
        fill[c] += 1
    return starts, slot


@njit(cache=True)
def _bootstrap_counts(n: int, starts: np.ndarray, slot: np.ndarray, stratified: bool, draws: int,
                      state: np.ndarray) -> np.ndarray:
    """Bootstrap draw counts; stratified by class (``starts``, ``slot``: :func:`class_slots`) so that every class
    keeps its share in every tree."""
    if draws <= 0 or draws > n:
        draws = n
    # Draws are counted in int32 by slot (a class's members side by side) and then gathered to the samples: the
    # random increments then land in an array half the size of the float64 counts, which stays in cache at 200,000
    # samples (3x faster there than incrementing the counts at the drawn samples).
    hits = np.zeros(n, dtype=np.int32)
    counts = np.empty(n, dtype=np.float64)
    if not stratified:
        for _ in range(draws):
            hits[next_below(state, n)] += 1
        for i in range(n):
            counts[i] = hits[i]
        return counts
    for c in range(starts.shape[0] - 1):
        m = starts[c + 1] - starts[c]
        k = m if draws == n else max(min(m, 1), np.int64(np.round(m * draws / n)))
        for _ in range(k):
            hits[starts[c] + next_below(state, m)] += 1
    for i in range(n):
        counts[i] = hits[slot[i]]
    return counts


@njit(cache=True)
def bootstrap_counts(n: int, y_cls: np.ndarray, n_classes: int, stratified: bool, draws: int,
                     seed: np.uint64) -> np.ndarray:
    """The in-bag draw counts of the tree with this seed (recomputed on demand for out-of-bag scores): ``draws``
    draws with replacement among the ``n`` samples (0: ``n``), by class in proportion to its size when
    ``stratified`` (every class present keeps at least one draw)."""
    return seeded_counts(n, class_slots(y_cls, n if stratified else 0, n_classes), stratified, draws, seed)


@njit(cache=True)
def seeded_counts(n: int, classes: tuple, stratified: bool, draws: int, seed: np.uint64) -> np.ndarray:
    """:func:`bootstrap_counts` with the classes' slots (:func:`class_slots`) given: computed once for many trees."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = seed
    return _bootstrap_counts(n, classes[0], classes[1], stratified, draws, state)


@njit(inline="always")
def _in_bag(data, bootstrap, state, classes):
    """The in-bag samples, how many there are, and every sample's draw count (``classes``: :func:`class_slots`)."""
    n = data.n_samples
    is_reg = data.n_classes == 0
    if bootstrap:
        w = _bootstrap_counts(n, classes[0], classes[1], not is_reg, data.draws, state)
    else:
        w = np.ones(n, dtype=np.float64)
    # Index, draw count and class in 32 bits: every partition moves half the bytes (growth 2-3% faster at 50,000 and
    # 200,000 samples). Draw counts are small integers, exact in float32 and added to the float64 sums as before;
    # the weighted targets of regression stay float64.
    idx = np.empty(n, dtype=np.int32)
    iw = np.empty(n, dtype=np.float32)
    ic = np.zeros(n, dtype=np.int32)
    iwy = np.zeros(n, dtype=np.float64)
    m = np.int64(0)  # not the literal 0: numba would compile the growth kernels for Literal[int](0) as well
    # Every sample written at the next slot, kept (the slot advanced) if drawn: no branch to mispredict on a third
    # of the samples.
    for i in range(n):
        idx[m] = i
        iw[m] = w[i]
        if is_reg:
            iwy[m] = w[i] * data.y_reg[i]
        else:
            ic[m] = data.y_cls[i]
        m += np.int64(w[i] > 0)
    return Samples(idx, iw, ic, iwy), m, w


@njit(inline="always")
def _tree_work(data, settings, plans, t, classes):
    """Tree ``t``'s :class:`TreeWork`, its in-bag sample count and every sample's draw count."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = plans.seeds[t]
    n_feats = plans.sizes[t]
    is_reg = data.n_classes == 0
    n_stats = 2 if is_reg else data.n_classes
    samples, m, drawn = _in_bag(data, settings.bootstrap, state, classes)
    spare = Samples(np.empty(m, dtype=np.int32), np.empty(m, dtype=np.float32), np.empty(m, dtype=np.int32),
                    np.empty(m, dtype=np.float64))
    bins = NodeBins(np.zeros((N_BINS, n_stats), dtype=np.float64), np.zeros((N_BINS, n_stats), dtype=np.float64),
                    np.empty(N_BINS, dtype=np.int64), np.zeros(BIN_WORDS, dtype=np.uint64),
                    np.zeros(n_stats, dtype=np.float64))
    scan = ScanScratch(np.empty(N_BINS, dtype=np.float64), np.empty(N_BINS, dtype=np.int64),
                       np.empty(N_BINS, dtype=np.float64), np.empty(N_BINS, dtype=np.int64),
                       np.empty(N_BINS, dtype=np.int64),
                       np.zeros(n_stats, dtype=np.float64), np.zeros(n_stats, dtype=np.float64),
                       np.zeros(n_stats, dtype=np.float64))
    work = TreeWork(plans.subspaces[t], n_feats, plans.split_ks[t], plans.min_leaf[t], is_reg, state, samples, spare,
                    bins, scan, np.zeros(n_stats, dtype=np.float64), np.empty(n_feats, dtype=np.int64),
                    np.zeros(BIN_WORDS, dtype=np.uint64))
    return work, m, drawn


@njit(inline="always")
def _hist_pool(work, max_depth):
    """The tree's :class:`HistPool`: up to ``max_depth + 2`` stored histograms within :data:`HIST_POOL_BYTES`, none
    with per-split feature draws (subtraction needs every feature's histogram at every node)."""
    n_feats = work.n_feats
    n_stats = work.parent.shape[0]
    n_buf = 0
    if work.split_k <= 0 or work.split_k >= n_feats:
        n_buf = min(max_depth + 2, HIST_POOL_BYTES // (n_feats * N_BINS * n_stats * 8) - 1)
    n_buf = max(n_buf, 0)
    arrays = np.empty((n_buf + 1 if n_buf > 0 else 1, n_feats if n_buf > 0 else 1, N_BINS, n_stats),
                      dtype=np.float64)
    free = np.empty(max(n_buf, 1), dtype=np.int64)
    for q in range(n_buf):
        free[q] = n_buf - 1 - q
    n_free = np.empty(1, dtype=np.int64)
    n_free[0] = n_buf
    return HistPool(arrays, free, n_free)


@njit(inline="always")
def _take_buffer(pool) -> int:
    pool.n_free[0] -= 1
    return pool.free[pool.n_free[0]]


@njit(inline="always")
def _release(pool, buf) -> None:
    if buf >= 0:
        pool.free[pool.n_free[0]] = buf
        pool.n_free[0] += 1


@njit(inline="always")
def _sum_stats(work, start, end, stats) -> None:
    """The statistics of the samples ``[start, end)`` into ``stats``, in run order (the root's; a child's are summed
    by its parent's :func:`_partition`, in the same order)."""
    iw, ic, iwy = work.samples.w, work.samples.cls, work.samples.wy
    set_all(stats, 0.0)
    for ii in range(start, end):
        if work.is_reg:
            stats[0] += iw[ii]
            stats[1] += iwy[ii]
        else:
            stats[ic[ii]] += iw[ii]


@njit(inline="always")
def _make_node(out, t, node, work, stats) -> tuple:
    """Write node ``node`` as a leaf with its value and weight, every field of it (a split overwrites some); its
    statistics ``stats`` are copied to ``work.parent``. Returns the node's weight and whether it is pure."""
    parent = work.parent
    is_reg = work.is_reg
    n_stats = parent.shape[0]
    copy_all(parent, stats)
    W = weight(parent, is_reg)
    if is_reg:
        out.value[t, node, 0] = parent[1] / W if W > 0 else 0.0
    else:
        for k in range(n_stats):
            out.value[t, node, k] = parent[k] / W if W > 0 else 0.0
    out.weight[t, node] = W
    out.left[t, node] = LEAF
    out.right[t, node] = LEAF
    out.feature[t, node] = -1
    out.gain[t, node] = 0.0
    out.threshold[t, node] = 0
    out.missing_left[t, node] = 0
    out.nominal[t, node] = 0
    set_all(out.cats[t, node], np.uint64(0))
    pure = False
    if not is_reg:
        for k in range(n_stats):
            if parent[k] == W:
                pure = True
    return W, pure


@njit(inline="always")
def _draw_candidates(work) -> int:
    """Candidate features of a node in ``work.cand[:returned]``: the tree's subspace, or a random part of it."""
    cand, n_feats, split_k = work.cand, work.n_feats, work.split_k
    n_cand = n_feats
    for j in range(n_feats):
        cand[j] = j
    if split_k > 0 and split_k < n_feats:
        for j in range(split_k):
            r = j + next_below(work.state, n_feats - j)
            tmp = cand[j]
            cand[j] = cand[r]
            cand[r] = tmp
        n_cand = split_k
    return n_cand


@njit(inline="always")
def _record_split(out, t, node, f, split, cats) -> None:
    out.feature[t, node] = f
    out.threshold[t, node] = split.threshold if not split.nominal else 0
    out.missing_left[t, node] = 1 if split.missing_left else 0
    out.nominal[t, node] = 1 if split.nominal else 0
    copy_all(out.cats[t, node], cats)
    out.gain[t, node] = split.gain


@njit(inline="always")
def _goes_left(split, cats, b) -> int:
    """1 if bin ``b`` goes left at the split (its categories in ``cats`` when nominal), else 0."""
    if b == MISSING_BIN:
        go_left = split.missing_left
    elif split.nominal:
        go_left = ((cats[b >> 6] >> np.uint64(b & 63)) & np.uint64(1)) == np.uint64(1)
    else:
        go_left = b <= split.threshold
    return np.int64(go_left)


@njit(inline="always")
def _add_to_side(is_reg, w, c, wy, g, left_stats, right_stats) -> None:
    """A sample's statistics (weight ``w``, class ``c``, weighted target ``wy``) added to the left side's if ``g``
    is 1, else to the right's. Adding a zero leaves a sum as it is, so each side sums its own samples in order."""
    wl = w * g
    wr = w * (1 - g)
    if is_reg:
        left_stats[0] += wl
        right_stats[0] += wr
        left_stats[1] += wy * g
        right_stats[1] += wy * (1 - g)
    else:
        left_stats[c] += wl
        right_stats[c] += wr


@njit(inline="always")
def _side_stats(Xb, f, work, start, end, split, left_stats, right_stats) -> int:
    """The statistics of each side of the split, as :func:`_partition` sums them, without moving the samples (the
    children of a node at the depth bound are leaves): returns where the right ones would start."""
    idx, iw, ic, iwy = work.samples
    set_all(left_stats, 0.0)
    set_all(right_stats, 0.0)
    nl = start
    for ii in range(start, end):
        g = _goes_left(split, work.cats, Xb[f, idx[ii]])
        nl += g
        _add_to_side(work.is_reg, iw[ii], ic[ii], iwy[ii], g, left_stats, right_stats)
    return nl


@njit(inline="always")
def _partition(Xb, f, work, start, end, split, left_stats, right_stats) -> int:
    """Stable partition of the node's samples by the split: left samples first, in their original order; each
    side's statistics are summed into ``left_stats`` and ``right_stats`` in that order. Returns where the right ones
    start."""
    idx, iw, ic, iwy = work.samples
    tmp_i, tmp_w, tmp_c, tmp_wy = work.spare
    best_cats = work.cats
    is_reg = work.is_reg
    set_all(left_stats, 0.0)
    set_all(right_stats, 0.0)
    nl = start
    nr = 0
    # Written to both sides, kept by arithmetic: which side a sample takes is as good as random, and a mispredicted
    # branch per sample costs more than the stores. Weighted targets move for regression only: classification never
    # reads them.
    for ii in range(start, end):
        s = idx[ii]
        w = iw[ii]
        c = ic[ii]
        wy = iwy[ii] if is_reg else 0.0
        g = _goes_left(split, best_cats, Xb[f, s])
        idx[nl] = s
        iw[nl] = w
        ic[nl] = c
        tmp_i[nr] = s
        tmp_w[nr] = w
        tmp_c[nr] = c
        if is_reg:
            iwy[nl] = wy
            tmp_wy[nr] = wy
        nl += g
        nr += 1 - g
        _add_to_side(is_reg, w, c, wy, g, left_stats, right_stats)
    for q in range(nr):
        idx[nl + q] = tmp_i[q]
        iw[nl + q] = tmp_w[q]
        ic[nl + q] = tmp_c[q]
        if is_reg:
            iwy[nl + q] = tmp_wy[q]
    return nl


@njit(inline="always")
def _children_histograms(data, work, pool, buf, start, nl, end) -> tuple:
    """The stored histograms of a split node's children ``(left, right)``, -1 for none: the parent's pass to the
    larger child as the parent's minus the smaller child's (built directly, into a buffer of its own if it is large
    enough to keep one, else into the scratch buffer)."""
    if buf < 0:
        return -1, -1
    small_left = nl - start <= end - nl
    s_start, s_end = (start, nl) if small_left else (nl, end)
    if max(nl - start, end - nl) < SUBTRACT_FROM:
        _release(pool, buf)
        return -1, -1
    sbuf = pool.arrays.shape[0] - 1
    if s_end - s_start >= SUBTRACT_FROM and pool.n_free[0] > 0:
        sbuf = _take_buffer(pool)
    _build_histograms(pool.arrays[sbuf], data.columns, work.feats, work.n_feats, work.samples, s_start, s_end,
                      work.is_reg)
    parent, child = pool.arrays[buf], pool.arrays[sbuf]
    for j in range(parent.shape[0]):
        for b in range(parent.shape[1]):
            for k in range(parent.shape[2]):
                parent[j, b, k] -= child[j, b, k]
    kept = sbuf if sbuf != pool.arrays.shape[0] - 1 else -1
    return (kept, buf) if small_left else (buf, kept)


@njit(inline="always")
def _push(stack, sp, node, start, end, depth, buf, oob_start, oob_end) -> int:
    """Push a node (its statistics are written to ``stack.stats[sp]`` by the caller) and return the new top."""
    stack.node[sp] = node
    stack.start[sp] = start
    stack.end[sp] = end
    stack.depth[sp] = depth
    stack.buf[sp] = buf
    stack.oob_start[sp] = oob_start
    stack.oob_end[sp] = oob_end
    return sp + 1


@njit(inline="always")
def _out_of_bag_samples(out, t, data, drawn, wanted):
    """The samples tree ``t`` leaves out, in order (none when their leaves are not ``wanted``), and a spare array
    for their partitions; ``out.oob_leaf[t]`` is set to -1 (a leaf overwrites its out-of-bag samples' entries)."""
    n = data.n_samples if wanted else 0
    oob = np.empty(n, dtype=np.int32)
    n_oob = 0
    for i in range(n):
        out.oob_leaf[t, i] = -1
        oob[n_oob] = i
        n_oob += np.int64(drawn[i] == 0)
    return oob[:n_oob], np.empty(n_oob, dtype=np.int32)


@njit(inline="always")
def _out_of_bag_to_leaves(out, t, Xb, f, split, cats, oob, start, end, left) -> None:
    """A node's out-of-bag samples written to its children, leaves ``left`` and ``left + 1``."""
    for q in range(start, end):
        s = oob[q]
        out.oob_leaf[t, s] = left + 1 - _goes_left(split, cats, Xb[f, s])


@njit(inline="always")
def _partition_out_of_bag(Xb, f, split, cats, oob, spare, start, end) -> int:
    """Stable partition of a node's out-of-bag samples by its split, as :func:`_partition` does the in-bag ones
    (each out-of-bag sample thus reaches the leaf that routing it would reach). Returns where the right ones start."""
    nl = start
    nr = 0
    for q in range(start, end):
        s = oob[q]
        g = _goes_left(split, cats, Xb[f, s])
        oob[nl] = s
        spare[nr] = s
        nl += g
        nr += 1 - g
    for q in range(nr):
        oob[nl + q] = spare[q]
    return nl


@njit(cache=True)
def _grow_one(data, settings, plans, t, out, classes):
    """Grow tree ``t`` depth first; returns its node count. Everything the tree needs is allocated here; its nodes
    are grown by :func:`_grow_nodes`."""
    cap = out.left.shape[1]
    work, m, drawn = _tree_work(data, settings, plans, t, classes)
    # The samples left out go down the tree with the in-bag ones, partitioned at each split: their leaves are known
    # when the tree is, for the out-of-bag votes.
    oob, oob_spare = _out_of_bag_samples(out, t, data, drawn, out.oob_leaf.shape[0] > 0)
    pool = _hist_pool(work, settings.max_depth)
    stack = Pending(np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64),
                    np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64),
                    np.empty((cap, work.parent.shape[0]), dtype=np.float64), np.empty(cap, dtype=np.int64),
                    np.empty(cap, dtype=np.int64))
    return _grow_nodes(data, settings, work, m, oob, oob_spare, pool, stack, t, out)


# Every step of a node is inlined into this one function (inline="always"), as one hand-written loop would be:
# compiled as separate calls, the steps of a node cost 4-18% more on deep trees and nominal features (one thread).
# It allocates nothing, and is compiled without reference counting (_nrt=False; numba refuses to compile an
# allocation there): every array it reads is held by _grow_one for the whole call. With reference counting, each
# tuple of arrays a step takes (the tree's work arrays, the output, the stack) was incremented and decremented
# array by array, atomically, at every node: more than half the time of growing a generation of 30 trees on a
# window of 2,000 River samples.
@njit(cache=True, _nrt=False)
def _grow_nodes(data, settings, work, m, oob, oob_spare, pool, stack, t, out):
    """Grow tree ``t``'s nodes depth first from its ``m`` in-bag samples (``work.samples``) and its out-of-bag
    ones (``oob``); returns its node count."""
    max_depth = settings.max_depth
    cap = out.left.shape[1]
    n_buf = pool.arrays.shape[0] - 1  # buffers to keep histograms in (the last array is the scratch)
    no_store = pool.arrays[0, :0]
    _sum_stats(work, 0, m, stack.stats[0])
    sp = _push(stack, 0, 0, 0, m, 0, -1, 0, oob.shape[0])
    n_nodes = 1
    while sp > 0:
        sp -= 1
        node, start, end = stack.node[sp], stack.start[sp], stack.end[sp]
        depth, buf = stack.depth[sp], stack.buf[sp]
        W, pure = _make_node(out, t, node, work, stack.stats[sp])
        oob_start, oob_end = stack.oob_start[sp], stack.oob_end[sp]
        split = Split(0.0, -1, 0, False, False, -1)
        if not (pure or depth >= max_depth or W < 2 * work.min_leaf or n_nodes + 2 > cap):
            if buf < 0 and n_buf > 0 and end - start >= SUBTRACT_FROM and pool.n_free[0] > 0:
                buf = _take_buffer(pool)
                _build_histograms(pool.arrays[buf], data.columns, work.feats, work.n_feats, work.samples, start, end,
                                  work.is_reg)
            n_cand = _draw_candidates(work)
            split = best_split(data, settings, work, n_cand, start, end, pool.arrays[buf] if buf >= 0 else no_store)
        if split.slot < 0:
            _release(pool, buf)
            for q in range(oob_start, oob_end):
                out.oob_leaf[t, oob[q]] = node
            continue
        f = work.feats[split.slot]
        if settings.midpoint and not split.nominal and split.upper > split.threshold + 1:
            split = Split(split.gain, split.slot, midpoint_bin(data.bin_values, f, split.threshold, split.upper),
                          split.missing_left, False, split.upper)
        _record_split(out, t, node, f, split, work.cats)
        # The children's statistics go straight to their stack slots (the right child's first, then the left's).
        if depth + 1 >= max_depth:
            # The children will be leaves: their statistics and out-of-bag samples are all they need.
            nl = _side_stats(data.columns, f, work, start, end, split, stack.stats[sp + 1], stack.stats[sp])
            _out_of_bag_to_leaves(out, t, data.columns, f, split, work.cats, oob, oob_start, oob_end, n_nodes)
            oob_start = oob_mid = oob_end
            _release(pool, buf)
            buf_l, buf_r = -1, -1
        else:
            nl = _partition(data.columns, f, work, start, end, split, stack.stats[sp + 1], stack.stats[sp])
            oob_mid = _partition_out_of_bag(data.columns, f, split, work.cats, oob, oob_spare, oob_start, oob_end)
            buf_l, buf_r = _children_histograms(data, work, pool, buf, start, nl, end)
        out.left[t, node] = n_nodes
        out.right[t, node] = n_nodes + 1
        # Right child pushed first so that the left subtree is grown first (depth first, bounded stack).
        sp = _push(stack, sp, n_nodes + 1, nl, end, depth + 1, buf_r, oob_mid, oob_end)
        sp = _push(stack, sp, n_nodes, start, nl, depth + 1, buf_l, oob_start, oob_mid)
        n_nodes += 2
    return n_nodes


@njit(parallel=True, cache=True)
def grow_trees(data, settings, plans, out):
    """Grow one tree per row of ``plans`` into the rows of ``out`` (a :class:`GrownNodes`) on ``data`` (a
    :class:`TrainingSet`) with ``settings`` (a :class:`TreeSettings` with an integer depth bound), in parallel over
    trees."""
    # Bound before the loop: numba 0.68 drops a store through a tuple field (out.n_nodes[t] = ...) in a prange body.
    n_nodes = out.n_nodes
    classes = class_slots(data.y_cls, data.n_samples if data.n_classes > 0 else 0, max(data.n_classes, 1))
    for t in prange(plans.seeds.shape[0]):
        # prange's index is uint64 in the parallel loop and int64 in its serial typing: one type compiles once
        n_nodes[t] = _grow_one(data, settings, plans, np.int64(t), out, classes)
