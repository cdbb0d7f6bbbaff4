"""Histogram CART in numba: grow many trees on binned columns, in parallel over trees.

Columns are stored feature-major (``Xb[feature, sample]``, ``uint8``, bin ``MISSING_BIN`` = missing). A tree sees a
subset of the features (its subspace); at each node it builds, for every candidate feature, a histogram of per-bin
statistics (class counts for classification, weight and weighted target sum for regression), scans it for the best
threshold (numeric) or best prefix of categories ordered by their target statistic (nominal), and sends missing
values to whichever side scores better (the default side learned per node).

Output arrays follow scikit-learn's flat ``tree_`` layout, one row per tree, ``cap`` nodes per row.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from streamforest.binning import MISSING_BIN
from streamforest.rng import next_below
from streamforest.tree.walk import leaf_of

LEAF = -1

# Index of a 64-bit word's lowest set bit: isolate the bit, multiply by a de Bruijn sequence, read the top six bits.
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_BIT_INDEX = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _BIT_INDEX[((1 << _i) * 0x03F79D71B4CB0A89 % 2**64) >> 58] = _i


#: Nodes with at least this many in-bag samples keep whole histograms, so that a child's can be the parent's minus
#: its sibling's (below it, building a histogram costs less than subtracting 256 bins).
SUBTRACT_FROM = 512
#: Memory for one tree's stored histograms (they live only while their node or its pending children need them).
HIST_POOL_BYTES = 32 * 2**20
#: Nodes with at least this many in-bag samples fill a feature's histogram without tracking which bins they touch,
#: and scan all of them: most bins are touched anyway, and the tracking (a read-modify-write of a bitmap word per
#: sample) cost more than the scan (measured on a wide stream: growth 14% faster on one thread, 5% on two; a threshold
#: of 128 was slower).
DENSE_FROM = 256


@njit(inline="always")
def _fill_dense(Xb, f, idx, iw, ic, iwy, start, end, is_reg, h):
    """Add the statistics of feature ``f``'s bins in a node to ``h`` (missing values: its last row), tracking
    nothing: for large nodes (:data:`DENSE_FROM`) and stored histograms, which are scanned bin by bin."""
    if is_reg:
        for ii in range(start, end):
            b = Xb[f, idx[ii]]
            h[b, 0] += iw[ii]
            h[b, 1] += iwy[ii]
    else:
        for ii in range(start, end):
            h[Xb[f, idx[ii]], ic[ii]] += iw[ii]


@njit(cache=True)
def _build_histograms(H, Xb, feats, n_feats, idx, iw, ic, iwy, start, end, is_reg):
    """Histograms of samples ``idx[start:end]`` over every feature of the subspace (the last bin: missing)."""
    H[:n_feats] = 0.0
    for j in range(n_feats):
        _fill_dense(Xb, feats[j], idx, iw, ic, iwy, start, end, is_reg, H[j])


@njit(cache=True)
def _bootstrap_counts(n: int, y_cls: np.ndarray, n_classes: int, stratified: bool, state: np.ndarray) -> np.ndarray:
    """Bootstrap draw counts; stratified by class so that every class keeps its size in every tree."""
    counts = np.zeros(n, dtype=np.float64)
    if not stratified:
        for _ in range(n):
            counts[next_below(state, n)] += 1.0
        return counts
    class_n = np.zeros(n_classes, dtype=np.int64)
    for i in range(n):
        class_n[y_cls[i]] += 1
    starts = np.zeros(n_classes + 1, dtype=np.int64)
    for c in range(n_classes):
        starts[c + 1] = starts[c] + class_n[c]
    members = np.empty(n, dtype=np.int64)
    fill = starts[:-1].copy()
    for i in range(n):
        c = y_cls[i]
        members[fill[c]] = i
        fill[c] += 1
    for c in range(n_classes):
        m = class_n[c]
        for _ in range(m):
            counts[members[starts[c] + next_below(state, m)]] += 1.0
    return counts


@njit(cache=True)
def bootstrap_counts(n: int, y_cls: np.ndarray, n_classes: int, stratified: bool, seed: np.uint64) -> np.ndarray:
    """The in-bag draw counts of the tree with this seed (recomputed on demand for out-of-bag scores)."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = seed
    return _bootstrap_counts(n, y_cls, n_classes, stratified, state)


