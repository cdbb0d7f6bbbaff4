"""Histogram CART in numba: grow many trees on binned columns, in parallel over trees.

Columns are stored feature-major (``Xb[feature, sample]``, ``uint8``, bin ``MISSING_BIN`` = missing). A tree sees a
subset of the features (its subspace); at each node it builds, for every candidate feature, a histogram of per-bin
statistics (class counts for classification, weight and weighted target sum for regression), scans it for the best
threshold (numeric) or best prefix of categories ordered by their target statistic (nominal), and sends missing
values to whichever side scores better (the default side learned per node).

Output arrays follow scikit-learn's flat ``tree_`` layout, one row per tree, ``cap`` nodes per row.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from streamforest.binning import MISSING_BIN
from streamforest.rng import next_below

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


@njit(cache=True)
def _build_histograms(H, Xb, feats, n_feats, idx, iw, ic, iwy, start, end, is_reg):
    """Histograms of samples ``idx[start:end]`` over every feature of the subspace (the last bin: missing)."""
    H[:n_feats] = 0.0
    for j in range(n_feats):
        f = feats[j]
        for ii in range(start, end):
            b = Xb[f, idx[ii]]
            if is_reg:
                H[j, b, 0] += iw[ii]
                H[j, b, 1] += iwy[ii]
            else:
                H[j, b, ic[ii]] += iw[ii]


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
def _node_histogram(Xb, f, idx, iw, ic, iwy, start, end, is_reg, miss, seen, h, cb, hc) -> int:
    """Statistics of the bins of feature ``f`` present in a node, in bin order (``cb``, ``hc``), the missing ones
    in ``miss``; returns how many bins are present.

    A bitmap of the bins touched lists them in order afterwards, so neither clearing nor scanning costs the (up
    to 255) bins a small node never sees.
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
    n_present = 0
    for word in range(4):
        bits = seen[word]
        while bits != np.uint64(0):
            low = bits & (~bits + np.uint64(1))
            b = word * 64 + _BIT_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
            cb[n_present] = b
            hc[n_present, :] = h[b]
            h[b, :] = 0.0
            n_present += 1
            bits ^= low
        seen[word] = np.uint64(0)
    return n_present


