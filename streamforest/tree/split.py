"""The split criterion of the tree kernels: per-bin histograms of a node's samples, and the scan of a histogram for
the best split.

For every candidate feature of a node, a histogram of per-bin statistics (class counts for classification, weight
and weighted target sum for regression) is scanned for the best threshold (numeric) or best prefix of categories
ordered by their target statistic (nominal); missing values go to whichever side scores better (the default side
learned per node). The score maximised is the sum over the children of ``sum_k n_k^2 / W`` (Gini) or ``S^2 / W``
(variance).

Everything here is inlined into :func:`streamforest.tree.grow._grow_one`; the arrays a node's scan reads and
writes come in the named tuples below, made once per tree.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from streamforest.binning import BIN_WORDS, MISSING_BIN

# Index of a 64-bit word's lowest set bit: isolate the bit, multiply by a de Bruijn sequence, read the top six bits.
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_BIT_INDEX = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _BIT_INDEX[((1 << _i) * 0x03F79D71B4CB0A89 % 2**64) >> 58] = _i


@njit(inline="always")
def _pop_bin(word, bits):
    """The lowest bin set in word ``word`` of a bitmap (its bits ``bits``), and the bits without it."""
    low = bits & (~bits + np.uint64(1))
    return word * 64 + _BIT_INDEX[(low * _DEBRUIJN) >> np.uint64(58)], bits ^ low


class NodeBins(NamedTuple):
    """One feature's histogram in a node: ``hist`` ``(N_BINS, n_stats)`` by bin; ``stats`` and ``ids``, the bins
    present in the node, in bin order, and their ids; ``seen``, a bitmap of the bins touched; ``missing``, the missing
    values' statistics."""

    hist: np.ndarray
    stats: np.ndarray
    ids: np.ndarray
    seen: np.ndarray
    missing: np.ndarray


class ScanScratch(NamedTuple):
    """Work arrays of the general scan: the order of a nominal feature's categories (``keys``, ``cat_ids``,
    ``sorted_keys``, ``sorted_ids``, ``rare_ids``: present-bin positions) and the statistics of the sides of a trial
    split."""

    keys: np.ndarray
    cat_ids: np.ndarray
    sorted_keys: np.ndarray
    sorted_ids: np.ndarray
    rare_ids: np.ndarray
    left: np.ndarray
    right: np.ndarray
    trial: np.ndarray


class Split(NamedTuple):
    """The best split found so far: its gain, the feature's slot in the tree's subspace (-1: none), the threshold
    bin of a numeric split (the last bin of the node's samples on its left), whether missing values go left,
    whether it is nominal (its left categories are then in the tree's ``cats`` bitmap), and the first bin of the
    node's samples on the right of a numeric split (-1: none, only missing values are right)."""

    gain: float
    slot: int
    threshold: int
    missing_left: bool
    nominal: bool
    upper: int


@njit(inline="always")
def set_all(a, v) -> None:
    """``a[:] = v`` for a 1-D array, as a loop: the node loop of the tree kernels allocates nothing (see
    :func:`streamforest.tree.grow._grow_nodes`), and numba's slice assignments may allocate (a copy of the source,
    in case it overlaps the target)."""
    for k in range(a.shape[0]):
        a[k] = v


@njit(inline="always")
def copy_all(a, b) -> None:
    """``a[:] = b`` for 1-D arrays of the same length, as a loop (see :func:`set_all`)."""
    for k in range(a.shape[0]):
        a[k] = b[k]


@njit(inline="always")
def set_all_2d(a, v) -> None:
    """``a[:] = v`` for a 2-D array, as loops (see :func:`set_all`)."""
    for i in range(a.shape[0]):
        for k in range(a.shape[1]):
            a[i, k] = v


@njit(inline="always")
def fill_dense(Xb, f, samples, start, end, is_reg, h):
    """Add the statistics of feature ``f``'s bins in a node to ``h`` (missing values: its last row), tracking
    nothing: for large nodes (``dense_from``) and stored histograms, which are scanned bin by bin."""
    idx, iw, ic, iwy = samples
    if is_reg:
        for ii in range(start, end):
            b = Xb[f, idx[ii]]
            h[b, 0] += iw[ii]
            h[b, 1] += iwy[ii]
    else:
        for ii in range(start, end):
            h[Xb[f, idx[ii]], ic[ii]] += iw[ii]


