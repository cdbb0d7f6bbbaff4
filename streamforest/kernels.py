"""Exact forest kernels between two sets of samples, each tree weighted by its generation's weight.

* ``"rf"`` (Vens & Costa, 2011): the common path length, normalised — the cosine between unhashed path
  encodings: ``sum_t w_t c_t(x, z) / sqrt(sum_t w_t l_t(x) * sum_t w_t l_t(z))`` with ``c_t`` the number of
  nodes both samples visit in tree ``t`` and ``l_t`` a path's length.
* ``"lca"`` (Torkkola & Tuv, 2005): ``sum_t w_t depth(LCA_t) / max(depth(leaf_t(x)), depth(leaf_t(z)))``.
* ``"proximity"`` (Breiman): the weighted share of trees in which both samples reach the same leaf.

Samples are routed once to their leaves (default side for missing values); pairs are then compared leaf against
leaf by walking parent pointers, block by block, so memory beyond the output stays bounded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from streamforest.tree import route
from streamforest.tree.model import Trees

KINDS = ("rf", "lca", "proximity")


@njit(parallel=True, cache=True)
def _kernel_block(leaves_x, leaves_z, offsets, parent, depth, tree_w, kind, out):
    n_trees = offsets.shape[0] - 1
    for a in prange(leaves_x.shape[0]):
        for b in range(leaves_z.shape[0]):
            acc = 0.0
            for t in range(n_trees):
                base = offsets[t]
                u = leaves_x[a, t]
                v = leaves_z[b, t]
                if kind == 2:
                    if u == v:
                        acc += tree_w[t]
                    continue
                du = depth[base + u]
                dv = depth[base + v]
                deeper = max(du, dv)
                while du > dv:
                    u = parent[base + u]
                    du -= 1
                while dv > du:
                    v = parent[base + v]
                    dv -= 1
                while u != v:
                    u = parent[base + u]
                    v = parent[base + v]
                    du -= 1
                if kind == 0:
                    acc += tree_w[t] * (du + 1)
                else:
                    acc += tree_w[t] * (du / deeper if deeper > 0 else 1.0)
            out[a, b] = acc


def kernel_matrix(
    trees: Trees, tree_weights: np.ndarray, Xb: np.ndarray, Zb: np.ndarray, kind: str = "rf",
    block_size: int = 2048,
) -> np.ndarray:
    """The ``kind`` kernel between binned samples ``Xb`` and ``Zb`` (features x samples): ``(n_x, n_z)``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    parent, depth = trees.parents_and_depths()
    w = np.ascontiguousarray(tree_weights, dtype=np.float64)
    k = KINDS.index(kind)
    out = np.empty((Xb.shape[1], Zb.shape[1]), dtype=np.float64)
    leaves_z = route.leaves(trees, Zb, Zb.shape[1])
    for start in range(0, Xb.shape[1], block_size):
        stop = min(start + block_size, Xb.shape[1])
        leaves_x = route.leaves(trees, np.ascontiguousarray(Xb[:, start:stop]), stop - start)
        _kernel_block(leaves_x, leaves_z, trees.offsets, parent, depth, w, k, out[start:stop])
    if kind == "rf":
        # Path length of a sample = depth of its leaf + 1; the normaliser is the weighted path length.
        def norms(leaves: np.ndarray) -> np.ndarray:
            d = depth[trees.offsets[:-1][None, :] + leaves] + 1
            return d @ w

        nx = np.concatenate([norms(route.leaves(trees, np.ascontiguousarray(Xb[:, s:s + block_size]),
                                                min(block_size, Xb.shape[1] - s)))
                             for s in range(0, Xb.shape[1], block_size)]) if Xb.shape[1] else np.zeros(0)
        nz = norms(leaves_z)
        out /= np.sqrt(np.outer(nx, nz))
    return out


def forest_kernel(forest: Any, X: Any, Z: Any = None, kind: str = "rf", block_size: int = 2048) -> np.ndarray:
    """The exact ``kind`` kernel of a fitted :class:`~streamforest.FeatureStreamForest` between ``X`` and ``Z``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamforest import FeatureStreamForest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = (X[:, 0] > 0).astype(int)
    >>> f = FeatureStreamForest(trees_per_generation=8, random_state=0)
    >>> _ = f.add_feature("a", X[:, 0], y=y); _ = f.add_feature("b", X[:, 1])
    >>> K = forest_kernel(f, X[:5], kind="proximity")
    >>> K.shape, bool(np.allclose(np.diag(K), 1.0))
    ((5, 5), True)
    """
    trees, tree_w, _ = forest.alive_trees()
    Xb = forest.binned(X)
    Zb = Xb if Z is None else forest.binned(Z, "Z")
    return kernel_matrix(trees, tree_w, Xb, Zb, kind, block_size)
