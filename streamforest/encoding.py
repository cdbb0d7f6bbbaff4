"""Hashed tree-path encodings (Vens & Costa, 2011): every node a sample visits in every tree is one feature.

A node's identity is ``(tree seed, node index)``. Tree seeds are derived from the forest's seed, the generation id
and the tree's index in it (:func:`streamforest.rng.derive_seed`), so the identity survives pruning, merging,
saving and restarting; it is hashed with a fixed 64-bit mixer (:func:`streamforest.rng.mix64`), never with
Python's salted ``hash``, so an encoding is the same in every process and on every machine.

Routing is numba, parallel over samples, straight into CSR arrays: one pass into room for the longest possible
path of every row, then the gaps closed in place (with ``missing="split"`` a row's length is not bounded by the
depths, so a counting pass comes first). Each row is sorted by a radix sort and its collisions are summed, so that
every row comes out canonical (sorted, no duplicates).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from streamforest.binning import MISSING_BIN
from streamforest.inputs import is_int
from streamforest.rng import mix64
from streamforest.tree.model import Trees
from streamforest.tree.walk import SAMPLE_BLOCK, goes_left

#: Width of the hashed encodings unless told otherwise.
DEFAULT_N_COMPONENTS = 2**18
MISSING_MODES = ("default", "random", "split")
VALUE_MODES = ("binary", "weighted")
_SIGN_BIT = np.uint64(63)


@njit(inline="always")
def _node_key(tree_seed, node):
    return mix64(tree_seed ^ mix64(np.uint64(node + 1)))


class EncodeSettings(NamedTuple):
    """How :func:`_encode` walks and writes: missing-value mode (index in ``MISSING_MODES``), leaves only, unit
    values (binary, no sign, no split mass), radix digit bits and passes, and the most nodes of one tree."""

    mode: int
    leaves_only: bool
    unit: bool
    digit: int
    passes: int
    max_nodes: int


class Rows(NamedTuple):
    """CSR rows being written: entries per row, row starts, column indices and values."""

    counts: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray


@njit(inline="always")
def _direction(trees, g, b, mode, sample_key, node_key) -> int:
    """0 = left, 1 = right, 2 = both (a missing value in "split" mode)."""
    if b == MISSING_BIN:
        if mode == 0:
            return 0 if trees.missing_left[g] == 1 else 1
        if mode == 1:
            return int(mix64(sample_key ^ node_key) >> _SIGN_BIT)
        return 2
    return 0 if goes_left(trees, g, b) else 1


@njit(cache=True)
def _walk(trees, Xb, i, base, seed, mode, sample_key, leaves_only, scratch):
    """Nodes visited by sample ``i`` in one tree (local indices) and their mass, into ``scratch``'s last two
    arrays (its first two are the walk's stack); returns how many."""
    stack_node, stack_mass, out_node, out_mass = scratch
    left = trees.left
    right = trees.right
    k = 0
    stack_node[0] = 0
    stack_mass[0] = 1.0
    sp_ = 1
    while sp_ > 0:
        sp_ -= 1
        node = stack_node[sp_]
        mass = stack_mass[sp_]
        g = base + node
        is_leaf = left[g] < 0
        if is_leaf or not leaves_only:
            out_node[k] = node
            out_mass[k] = mass
            k += 1
        if is_leaf:
            continue
        d = _direction(trees, g, Xb[trees.feature[g], i], mode, sample_key, _node_key(seed, node))
        if d == 2:
            stack_node[sp_] = right[g]
            stack_mass[sp_] = mass * 0.5
            sp_ += 1
            stack_node[sp_] = left[g]
            stack_mass[sp_] = mass * 0.5
            sp_ += 1
        elif d == 0:
            stack_node[sp_] = left[g]
            stack_mass[sp_] = mass
            sp_ += 1
        else:
            stack_node[sp_] = right[g]
            stack_mass[sp_] = mass
            sp_ += 1
    return k


_MAX_DIGIT = 11  # radix digits of at most 11 bits: 2,048 buckets stay in L1


@njit(parallel=True, cache=True)
def _node_table(offsets, seeds, scale, n_components, hashed, signed, node_col, node_val):
    """Every node's output column and value, computed once per call rather than once per visit."""
    for t in prange(offsets.shape[0] - 1):
        for node in range(offsets[t + 1] - offsets[t]):
            g = offsets[t] + node
            v = scale[t]
            if hashed:
                key = _node_key(seeds[t], node)
                node_col[g] = int(key % np.uint64(n_components))
                if signed and (key >> _SIGN_BIT) == np.uint64(1):
                    v = -v
            else:
                node_col[g] = g
            node_val[g] = v


@njit(cache=True)
def _radix_sort(cols, vals, n, tmp_cols, tmp_vals, hist, digit, passes, with_vals):
    """Stable LSD radix sort of ``cols[:n]`` (carrying ``vals``); returns True if the result is in the tmp arrays.

    A row holds a few thousand columns below ``n_components``: two or three counting passes beat a comparison
    sort by an order of magnitude there, and stability keeps the summing order of colliding values fixed.
    """
    mask = (1 << digit) - 1
    n_buckets = 1 << digit
    in_tmp = False
    shift = 0
    for _ in range(passes):
        src_c, dst_c = (tmp_cols, cols) if in_tmp else (cols, tmp_cols)
        src_v, dst_v = (tmp_vals, vals) if in_tmp else (vals, tmp_vals)
        hist[: n_buckets + 1] = 0
        for q in range(n):
            hist[((src_c[q] >> shift) & mask) + 1] += 1
        for b in range(n_buckets):
            hist[b + 1] += hist[b]
        for q in range(n):
            c = src_c[q]
            d = (c >> shift) & mask
            p = hist[d]
            hist[d] = p + 1
            dst_c[p] = c
            if with_vals:
                dst_v[p] = src_v[q]
        in_tmp = not in_tmp
        shift += digit
    return in_tmp


@njit(parallel=True, cache=True)
def _encode(trees, seeds, Xb, m, table, settings, sample_keys, rows, fill):
    """Encode samples ``0 .. m-1`` into ``rows`` (``fill``), or only count each row's entries (not ``fill``)."""
    mode, leaves_only, unit, digit, passes, max_nodes = settings
    counts, indptr, indices, data = rows
    node_col = table.col
    node_val = table.val
    offsets = trees.offsets
    left = trees.left
    right = trees.right
    n_trees = offsets.shape[0] - 1
    n_blocks = (m + SAMPLE_BLOCK - 1) // SAMPLE_BLOCK
    for blk in prange(n_blocks):
        # Scratch space per block of rows, not per row: allocation stays off the per-sample path.
        scratch = (np.empty(max_nodes, dtype=np.int64), np.empty(max_nodes, dtype=np.float64),
                   np.empty(max_nodes, dtype=np.int64), np.empty(max_nodes, dtype=np.float64))
        out_node = scratch[2]
        out_mass = scratch[3]
        width = 1
        if fill:
            for i in range(blk * SAMPLE_BLOCK, min(m, (blk + 1) * SAMPLE_BLOCK)):
                width = max(width, counts[i])
        cols = np.empty(width, dtype=np.int64)
        vals = np.empty(width if not unit else 1, dtype=np.float64)
        tmp_cols = np.empty(width, dtype=np.int64)
        tmp_vals = np.empty(width if not unit else 1, dtype=np.float64)
        hist = np.empty((1 << digit) + 1, dtype=np.int64)
        for i in range(blk * SAMPLE_BLOCK, min(m, (blk + 1) * SAMPLE_BLOCK)):
            pos = 0
            for t in range(n_trees):
                base = offsets[t]
                if mode == 2:
                    # Missing values may send a sample down both branches: walk a stack.
                    k = _walk(trees, Xb, i, base, seeds[t], mode, sample_keys[i], leaves_only, scratch)
                    if fill:
                        for q in range(k):
                            cols[pos + q] = node_col[base + out_node[q]]
                            vals[pos + q] = out_mass[q] * node_val[base + out_node[q]]
                    pos += k
                    continue
                node = 0
                while True:
                    g = base + node
                    is_leaf = left[g] < 0
                    if fill and (is_leaf or not leaves_only):
                        cols[pos] = node_col[g]
                        if not unit:
                            vals[pos] = node_val[g]
                    if is_leaf or not leaves_only:
                        pos += 1
                    if is_leaf:
                        break
                    d = _direction(trees, g, Xb[trees.feature[g], i], mode, sample_keys[i],
                                   _node_key(seeds[t], node) if mode == 1 else np.uint64(0))
                    node = left[g] if d == 0 else right[g]
            if not fill:
                counts[i] = pos
                continue
            in_tmp = _radix_sort(cols, vals, pos, tmp_cols, tmp_vals, hist, digit, passes, not unit)
            sc = tmp_cols if in_tmp else cols
            sv = tmp_vals if in_tmp else vals
            # Sum collisions in the stable order, so every row is canonical and the same in any run.
            start = indptr[i]
            u = -1
            last = -1
            acc = 0.0
            for q in range(pos):
                c = sc[q]
                if c != last:
                    if u >= 0:
                        data[start + u] = acc
                    u += 1
                    indices[start + u] = c
                    acc = 0.0
                    last = c
                acc += 1.0 if unit else sv[q]
            if u >= 0:
                data[start + u] = acc
            counts[i] = u + 1


@njit(cache=True)
def _compact(m, indptr, counts, indices, data):
    """Close the gaps between rows in place, front to back (a row only ever moves towards the front)."""
    dst = 0
    for i in range(m):
        src = indptr[i]
        indptr[i] = dst
        if src != dst:
            for q in range(counts[i]):
                indices[dst + q] = indices[src + q]
                data[dst + q] = data[src + q]
        dst += counts[i]
    indptr[m] = dst


class NodeTable(NamedTuple):
    """What an encoding needs of a packed forest besides routing: every node's column and value, and the most
    entries a single-path row can hold (the sum over trees of the deepest leaf's depth + 1). A forest keeps its
    table while it does not change, so that encoding a few rows does not pay for all nodes."""

    col: np.ndarray
    val: np.ndarray
    path_bound: int


def node_table(trees: Trees, seeds: np.ndarray, tree_weights: np.ndarray, n_components: int | None,
               values: str = "binary", signed: bool = False) -> NodeTable:
    """The :class:`NodeTable` of ``trees`` for these encoding arguments."""
    hashed = n_components is not None
    dim = int(n_components) if hashed else trees.n_nodes
    scale = np.sqrt(tree_weights) if values == "weighted" else np.ones(trees.n_trees)
    col = np.empty(trees.n_nodes, dtype=np.int64)
    val = np.empty(trees.n_nodes, dtype=np.float64)
    _node_table(trees.offsets, seeds.astype(np.uint64), scale.astype(np.float64), max(dim, 1), hashed, signed, col,
                val)
    depth = trees.depth_of_nodes()
    deepest = np.maximum.reduceat(depth, trees.offsets[:-1]) if trees.n_nodes else np.zeros(0, dtype=np.int64)
    return NodeTable(col, val, int(deepest.sum()) + trees.n_trees)


def sample_keys_from_ids(ids: Any, m: int) -> np.ndarray:
    """Stable 64-bit keys for samples (used by ``missing="random"``): integers as they are, strings by BLAKE2b."""
    if ids is None:
        return np.arange(m, dtype=np.uint64)
    ids = np.asarray(ids)
    if ids.shape != (m,):
        raise ValueError(f"sample_ids must have one id per row ({m}), got shape {ids.shape}")
    if ids.dtype.kind in "iu":
        return ids.astype(np.uint64)
    import hashlib

    return np.array(
        [int.from_bytes(hashlib.blake2b(str(v).encode(), digest_size=8).digest(), "little") for v in ids.tolist()],
        dtype=np.uint64,
    )


def check_arguments(n_components: int | None, values: str, missing: str) -> None:
    """Refuse bad encoding arguments with a message that names them."""
    if values not in VALUE_MODES:
        raise ValueError(f"values must be one of {VALUE_MODES}, got {values!r}")
    if missing not in MISSING_MODES:
        raise ValueError(f"missing must be one of {MISSING_MODES}, got {missing!r}")
    if n_components is not None and (not is_int(n_components) or n_components <= 0):
        raise ValueError(f"n_components must be a positive integer (or None for unhashed), got {n_components!r}")


def encode_binned(
    trees: Trees,
    seeds: np.ndarray,
    tree_weights: np.ndarray,
    Xb: np.ndarray,
    n_components: int | None,
    values: str = "binary",
    leaves_only: bool = False,
    missing: str = "default",
    signed: bool = False,
    sample_keys: np.ndarray | None = None,
    table: NodeTable | None = None,
) -> sp.csr_matrix:
    """Encode binned samples ``Xb`` (features x samples) through ``trees``; see ``FeatureStreamForest.encode``."""
    check_arguments(n_components, values, missing)
    if table is None:
        table = node_table(trees, seeds, tree_weights, n_components, values, signed)
    hashed = n_components is not None
    m = Xb.shape[1]
    dim = int(n_components) if hashed else trees.n_nodes
    keys = np.arange(m, dtype=np.uint64) if sample_keys is None else sample_keys.astype(np.uint64)
    max_nodes = int(np.diff(trees.offsets).max()) + 1 if trees.n_trees else 1
    mode = MISSING_MODES.index(missing)
    unit = values == "binary" and mode != 2 and not signed
    bits = max(1, int(dim - 1).bit_length())
    passes = -(-bits // _MAX_DIGIT)
    settings = EncodeSettings(mode, bool(leaves_only), unit, -(-bits // passes), passes, max_nodes)
    args = (trees, seeds.astype(np.uint64), Xb, m, table, settings, keys)
    counts = np.zeros(m, dtype=np.int64)
    idx_dtype = np.int32 if dim < 2**31 else np.int64
    if mode != 2:
        # One node per level per tree: a row holds at most sum(depth + 1) entries, so one routing pass suffices.
        bound = trees.n_trees if leaves_only else table.path_bound
        counts[:] = bound
    else:
        _encode(*args, Rows(counts, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=idx_dtype),
                            np.zeros(0, np.float32)), False)
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=idx_dtype)
    data = np.empty(indptr[-1], dtype=np.float32)
    _encode(*args, Rows(counts, indptr, indices, data), True)
    if counts.sum() != indptr[-1]:
        # Compacting in place and shrinking (realloc) costs one pass over memory that is already mapped, where a
        # copy into new arrays would fault in fresh pages and briefly double the footprint.
        _compact(m, indptr, counts, indices, data)
        indices.resize(indptr[-1], refcheck=False)
        data.resize(indptr[-1], refcheck=False)
    if indptr[-1] < 2**31 and idx_dtype == np.int32:
        indptr = indptr.astype(np.int32)
    out = sp.csr_matrix((data, indices, indptr), shape=(m, dim))
    if signed:
        # Opposite signs that collided cancel: drop the zeros rather than publish them.
        out.eliminate_zeros()
    out.has_sorted_indices = True
    return out