@njit(inline="always")
def fill_dense_pair(Xb, f, g, samples, start, end, is_reg, h, k):
    """:func:`fill_dense` of two features, ``f`` into ``h`` and ``g`` into ``k``, in one pass over the samples."""
    idx, iw, ic, iwy = samples
    if is_reg:
        for ii in range(start, end):
            s = idx[ii]
            w = iw[ii]
            wy = iwy[ii]
            b = Xb[f, s]
            h[b, 0] += w
            h[b, 1] += wy
            b = Xb[g, s]
            k[b, 0] += w
            k[b, 1] += wy
    else:
        for ii in range(start, end):
            s = idx[ii]
            c = ic[ii]
            w = iw[ii]
            h[Xb[f, s], c] += w
            k[Xb[g, s], c] += w


@njit(inline="always")
def child_score(stats: np.ndarray, is_reg: bool) -> float:
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
def weight(stats: np.ndarray, is_reg: bool) -> float:
    if is_reg:
        return stats[0]
    w = 0.0
    for k in range(stats.shape[0]):
        w += stats[k]
    return w


@njit(inline="always")
def _fill_histogram(Xb, f, samples, start, end, is_reg, bins):
    """Add the statistics of feature ``f``'s bins in a node to ``bins.hist``, the missing values' to
    ``bins.missing``.

    A bitmap of the bins touched (``bins.seen``) lists them in order afterwards, so neither clearing nor scanning
    costs the (up to 255) bins a small node never sees.
    """
    idx, iw, ic, iwy = samples
    h, miss, seen = bins.hist, bins.missing, bins.seen
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
def _take_present(bins) -> int:
    """Move the touched bins of ``bins.hist`` to ``bins.ids`` and ``bins.stats`` in bin order, clearing the
    histogram and ``bins.seen``; returns how many bins are present."""
    seen, h, cb, hc = bins.seen, bins.hist, bins.ids, bins.stats
    n_present = 0
    for word in range(BIN_WORDS):
        bits = seen[word]
        while bits != np.uint64(0):
            b, bits = _pop_bin(word, bits)
            cb[n_present] = b
            for k in range(h.shape[1]):
                hc[n_present, k] = h[b, k]
                h[b, k] = 0.0
            n_present += 1
        seen[word] = np.uint64(0)
    return n_present


@njit(inline="always")
def _two_stats_trial(l0, l1, p0, p1, parent_score, is_reg, min_samples_leaf, j, thr, upper, best):
    """``best`` (a :class:`Split`) updated with the numeric split sending statistics ``(l0, l1)`` of the node's
    ``(p0, p1)`` left at threshold bin ``thr``, the next bin present being ``upper`` (two statistics, nothing
    missing: binary classification or regression). The scores are the ones :func:`_scan_general` computes, in
    scalars: this is the hot spot."""
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
    if gain > best.gain:
        return Split(gain, j, thr, wl >= wr, False, upper)
    return best


@njit(inline="always")
def _scan_two_stats_touched(j, bins, parent, parent_score, is_reg, min_samples_leaf, best):
    """The best threshold of a numeric feature with two statistics and nothing missing, read straight from the
    touched bins of ``bins.hist`` in bin order (and cleared with ``bins.seen`` as they are read): no copy to a
    compact list."""
    seen, h = bins.seen, bins.hist
    l0 = 0.0
    l1 = 0.0
    prev = -1
    for word in range(BIN_WORDS):
        bits = seen[word]
        while bits != np.uint64(0):
            b, bits = _pop_bin(word, bits)
            # The split after the previous bin; none after the last one.
            if prev >= 0:
                best = _two_stats_trial(l0, l1, parent[0], parent[1], parent_score, is_reg, min_samples_leaf, j, prev,
                                        b, best)
            l0 += h[b, 0]
            l1 += h[b, 1]
            h[b, 0] = 0.0
            h[b, 1] = 0.0
            prev = b
        seen[word] = np.uint64(0)
    return best


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
                                    b, best)
        l0 += h0
        l1 += h1
        prev = b
    return best