@njit(cache=True)
def _grow_one(
    Xb, n, y_cls, y_reg, n_classes, is_reg, feats, n_feats, is_nominal, seed, bootstrap,
    max_depth, min_samples_leaf, split_k, cap, min_category_weight,
    o_feature, o_thr, o_missleft, o_nominal, o_cats, o_left, o_right, o_value, o_gain, o_weight,
):
    state = np.empty(1, dtype=np.uint64)
    state[0] = seed
    if bootstrap:
        w = _bootstrap_counts(n, y_cls, n_classes, not is_reg, state)
    else:
        w = np.ones(n, dtype=np.float64)
    n_stats = 2 if is_reg else n_classes
    # The in-bag samples, with their weight, class and weighted target side by side: the histogram loops then read
    # them in order and gather only the bins.
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
                iwy[m] = w[i] * y_reg[i]
            else:
                ic[m] = y_cls[i]
            m += 1
    tmp = np.empty(m, dtype=np.int64)
    tmp_w = np.empty(m, dtype=np.float64)
    tmp_c = np.empty(m, dtype=np.int64)
    tmp_wy = np.empty(m, dtype=np.float64)

    h = np.zeros((256, n_stats), dtype=np.float64)
    hc = np.zeros((256, n_stats), dtype=np.float64)  # statistics of the bins present in the node, in bin order
    cb = np.empty(256, dtype=np.int64)  # their bin ids
    seen = np.zeros(4, dtype=np.uint64)  # bitmap of the bins touched in the current histogram
    parent = np.zeros(n_stats, dtype=np.float64)
    left = np.zeros(n_stats, dtype=np.float64)
    right = np.zeros(n_stats, dtype=np.float64)
    trial = np.zeros(n_stats, dtype=np.float64)
    cand = np.empty(n_feats, dtype=np.int64)
    keys = np.empty(256, dtype=np.float64)
    cat_ids = np.empty(256, dtype=np.int64)
    sorted_ids = np.empty(256, dtype=np.int64)
    rare_ids = np.empty(256, dtype=np.int64)
    miss = np.zeros(n_stats, dtype=np.float64)
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
    free = np.empty(max(n_buf, 1), dtype=np.int64)  # ids of unused buffers; id n_buf is the sibling scratch
    n_free = n_buf
    for q in range(n_buf):
        free[q] = n_buf - 1 - q
    sp = 0
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

        parent[:] = 0.0
        for ii in range(start, end):
            if is_reg:
                parent[0] += iw[ii]
                parent[1] += iwy[ii]
            else:
                parent[ic[ii]] += iw[ii]
        W = _weight(parent, is_reg)
        if is_reg:
            o_value[node, 0] = parent[1] / W if W > 0 else 0.0
        else:
            for k in range(n_classes):
                o_value[node, k] = parent[k] / W if W > 0 else 0.0
        o_weight[node] = W
        o_left[node] = LEAF
        o_right[node] = LEAF
        o_feature[node] = -1
        o_gain[node] = 0.0

        pure = False
        if not is_reg:
            for k in range(n_classes):
                if parent[k] == W:
                    pure = True
        if pure or depth >= max_depth or W < 2 * min_samples_leaf or n_nodes + 2 > cap:
            if buf >= 0:
                free[n_free] = buf
                n_free += 1
            continue
        if buf < 0 and n_buf > 0 and end - start >= SUBTRACT_FROM and n_free > 0:
            n_free -= 1
            buf = free[n_free]
            _build_histograms(pool[buf], Xb, feats, n_feats, idx, iw, ic, iwy, start, end, is_reg)

        # Candidate features of this node: the tree's subspace, or a random part of it.
        n_cand = n_feats
        for j in range(n_feats):
            cand[j] = j
        if split_k > 0 and split_k < n_feats:
            for j in range(split_k):
                r = j + next_below(state, n_feats - j)
                t = cand[j]
                cand[j] = cand[r]
                cand[r] = t
            n_cand = split_k

        parent_score = _child_score(parent, is_reg)
        best_gain = 1e-12 * (abs(parent_score) + 1.0)
        best_j = -1
        best_thr = 0
        best_missleft = False
        best_nominal = False
        for k in range(4):
            best_cats[k] = np.uint64(0)

        for cj in range(n_cand):
            j = cand[cj]
            f = feats[j]
            if buf >= 0:
                # This node's histograms are stored: list the present bins of feature j in order.
                Hj = pool[buf, j]
                n_present = 0
                for b in range(MISSING_BIN):
                    if _weight(Hj[b], is_reg) > 0:
                        cb[n_present] = b
                        hc[n_present, :] = Hj[b]
                        n_present += 1
                for k in range(n_stats):
                    miss[k] = Hj[MISSING_BIN, k]
            else:
                n_present = _node_histogram(Xb, f, idx, iw, ic, iwy, start, end, is_reg, miss, seen, h, cb, hc)
            nominal = is_nominal[f]
            if not nominal and n_stats == 2 and _weight(miss, is_reg) == 0:
                # The common case (binary classification or regression, numeric, nothing missing in the node), in
                # scalars: the general scan below computes exactly the same scores, but its per-bin loops over
                # statistics and missing-value sides make it several times slower, and this loop is the hot spot.
                l0 = 0.0
                l1 = 0.0
                p0 = parent[0]
                p1 = parent[1]
                for q in range(n_present - 1):
                    l0 += hc[q, 0]
                    l1 += hc[q, 1]
                    r0 = p0 - l0
                    r1 = p1 - l1
                    if is_reg:
                        wl = l0
                        wr = r0
                        if wl < min_samples_leaf or wr < min_samples_leaf or wl <= 0 or wr <= 0:
                            continue
                        score = l1 * l1 / wl + r1 * r1 / wr
                    else:
                        wl = l0 + l1
                        wr = r0 + r1
                        if wl < min_samples_leaf or wr < min_samples_leaf or wl <= 0 or wr <= 0:
                            continue
                        score = (l0 * l0 + l1 * l1) / wl + (r0 * r0 + r1 * r1) / wr
                    gain = score - parent_score
                    if gain > best_gain:
                        best_gain = gain
                        best_j = j
                        best_nominal = False
                        best_missleft = wl >= wr
                        best_thr = cb[q]
                continue
            # Missing values, and in a nominal column the categories too rare in this node to be placed on their
            # own evidence, form one pool that follows the split's default side (as unseen categories will).
            n_rare = 0

            # The order in which bins are scanned: natural for numeric, by target statistic for nominal.
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

            # Prefixes of the order (mode 0) and, for nominal columns, each category against the rest (mode 1).
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

        if best_j < 0:
            if buf >= 0:
                free[n_free] = buf
                n_free += 1
            continue

        f = feats[best_j]
        o_feature[node] = f
        o_thr[node] = best_thr if not best_nominal else 0
        o_missleft[node] = 1 if best_missleft else 0
        o_nominal[node] = 1 if best_nominal else 0
        o_cats[node, :] = best_cats
        o_gain[node] = best_gain

        # Stable partition: left samples first, in their original order.
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
                tmp[nr] = s
                tmp_w[nr] = iw[ii]
                tmp_c[nr] = ic[ii]
                tmp_wy[nr] = iwy[ii]
                nr += 1
        for q in range(nr):
            idx[nl + q] = tmp[q]
            iw[nl + q] = tmp_w[q]
            ic[nl + q] = tmp_c[q]
            iwy[nl + q] = tmp_wy[q]

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
                _build_histograms(pool[sbuf], Xb, feats, n_feats, idx, iw, ic, iwy, s_start, s_end, is_reg)
                P = pool[buf]
                S = pool[sbuf]
                for j in range(n_feats):
                    for b in range(256):
                        for k in range(n_stats):
                            P[j, b, k] -= S[j, b, k]
                kept = sbuf if sbuf != n_buf else -1
                buf_l, buf_r = (kept, buf) if small_left else (buf, kept)
            else:
                free[n_free] = buf
                n_free += 1

        lc = n_nodes
        rc = n_nodes + 1
        n_nodes += 2
        o_left[node] = lc
        o_right[node] = rc
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
    return n_nodes


@njit(parallel=True, cache=True)
def grow_trees(
    Xb, n, y_cls, y_reg, n_classes, is_reg, subspaces, subspace_sizes, is_nominal, seeds, bootstrap,
    max_depth, min_samples_leaf, split_ks, cap, min_category_weight,
    o_feature, o_thr, o_missleft, o_nominal, o_cats, o_left, o_right, o_value, o_gain, o_weight, o_n_nodes,
):
    """Grow ``len(seeds)`` trees, one per row of ``subspaces`` (feature ids, padded with -1), in parallel; tree ``t``
    draws ``split_ks[t]`` of its features at every split (0: all of them)."""
    for t in prange(seeds.shape[0]):
        o_n_nodes[t] = _grow_one(
            Xb, n, y_cls, y_reg, n_classes, is_reg, subspaces[t], subspace_sizes[t], is_nominal,
            seeds[t], bootstrap, max_depth, min_samples_leaf, split_ks[t], cap, min_category_weight,
            o_feature[t], o_thr[t], o_missleft[t], o_nominal[t], o_cats[t], o_left[t], o_right[t],
            o_value[t], o_gain[t], o_weight[t],
        )