@njit(inline="always")
def _child_score(stats: np.ndarray, is_reg: bool) -> float:
    """Sum over children of this score is maximised: sum_k n_k^2 / W (Gini) or S^2 / W (variance)."""
    if is_reg:
        w = stats[0]
        return stats[1] * stats[1] / w if w > 0 else 0.0
    w = 0.0
    s = 0.0
    for k in range(stats.shape[0]):
        w += stats[k]
        s += stats[k] * stats[k]
    return s / w if w > 0 else 0.0


@njit(inline="always")
def _weight(stats: np.ndarray, is_reg: bool) -> float:
    if is_reg:
        return stats[0]
    w = 0.0
    for k in range(stats.shape[0]):
        w += stats[k]
    return w


@njit(inline="always")
def _fill_histogram(Xb, f, idx, iw, ic, iwy, start, end, is_reg, miss, seen, h):
    """Add the statistics of feature ``f``'s bins in a node to ``h``, the missing values' to ``miss``.

    A bitmap of the bins touched (``seen``) lists them in order afterwards, so neither clearing nor scanning costs the
    (up to 255) bins a small node never sees.
    """
    for k in range(miss.shape[0]):
        miss[k] = 0.0
    for ii in range(start, end):
        b = Xb[f, idx[ii]]
        if b == MISSING_BIN:
            if is_reg:
                miss[0] += iw[ii]
                miss[1] += iwy[ii]
            else:
                miss[ic[ii]] += iw[ii]
            continue
        seen[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
        if is_reg:
            h[b, 0] += iw[ii]
            h[b, 1] += iwy[ii]
        else:
            h[b, ic[ii]] += iw[ii]


@njit(inline="always")
def _take_present(seen, h, cb, hc) -> int:
    """Move the touched bins of ``h`` to ``cb`` (their ids) and ``hc`` (their statistics) in bin order, clearing
    ``h`` and ``seen``; returns how many bins are present."""
    n_present = 0
    for word in range(4):
        bits = seen[word]
        while bits != np.uint64(0):
            low = bits & (~bits + np.uint64(1))
            b = word * 64 + _BIT_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
            cb[n_present] = b
            for k in range(h.shape[1]):
                hc[n_present, k] = h[b, k]
                h[b, k] = 0.0
            n_present += 1
            bits ^= low
        seen[word] = np.uint64(0)
    return n_present


@njit(inline="always")
def _two_stats_trial(l0, l1, p0, p1, parent_score, is_reg, min_samples_leaf, j, thr, best):
    """``best`` updated with the numeric split sending statistics ``(l0, l1)`` of the node's ``(p0, p1)`` left at
    threshold bin ``thr`` (two statistics, nothing missing: binary classification or regression). The scores are
    the ones :func:`_scan_general` computes, in scalars: this is the hot spot.

    ``best`` and the result are ``(gain, feature slot, threshold bin, missing left, nominal)``."""
    r0 = p0 - l0
    r1 = p1 - l1
    if is_reg:
        wl = l0
        wr = r0
    else:
        wl = l0 + l1
        wr = r0 + r1
    if wl < min_samples_leaf or wr < min_samples_leaf or wl <= 0 or wr <= 0:
        return best
    if is_reg:
        score = l1 * l1 / wl + r1 * r1 / wr
    else:
        score = (l0 * l0 + l1 * l1) / wl + (r0 * r0 + r1 * r1) / wr
    gain = score - parent_score
    if gain > best[0]:
        return gain, j, thr, wl >= wr, False
    return best


@njit(inline="always")
def _scan_two_stats_touched(j, seen, h, parent, parent_score, is_reg, min_samples_leaf, best):
    """The best threshold of a numeric feature with two statistics and nothing missing, read straight from the
    touched bins of ``h`` in bin order (and cleared with ``seen`` as they are read): no copy to a compact list."""
    l0 = 0.0
    l1 = 0.0
    prev = -1
    for word in range(4):
        bits = seen[word]
        while bits != np.uint64(0):
            low = bits & (~bits + np.uint64(1))
            b = word * 64 + _BIT_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
            bits ^= low
            # The split after the previous bin; none after the last one.
            if prev >= 0:
                best = _two_stats_trial(l0, l1, parent[0], parent[1], parent_score, is_reg, min_samples_leaf, j, prev,
                                        best)
            l0 += h[b, 0]
            l1 += h[b, 1]
            h[b, 0] = 0.0
            h[b, 1] = 0.0
            prev = b
        seen[word] = np.uint64(0)
    return best


class GrowData(NamedTuple):
    """The samples: feature-major bins, how many, class codes or targets, classes (at least 1), whether regression,
    and which features are nominal."""

    Xb: np.ndarray
    n: int
    y_cls: np.ndarray
    y_reg: np.ndarray
    n_classes: int
    is_reg: bool
    is_nominal: np.ndarray


class GrowSettings(NamedTuple):
    bootstrap: bool
    max_depth: int
    cap: int  # nodes per tree row of the output
    min_category_weight: float
    dense_from: int  # nodes of at least this many in-bag samples fill untracked histograms (see DENSE_FROM)


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


@njit(inline="always")
def _in_bag(data, bootstrap, state):
    """The in-bag samples with their weight, class and weighted target side by side (the histogram loops then read
    them in order and gather only the bins), how many there are, and every sample's draw count."""
    n = data.n
    is_reg = data.is_reg
    if bootstrap:
        w = _bootstrap_counts(n, data.y_cls, data.n_classes, not is_reg, state)
    else:
        w = np.ones(n, dtype=np.float64)
    idx = np.empty(n, dtype=np.int64)
    iw = np.empty(n, dtype=np.float64)
    ic = np.zeros(n, dtype=np.int64)
    iwy = np.zeros(n, dtype=np.float64)
    m = 0
    for i in range(n):
        if w[i] > 0:
            idx[m] = i
            iw[m] = w[i]
            if is_reg:
                iwy[m] = w[i] * data.y_reg[i]
            else:
                ic[m] = data.y_cls[i]
            m += 1
    return (idx, iw, ic, iwy), m, w


@njit(inline="always")
def _make_node(out, t, node, samples, start, end, is_reg, n_classes, parent) -> tuple:
    """Write node ``node`` as a leaf with its value and weight, every field of it (a split overwrites some); its
    statistics go to ``parent``. Returns the node's weight and whether it is pure."""
    _, iw, ic, iwy = samples
    parent[:] = 0.0
    for ii in range(start, end):
        if is_reg:
            parent[0] += iw[ii]
            parent[1] += iwy[ii]
        else:
            parent[ic[ii]] += iw[ii]
    W = _weight(parent, is_reg)
    if is_reg:
        out.value[t, node, 0] = parent[1] / W if W > 0 else 0.0
    else:
        for k in range(n_classes):
            out.value[t, node, k] = parent[k] / W if W > 0 else 0.0
    out.weight[t, node] = W
    out.left[t, node] = LEAF
    out.right[t, node] = LEAF
    out.feature[t, node] = -1
    out.gain[t, node] = 0.0
    out.threshold[t, node] = 0
    out.missing_left[t, node] = 0
    out.nominal[t, node] = 0
    out.cats[t, node, :] = 0
    pure = False
    if not is_reg:
        for k in range(n_classes):
            if parent[k] == W:
                pure = True
    return W, pure


@njit(inline="always")
def _draw_candidates(cand, n_feats, split_k, state) -> int:
    """Candidate features of a node in ``cand[:returned]``: the tree's subspace, or a random part of it."""
    n_cand = n_feats
    for j in range(n_feats):
        cand[j] = j
    if split_k > 0 and split_k < n_feats:
        for j in range(split_k):
            r = j + next_below(state, n_feats - j)
            tmp = cand[j]
            cand[j] = cand[r]
            cand[r] = tmp
        n_cand = split_k
    return n_cand


@njit(inline="always")
def _stored_histogram(Hj, is_reg, n_stats, miss, cb, hc) -> int:
    """The present bins of a stored histogram, in order (``cb``, ``hc``), the missing ones in ``miss``."""
    n_present = 0
    for b in range(MISSING_BIN):
        if is_reg:
            w = Hj[b, 0]
        else:
            w = 0.0
            for k in range(n_stats):
                w += Hj[b, k]
        if w > 0:
            cb[n_present] = b
            for k in range(n_stats):
                hc[n_present, k] = Hj[b, k]
            n_present += 1
    for k in range(n_stats):
        miss[k] = Hj[MISSING_BIN, k]
    return n_present


@njit(inline="always")
def _scan_general(j, nominal, hc, cb, n_present, miss, parent, parent_score, is_reg, n_classes, n_stats,
                  min_samples_leaf, min_category_weight, scan, best, best_cats):
    """The best split of one feature in the general case: any statistics, missing values, nominal categories.

    Missing values, and in a nominal column the categories too rare in this node to be placed on their own
    evidence, form one pool that follows the split's default side (as unseen categories will). Bins are scanned in
    their natural order (numeric) or by target statistic (nominal); the prefixes of that order are tried (mode 0)
    and, for nominal columns, each category against the rest (mode 1). ``best_cats`` receives the left categories
    of a better nominal split."""
    keys, cat_ids, sorted_ids, rare_ids, left, right, trial = scan
    best_gain, best_j, best_thr, best_missleft, best_nominal = best
    n_rare = 0
    n_order = 0
    if nominal:
        kmax = 0
        for k in range(n_stats):
            if parent[k] > parent[kmax]:
                kmax = k
        for c in range(n_present):
            wb = _weight(hc[c], is_reg)
            if wb < min_category_weight:
                for k in range(n_stats):
                    miss[k] += hc[c, k]
                rare_ids[n_rare] = c
                n_rare += 1
                continue
            if is_reg or n_classes == 2:
                keys[n_order] = hc[c, 1] / wb
            else:
                # Multiclass: order by the share of the node's most frequent class.
                keys[n_order] = hc[c, kmax] / wb
            cat_ids[n_order] = c
            n_order += 1
        order = np.argsort(keys[:n_order], kind="mergesort")
        for q in range(n_order):
            sorted_ids[q] = cat_ids[order[q]]
        for q in range(n_order):
            cat_ids[q] = sorted_ids[q]
    else:
        for c in range(n_present):
            cat_ids[c] = c
        n_order = n_present
    w_miss = _weight(miss, is_reg)

    # The last prefix puts every present value left: "present vs missing", tried when any are missing.
    n_modes = 2 if nominal and n_order > 2 else 1
    for mode in range(n_modes):
        left[:] = 0.0
        for q in range(n_order):
            if mode == 0 and q == n_order - 1 and w_miss == 0:
                break
            b = cat_ids[q]
            if mode == 1:
                left[:] = 0.0
            for k in range(n_stats):
                left[k] += hc[b, k]
            for k in range(n_stats):
                right[k] = parent[k] - miss[k] - left[k]
            w_left = _weight(left, is_reg)
            w_right = _weight(right, is_reg)
            if w_left <= 0 and w_right <= 0:
                continue
            # Missing values to the left, then to the right; with none seen, they follow the larger side.
            for side in range(2):
                if (w_miss == 0 and side == 1) or (mode == 0 and q == n_order - 1 and side == 0):
                    continue
                if side == 0:
                    for k in range(n_stats):
                        trial[k] = left[k] + miss[k]
                    wl = w_left + w_miss
                    wr = w_right
                    score = _child_score(trial, is_reg) + _child_score(right, is_reg)
                else:
                    for k in range(n_stats):
                        trial[k] = right[k] + miss[k]
                    wl = w_left
                    wr = w_right + w_miss
                    score = _child_score(left, is_reg) + _child_score(trial, is_reg)
                if wl < min_samples_leaf or wr < min_samples_leaf or wl <= 0 or wr <= 0:
                    continue
                gain = score - parent_score
                if gain > best_gain:
                    best_gain = gain
                    best_j = j
                    best_nominal = nominal
                    if w_miss == 0:
                        best_missleft = w_left >= w_right
                    else:
                        best_missleft = side == 0
                    if nominal:
                        best_thr = 0
                        best_cats[:] = 0
                        for qq in range(q + 1 if mode == 0 else 1):
                            c = cb[cat_ids[qq] if mode == 0 else b]
                            best_cats[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
                        if best_missleft:
                            for qq in range(n_rare):
                                c = cb[rare_ids[qq]]
                                best_cats[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
                    else:
                        best_thr = cb[b]
    return best_gain, best_j, best_thr, best_missleft, best_nominal


@njit(inline="always")
def _scan_two_stats_bins(j, Hj, parent, parent_score, is_reg, min_samples_leaf, best, clear):
    """:func:`_scan_two_stats_touched` over every bin of a histogram (its bins with weight are the present ones),
    stored or dense; ``clear`` empties the bins read."""
    l0 = 0.0
    l1 = 0.0
    prev = -1
    for b in range(MISSING_BIN):
        h0 = Hj[b, 0]
        h1 = Hj[b, 1]
        if (h0 if is_reg else h0 + h1) <= 0:
            continue
        if clear:
            Hj[b, 0] = 0.0
            Hj[b, 1] = 0.0
        if prev >= 0:
            best = _two_stats_trial(l0, l1, parent[0], parent[1], parent_score, is_reg, min_samples_leaf, j, prev,
                                    best)
        l0 += h0
        l1 += h1
        prev = b
    return best


@njit(inline="always")
def _best_split(data, feats, cand, n_cand, samples, start, end, n_stats, parent, min_leaf, settings, stored, hist,
                scan, best_cats):
    """The best split of a node among its candidate features: ``(gain, feature slot, threshold bin, missing left,
    nominal)``, slot -1 if none beats a negligible gain; ``best_cats`` holds the left categories of a nominal one.
    ``stored`` is the node's stored histograms (an empty array when they are not kept)."""
    idx, iw, ic, iwy = samples
    h, hc, cb, seen, miss = hist
    is_reg = data.is_reg
    parent_score = _child_score(parent, is_reg)
    best = (1e-12 * (abs(parent_score) + 1.0), -1, 0, False, False)
    best_cats[:] = np.uint64(0)
    for cj in range(n_cand):
        j = cand[cj]
        f = feats[j]
        nominal = data.is_nominal[f]
        # The common case (numeric, two statistics, nothing missing) is scanned straight from the histogram; the
        # general scan works on a compact copy of the present bins.
        two_stats = not nominal and n_stats == 2
        if stored.shape[0] > 0:
            if two_stats and _weight(stored[j, MISSING_BIN], is_reg) == 0:
                best = _scan_two_stats_bins(j, stored[j], parent, parent_score, is_reg, min_leaf, best, False)
                continue
            n_present = _stored_histogram(stored[j], is_reg, n_stats, miss, cb, hc)
        elif end - start >= settings.dense_from:
            _fill_dense(data.Xb, f, idx, iw, ic, iwy, start, end, is_reg, h)
            if two_stats and _weight(h[MISSING_BIN], is_reg) == 0:
                best = _scan_two_stats_bins(j, h, parent, parent_score, is_reg, min_leaf, best, True)
                continue
            n_present = _stored_histogram(h, is_reg, n_stats, miss, cb, hc)
            h[:] = 0.0
        else:
            _fill_histogram(data.Xb, f, idx, iw, ic, iwy, start, end, is_reg, miss, seen, h)
            if two_stats and _weight(miss, is_reg) == 0:
                best = _scan_two_stats_touched(j, seen, h, parent, parent_score, is_reg, min_leaf, best)
                continue
            n_present = _take_present(seen, h, cb, hc)
        best = _scan_general(j, nominal, hc, cb, n_present, miss, parent, parent_score, is_reg, data.n_classes,
                             n_stats, min_leaf, settings.min_category_weight, scan, best, best_cats)
    return best


@njit(inline="always")
def _partition(Xb, f, samples, tmp, start, end, best_thr, best_missleft, best_nominal, best_cats) -> int:
    """Stable partition of the node's samples by the split: left samples first, in their original order. Returns
    where the right ones start."""
    idx, iw, ic, iwy = samples
    tmp_i, tmp_w, tmp_c, tmp_wy = tmp
    nl = start
    nr = 0
    for ii in range(start, end):
        s = idx[ii]
        b = Xb[f, s]
        if b == MISSING_BIN:
            go_left = best_missleft
        elif best_nominal:
            go_left = ((best_cats[b >> 6] >> np.uint64(b & 63)) & np.uint64(1)) == np.uint64(1)
        else:
            go_left = b <= best_thr
        if go_left:
            idx[nl] = s
            iw[nl] = iw[ii]
            ic[nl] = ic[ii]
            iwy[nl] = iwy[ii]
            nl += 1
        else:
            tmp_i[nr] = s
            tmp_w[nr] = iw[ii]
            tmp_c[nr] = ic[ii]
            tmp_wy[nr] = iwy[ii]
            nr += 1
    for q in range(nr):
        idx[nl + q] = tmp_i[q]
        iw[nl + q] = tmp_w[q]
        ic[nl + q] = tmp_c[q]
        iwy[nl + q] = tmp_wy[q]
    return nl


# The steps of growing a node are inlined into this one function, as one hand-written loop would be: compiled as
# separate calls they measured 4-18% slower than the single loop on deep trees and nominal features (one thread).
@njit(cache=True)
def _grow_one(data, settings, plans, t, out):
    """Grow tree ``t`` depth first; returns its node count."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = plans.seeds[t]
    feats = plans.subspaces[t]
    n_feats = plans.sizes[t]
    split_k = plans.split_ks[t]
    min_leaf = plans.min_leaf[t]
    is_reg = data.is_reg
    n_classes = data.n_classes
    max_depth = settings.max_depth
    cap = settings.cap
    n_stats = 2 if is_reg else n_classes
    samples, m, drawn = _in_bag(data, settings.bootstrap, state)
    tmp = (np.empty(m, dtype=np.int64), np.empty(m, dtype=np.float64), np.empty(m, dtype=np.int64),
           np.empty(m, dtype=np.float64))

    # h: one feature's statistics per bin; hc, cb: those of the bins present in the node, in bin order, and their
    # ids; seen: bitmap of the bins touched; miss: the missing values' statistics.
    hist = (np.zeros((256, n_stats), dtype=np.float64), np.zeros((256, n_stats), dtype=np.float64),
            np.empty(256, dtype=np.int64), np.zeros(4, dtype=np.uint64), np.zeros(n_stats, dtype=np.float64))
    # keys, cat_ids, sorted_ids, rare_ids: the order of a nominal feature's categories; left, right, trial: sides.
    scan = (np.empty(256, dtype=np.float64), np.empty(256, dtype=np.int64), np.empty(256, dtype=np.int64),
            np.empty(256, dtype=np.int64), np.zeros(n_stats, dtype=np.float64), np.zeros(n_stats, dtype=np.float64),
            np.zeros(n_stats, dtype=np.float64))
    parent = np.zeros(n_stats, dtype=np.float64)
    cand = np.empty(n_feats, dtype=np.int64)
    best_cats = np.zeros(4, dtype=np.uint64)

    st_node = np.empty(cap, dtype=np.int64)
    st_start = np.empty(cap, dtype=np.int64)
    st_end = np.empty(cap, dtype=np.int64)
    st_depth = np.empty(cap, dtype=np.int64)
    st_buf = np.empty(cap, dtype=np.int64)  # the stored histograms a pending node inherits (-1: none)

    # Histogram subtraction needs every feature's histogram at every node: not with per-split feature sampling.
    n_buf = 0
    if split_k <= 0 or split_k >= n_feats:
        n_buf = min(max_depth + 2, HIST_POOL_BYTES // (n_feats * 256 * n_stats * 8) - 1)
    n_buf = max(n_buf, 0)
    pool = np.empty((n_buf + 1 if n_buf > 0 else 1, n_feats if n_buf > 0 else 1, 256, n_stats), dtype=np.float64)
    no_store = pool[0, :0]
    free = np.empty(max(n_buf, 1), dtype=np.int64)  # ids of unused buffers; id n_buf is the sibling scratch
    n_free = n_buf
    for q in range(n_buf):
        free[q] = n_buf - 1 - q
    st_node[0] = 0
    st_start[0] = 0
    st_end[0] = m
    st_depth[0] = 0
    st_buf[0] = -1
    sp = 1
    n_nodes = 1

    while sp > 0:
        sp -= 1
        node = st_node[sp]
        start = st_start[sp]
        end = st_end[sp]
        depth = st_depth[sp]
        buf = st_buf[sp]

        W, pure = _make_node(out, t, node, samples, start, end, is_reg, n_classes, parent)
        if pure or depth >= max_depth or W < 2 * min_leaf or n_nodes + 2 > cap:
            if buf >= 0:
                free[n_free] = buf
                n_free += 1
            continue
        if buf < 0 and n_buf > 0 and end - start >= SUBTRACT_FROM and n_free > 0:
            n_free -= 1
            buf = free[n_free]
            _build_histograms(pool[buf], data.Xb, feats, n_feats, samples[0], samples[1], samples[2], samples[3],
                              start, end, is_reg)

        n_cand = _draw_candidates(cand, n_feats, split_k, state)
        best_gain, best_j, best_thr, best_missleft, best_nominal = _best_split(
            data, feats, cand, n_cand, samples, start, end, n_stats, parent, min_leaf, settings,
            pool[buf] if buf >= 0 else no_store, hist, scan, best_cats)
        if best_j < 0:
            if buf >= 0:
                free[n_free] = buf
                n_free += 1
            continue

        f = feats[best_j]
        out.feature[t, node] = f
        out.threshold[t, node] = best_thr if not best_nominal else 0
        out.missing_left[t, node] = 1 if best_missleft else 0
        out.nominal[t, node] = 1 if best_nominal else 0
        out.cats[t, node, :] = best_cats
        out.gain[t, node] = best_gain
        nl = _partition(data.Xb, f, samples, tmp, start, end, best_thr, best_missleft, best_nominal, best_cats)

        # Stored histograms pass to the larger child as the parent's minus the smaller child's (built directly, into
        # a buffer of its own if it is large enough to keep one, else into the scratch buffer).
        buf_l = -1
        buf_r = -1
        if buf >= 0:
            small_left = nl - start <= end - nl
            s_start, s_end = (start, nl) if small_left else (nl, end)
            if max(nl - start, end - nl) >= SUBTRACT_FROM:
                sbuf = n_buf
                if s_end - s_start >= SUBTRACT_FROM and n_free > 0:
                    n_free -= 1
                    sbuf = free[n_free]
                _build_histograms(pool[sbuf], data.Xb, feats, n_feats, samples[0], samples[1], samples[2],
                                  samples[3], s_start, s_end, is_reg)
                pool[buf] -= pool[sbuf]
                kept = sbuf if sbuf != n_buf else -1
                buf_l, buf_r = (kept, buf) if small_left else (buf, kept)
            else:
                free[n_free] = buf
                n_free += 1

        lc = n_nodes
        rc = n_nodes + 1
        n_nodes += 2
        out.left[t, node] = lc
        out.right[t, node] = rc
        # Right child pushed first so that the left subtree is grown first (depth first, bounded stack).
        st_node[sp] = rc
        st_start[sp] = nl
        st_end[sp] = end
        st_depth[sp] = depth + 1
        st_buf[sp] = buf_r
        sp += 1
        st_node[sp] = lc
        st_start[sp] = start
        st_end[sp] = nl
        st_depth[sp] = depth + 1
        st_buf[sp] = buf_l
        sp += 1

    # The samples the tree left out, routed while its nodes are in cache (and its draws at hand).
    if out.oob_leaf.shape[0] > 0:
        # The tree's own rows, in the same named tuple: walk.leaf_of reads any tuple with the node arrays.
        row = GrownNodes(out.feature[t], out.threshold[t], out.missing_left[t], out.nominal[t], out.cats[t],
                         out.left[t], out.right[t], out.value[t], out.gain[t], out.weight[t], out.n_nodes,
                         out.oob_leaf)
        for i in range(data.n):
            out.oob_leaf[t, i] = -1 if drawn[i] > 0 else leaf_of(row, data.Xb, i, 0)
    return n_nodes


@njit(parallel=True, cache=True)
def grow_trees(data, settings, plans, out):
    """Grow one tree per row of ``plans`` into the rows of ``out``, in parallel over trees."""
    # Bound before the loop: numba 0.68 drops a store through a tuple field (out.n_nodes[t] = ...) in a prange body.
    n_nodes = out.n_nodes
    for t in prange(plans.seeds.shape[0]):
        n_nodes[t] = _grow_one(data, settings, plans, t, out)