@njit(inline="always")
def _many_stats_trial(left, parent, parent_score, min_samples_leaf, j, thr, upper, best):
    """``best`` updated with the numeric split sending class counts ``left`` of the node's ``parent`` left at
    threshold bin ``thr``, the next bin present being ``upper``, nothing missing (more than two classes). The sums
    are :func:`_scan_general`'s, in its order (its missing values' zeros left out change no sum): the same
    gains, so the same trees, without its modes and missing-value sides."""
    wl = 0.0
    sl = 0.0
    wr = 0.0
    sr = 0.0
    for k in range(left.shape[0]):
        lk = left[k]
        rk = parent[k] - lk
        wl += lk
        sl += lk * lk
        wr += rk
        sr += rk * rk
    if wl < min_samples_leaf or wr < min_samples_leaf or wl <= 0 or wr <= 0:
        return best
    gain = (sl / wl + sr / wr) - parent_score
    if gain > best.gain:
        return Split(gain, j, thr, wl >= wr, False, upper)
    return best


@njit(inline="always")
def _scan_many_stats_touched(j, bins, parent, parent_score, min_samples_leaf, scan, best):
    """:func:`_scan_two_stats_touched` for classification of more than two classes, the left side's counts in
    ``scan.left``."""
    seen, h = bins.seen, bins.hist
    left = scan.left
    n_stats = left.shape[0]
    set_all(left, 0.0)
    prev = -1
    for word in range(BIN_WORDS):
        bits = seen[word]
        while bits != np.uint64(0):
            b, bits = _pop_bin(word, bits)
            if prev >= 0:
                best = _many_stats_trial(left, parent, parent_score, min_samples_leaf, j, prev, b, best)
            for k in range(n_stats):
                left[k] += h[b, k]
                h[b, k] = 0.0
            prev = b
        seen[word] = np.uint64(0)
    return best


@njit(inline="always")
def _scan_many_stats_bins(j, Hj, parent, parent_score, min_samples_leaf, scan, best, clear):
    """:func:`_scan_two_stats_bins` for classification of more than two classes."""
    left = scan.left
    n_stats = left.shape[0]
    set_all(left, 0.0)
    prev = -1
    for b in range(MISSING_BIN):
        w = 0.0
        for k in range(n_stats):
            w += Hj[b, k]
        if w <= 0:
            continue
        if prev >= 0:
            best = _many_stats_trial(left, parent, parent_score, min_samples_leaf, j, prev, b, best)
        for k in range(n_stats):
            left[k] += Hj[b, k]
            if clear:
                Hj[b, k] = 0.0
        prev = b
    return best


@njit(inline="always")
def _stored_histogram(Hj, is_reg, bins) -> int:
    """The present bins of a stored histogram, in order (``bins.ids``, ``bins.stats``), the missing ones in
    ``bins.missing``."""
    cb, hc, miss = bins.ids, bins.stats, bins.missing
    n_stats = miss.shape[0]
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
def _category_order(nominal, bins, n_present, parent, is_reg, n_classes, min_category_weight, scan):
    """The order in which the present bins are tried (``scan.cat_ids``): bin order (numeric), or by target
    statistic (nominal), the categories too rare in the node joining the missing values' statistics (their
    positions in ``scan.rare_ids``). Returns how many are ordered and how many are rare."""
    hc, miss = bins.stats, bins.missing
    keys, cat_ids, sorted_ids, rare_ids = scan.keys, scan.cat_ids, scan.sorted_ids, scan.rare_ids
    n_stats = miss.shape[0]
    if not nominal:
        for c in range(n_present):
            cat_ids[c] = c
        return n_present, 0
    n_rare = 0
    n_order = 0
    kmax = 0
    for k in range(n_stats):
        if parent[k] > parent[kmax]:
            kmax = k
    for c in range(n_present):
        wb = weight(hc[c], is_reg)
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
    _stable_sort(keys, cat_ids, scan.sorted_keys, sorted_ids, n_order)
    return n_order, n_rare


@njit(inline="always")
def _before(a: float, b: float) -> bool:
    """Whether ``a`` sorts before ``b`` as in numpy's sorts: by value, NaN last."""
    return a < b or (b != b and a == a)


@njit(inline="always")
def _stable_sort(keys, ids, key_buf, id_buf, n) -> None:
    """``ids[:n]`` (and ``keys[:n]``, one key per id) in the order of ``np.argsort(keys[:n], kind="mergesort")``:
    by key, ties in their order. A bottom-up merge sort through the buffers ``key_buf`` and ``id_buf``: the node
    loop that calls it allocates nothing (see :func:`streamforest.tree.grow._grow_nodes`)."""
    src_k, src_i, dst_k, dst_i = keys, ids, key_buf, id_buf
    width = 1
    passes = 0
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b = lo, mid
            for o in range(lo, hi):
                # The right run's key goes first only when strictly before the left's: ties keep their order.
                if a < mid and (b >= hi or not _before(src_k[b], src_k[a])):
                    dst_k[o] = src_k[a]
                    dst_i[o] = src_i[a]
                    a += 1
                else:
                    dst_k[o] = src_k[b]
                    dst_i[o] = src_i[b]
                    b += 1
        src_k, src_i, dst_k, dst_i = dst_k, dst_i, src_k, src_i
        width *= 2
        passes += 1
    if passes % 2 == 1:  # the sorted run is in the buffers
        for q in range(n):
            keys[q] = src_k[q]
            ids[q] = src_i[q]


@njit(inline="always")
def _scan_general(j, nominal, n_present, parent_score, data, min_leaf, min_category_weight, work, best):
    """The best split of one feature in the general case: any statistics, missing values, nominal categories.

    Missing values, and in a nominal column the categories too rare in this node to be placed on their own
    evidence, form one pool that follows the split's default side (as unseen categories will). Bins are scanned in
    their natural order (numeric) or by target statistic (nominal); the prefixes of that order are tried (mode 0)
    and, for nominal columns, each category against the rest (mode 1). ``work.cats`` receives the left categories
    of a better nominal split."""
    bins, scan, parent, best_cats = work.bins, work.scan, work.parent, work.cats
    hc, cb, miss = bins.stats, bins.ids, bins.missing
    cat_ids, rare_ids, left, right, trial = scan.cat_ids, scan.rare_ids, scan.left, scan.right, scan.trial
    is_reg = work.is_reg
    n_stats = miss.shape[0]
    best_gain, best_j, best_thr, best_missleft, best_nominal, best_upper = best
    n_order, n_rare = _category_order(nominal, bins, n_present, parent, is_reg, data.n_classes, min_category_weight,
                                      scan)
    w_miss = weight(miss, is_reg)

    # The last prefix puts every present value left: "present vs missing", tried when any are missing.
    n_modes = 2 if nominal and n_order > 2 else 1
    for mode in range(n_modes):
        set_all(left, 0.0)
        for q in range(n_order):
            if mode == 0 and q == n_order - 1 and w_miss == 0:
                break
            b = cat_ids[q]
            if mode == 1:
                set_all(left, 0.0)
            for k in range(n_stats):
                left[k] += hc[b, k]
            for k in range(n_stats):
                right[k] = parent[k] - miss[k] - left[k]
            w_left = weight(left, is_reg)
            w_right = weight(right, is_reg)
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
                    score = child_score(trial, is_reg) + child_score(right, is_reg)
                else:
                    for k in range(n_stats):
                        trial[k] = right[k] + miss[k]
                    wl = w_left
                    wr = w_right + w_miss
                    score = child_score(left, is_reg) + child_score(trial, is_reg)
                if wl < min_leaf or wr < min_leaf or wl <= 0 or wr <= 0:
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
                        best_upper = -1
                        set_all(best_cats, np.uint64(0))
                        for qq in range(q + 1 if mode == 0 else 1):
                            c = cb[cat_ids[qq] if mode == 0 else b]
                            best_cats[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
                        if best_missleft:
                            for qq in range(n_rare):
                                c = cb[rare_ids[qq]]
                                best_cats[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
                    else:
                        best_thr = cb[b]
                        best_upper = cb[cat_ids[q + 1]] if q + 1 < n_order else -1
    return Split(best_gain, best_j, best_thr, best_missleft, best_nominal, best_upper)


@njit(inline="always")
def midpoint_bin(values, f, threshold, upper) -> int:
    """The threshold bin nearest by value to midway between the node's values on either side of a numeric split at
    bin ``threshold`` whose right side starts at bin ``upper`` (as scikit-learn's trees place it): among the edges
    of the empty bins between them, the one nearest to the midpoint of the greatest value of bin ``threshold`` and
    the least of bin ``upper`` (``values``: :meth:`~streamforest.inputs.FeatureColumns.bin_values`). The node's
    samples go to the same sides; samples of the empty bins go to the side of the nearer value."""
    edges = values[f, 0]
    mid = 0.5 * (values[f, 2, threshold] + values[f, 1, upper])
    best = threshold
    gap = abs(edges[threshold] - mid)
    for t in range(threshold + 1, upper):
        d = abs(edges[t] - mid)
        if d >= gap:
            break  # the edges increase: past the nearest one they only move away
        best = t
        gap = d
    return best


@njit(inline="always")
def best_split(data, settings, work, n_cand, start, end, stored):
    """The best split of a node among its ``n_cand`` candidate features (``work.cand``), slot -1 if none beats a
    negligible gain; ``work.cats`` holds the left categories of a nominal one. ``stored`` is the node's stored
    histograms (an empty array when they are not kept)."""
    bins, parent, min_leaf = work.bins, work.parent, work.min_leaf
    h = bins.hist
    is_reg = work.is_reg
    n_stats = parent.shape[0]
    parent_score = child_score(parent, is_reg)
    best = Split(1e-12 * (abs(parent_score) + 1.0), -1, 0, False, False, -1)
    set_all(work.cats, np.uint64(0))
    for cj in range(n_cand):
        j = work.cand[cj]
        f = work.feats[j]
        nominal = data.is_nominal[f]
        # The common case (numeric, nothing missing) is scanned straight from the histogram, in scalars for two
        # statistics; the general scan works on a compact copy of the present bins.
        two_stats = not nominal and n_stats == 2
        many_stats = not nominal and n_stats > 2
        if stored.shape[0] > 0:
            if (two_stats or many_stats) and weight(stored[j, MISSING_BIN], is_reg) == 0:
                if two_stats:
                    best = _scan_two_stats_bins(j, stored[j], parent, parent_score, is_reg, min_leaf, best, False)
                else:
                    best = _scan_many_stats_bins(j, stored[j], parent, parent_score, min_leaf, work.scan, best,
                                                 False)
                continue
            n_present = _stored_histogram(stored[j], is_reg, bins)
        elif end - start >= settings.dense_from:
            fill_dense(data.columns, f, work.samples, start, end, is_reg, h)
            if (two_stats or many_stats) and weight(h[MISSING_BIN], is_reg) == 0:
                if two_stats:
                    best = _scan_two_stats_bins(j, h, parent, parent_score, is_reg, min_leaf, best, True)
                else:
                    best = _scan_many_stats_bins(j, h, parent, parent_score, min_leaf, work.scan, best, True)
                continue
            n_present = _stored_histogram(h, is_reg, bins)
            set_all_2d(h, 0.0)
        else:
            _fill_histogram(data.columns, f, work.samples, start, end, is_reg, bins)
            if two_stats and weight(bins.missing, is_reg) == 0:
                best = _scan_two_stats_touched(j, bins, parent, parent_score, is_reg, min_leaf, best)
                continue
            if many_stats and weight(bins.missing, is_reg) == 0:
                best = _scan_many_stats_touched(j, bins, parent, parent_score, min_leaf, work.scan, best)
                continue
            n_present = _take_present(bins)
        best = _scan_general(j, nominal, n_present, parent_score, data, min_leaf, settings.min_category_size, work,
                             best)
    return best
