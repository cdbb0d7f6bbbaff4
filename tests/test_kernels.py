"""Exact forest kernels (rf, lca, proximity) against encodings and pure-Python walks of the flat tree arrays."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from helpers import bin_for, feed_columns, mixed_stream, path_list, take_rows

import streamforest
from streamforest import FeatureStreamForest
from streamforest.kernels import KINDS, forest_kernel
from streamforest.tree import route

N_X, N_Z = 37, 11  # not multiples of the block sizes tried below


@pytest.fixture(scope="module")
def stream():
    return mixed_stream(n=150, seed=1)


@pytest.fixture(scope="module")
def forest(stream):
    cols, y = stream
    f = FeatureStreamForest(trees_per_generation=4, max_depth=4, prune_threshold=0.0, random_state=3)
    feed_columns(f, cols, y)
    _, w, _ = f.alive_trees()
    assert len(np.unique(np.round(w, 12))) > 1  # the tree weights really differ
    return f


@pytest.fixture(scope="module")
def X(stream):
    return take_rows(stream[0], slice(0, N_X))


@pytest.fixture(scope="module")
def Z(stream):
    return take_rows(stream[0], slice(100, 100 + N_Z))


@pytest.fixture(scope="module")
def paths(forest, stream):
    """Pure-Python root-to-leaf paths of every row of the stream in every tree."""
    trees, _, _ = forest.alive_trees()
    Xb = bin_for(forest, stream[0])
    return [[path_list(trees, t, Xb[:, i]) for t in range(trees.n_trees)] for i in range(Xb.shape[1])]


def python_kernel(forest, paths, rows_x, rows_z, kind: str) -> np.ndarray:
    _, w, _ = forest.alive_trees()
    out = np.zeros((len(rows_x), len(rows_z)))
    for a, i in enumerate(rows_x):
        for b, j in enumerate(rows_z):
            acc, len_x, len_z = 0.0, 0.0, 0.0
            for t, wt in enumerate(w):
                p, q = paths[i][t], paths[j][t]
                common = 0
                while common < min(len(p), len(q)) and p[common] == q[common]:
                    common += 1
                if kind == "proximity":
                    acc += wt * (p[-1] == q[-1])
                elif kind == "lca":
                    deeper = max(len(p), len(q)) - 1
                    acc += wt * ((common - 1) / deeper if deeper > 0 else 1.0)
                else:
                    acc += wt * common
                    len_x += wt * len(p)
                    len_z += wt * len(q)
            out[a, b] = acc / np.sqrt(len_x * len_z) if kind == "rf" else acc
    return out


def cosine(A, B) -> np.ndarray:
    G = (A @ B.T).toarray().astype(np.float64)
    na = np.sqrt(np.asarray(A.multiply(A).sum(axis=1), dtype=np.float64).ravel())
    nb = np.sqrt(np.asarray(B.multiply(B).sum(axis=1), dtype=np.float64).ravel())
    return G / np.outer(na, nb)


# ----------------------------------------------------------------------------- against independent computations


def test_rf_kernel_is_the_cosine_of_unhashed_weighted_encodings(forest, X, Z):
    EX = forest.encode(X, n_components=None, values="weighted")
    EZ = forest.encode(Z, n_components=None, values="weighted")
    K = forest_kernel(forest, X, kind="rf")
    np.testing.assert_allclose(K, cosine(EX, EX), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(forest_kernel(forest, X, Z, kind="rf"), cosine(EX, EZ), rtol=1e-5, atol=1e-6)
    assert np.ptp(K) > 0.5  # not a constant matrix
    # The binary (unweighted) encodings give another kernel: the weights matter.
    EB = forest.encode(X, n_components=None)
    assert np.abs(cosine(EB, EB) - K).max() > 1e-3


@pytest.mark.parametrize("kind", KINDS)
def test_kernels_match_a_pure_python_walk_of_the_trees(forest, X, Z, paths, kind):
    rows_x, rows_z = list(range(N_X)), list(range(100, 100 + N_Z))
    np.testing.assert_allclose(forest_kernel(forest, X, kind=kind), python_kernel(forest, paths, rows_x, rows_x, kind),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(forest_kernel(forest, X, Z, kind=kind),
                               python_kernel(forest, paths, rows_x, rows_z, kind), rtol=1e-12, atol=1e-12)


def test_proximity_is_the_weighted_share_of_trees_with_the_same_leaf(forest, X, Z):
    trees, w, _ = forest.alive_trees()
    lx = route.leaves(trees, bin_for(forest, X), N_X)
    lz = route.leaves(trees, bin_for(forest, Z), N_Z)
    expected = ((lx[:, None, :] == lz[None, :, :]) * w).sum(axis=2)
    np.testing.assert_allclose(forest_kernel(forest, X, Z, kind="proximity"), expected, rtol=1e-12, atol=1e-15)
    assert ((expected > 0) & (expected < 1)).any()  # some pairs share some leaves but not all
    assert len(np.unique(np.round(expected, 9))) > 3


def test_lca_kernel_of_a_stump_forest_is_one(stream):
    """Depth-0 trees (single leaves): every pair shares the root, and max leaf depth 0 counts as 1."""
    cols, y = stream
    f = FeatureStreamForest(trees_per_generation=3, max_depth=1, min_samples_leaf=1000, random_state=0)
    feed_columns(f, {"x0": cols["x0"]}, y)
    trees, _, _ = f.alive_trees()
    assert np.all(trees.left < 0)
    for kind in KINDS:
        np.testing.assert_allclose(forest_kernel(f, {"x0": cols["x0"][:9]}, kind=kind), 1.0, rtol=1e-12)


# ----------------------------------------------------------------------------- properties


@pytest.mark.parametrize("kind", KINDS)
def test_kernels_are_symmetric_with_unit_diagonal_in_the_unit_interval(forest, X, kind):
    K = forest_kernel(forest, X, kind=kind)
    assert K.shape == (N_X, N_X) and K.dtype == np.float64
    np.testing.assert_array_equal(K, K.T)
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=1e-12)
    assert K.min() >= 0.0 and K.max() <= 1.0 + 1e-12
    assert K.min() < 0.9  # informative: not every pair is alike
    np.testing.assert_allclose(forest_kernel(forest, X, X, kind=kind), K, rtol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_kernel_between_two_sets_is_a_block_of_the_joint_kernel(forest, X, Z, kind):
    joint = forest_kernel(forest, {k: np.concatenate([X[k], Z[k]]) for k in X}, kind=kind)
    K = forest_kernel(forest, X, Z, kind=kind)
    assert K.shape == (N_X, N_Z)
    np.testing.assert_allclose(K, joint[:N_X, N_X:], rtol=1e-12)
    np.testing.assert_allclose(forest_kernel(forest, Z, X, kind=kind), K.T, rtol=1e-12)


@pytest.mark.parametrize("block_size", [7, N_X - 1, 10_000])
@pytest.mark.parametrize("kind", KINDS)
def test_blocked_computation_equals_unblocked(forest, X, Z, kind, block_size):
    """Pairs are computed alike in any block; only rf's normaliser (a matrix product) may round differently."""
    rtol = 1e-14 if kind == "rf" else 0.0
    for Z_ in (None, Z):
        np.testing.assert_allclose(forest_kernel(forest, X, Z_, kind=kind, block_size=block_size),
                                   forest_kernel(forest, X, Z_, kind=kind), rtol=rtol, atol=0)


def test_kernel_takes_arrays_in_arrival_order_and_mappings(forest, X):
    arr = np.column_stack([X[name] for name in forest.feature_names_in_])  # object array (the nominal column)
    for kind in KINDS:
        np.testing.assert_array_equal(forest_kernel(forest, arr, kind=kind), forest_kernel(forest, X, kind=kind))


# ----------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize("kind", ["RF", "cosine", "", None])
def test_unknown_kind_is_refused(forest, X, kind):
    with pytest.raises(ValueError, match="kind"):
        forest_kernel(forest, X, kind=kind)


@pytest.mark.parametrize("block_size", [0, -7, 2.5, "7", None])
def test_bad_block_size_is_refused(forest, X, block_size):
    with pytest.raises(ValueError, match="block_size"):
        forest_kernel(forest, X, block_size=block_size)


def test_kernel_refuses_wrong_columns_and_unfitted_forests(forest, X):
    with pytest.raises(ValueError, match="columns"):
        forest_kernel(forest, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="columns"):
        forest_kernel(forest, X, np.zeros((3, 5)))
    with pytest.raises(ValueError, match="no trees"):
        forest_kernel(FeatureStreamForest(random_state=0), np.zeros((3, 1)))


# ----------------------------------------------------------------------------- the kernels' own shape

MAX_KERNEL_PARAMETERS = 12


def _numba_kernels(root: Path) -> list[tuple[str, str, int]]:
    """Every function decorated with numba's ``njit``/``jit`` under ``root``: (file, name, parameter count)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name in ("njit", "jit"):
                    a = node.args
                    count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                    found.append((str(path.relative_to(root.parent)), node.name, count))
                    break
    return found


def test_no_numba_kernel_takes_more_than_twelve_parameters():
    # Arrays that travel together go in a named tuple shared by the kernels that use them, not in long argument lists.
    kernels = _numba_kernels(Path(streamforest.__file__).parent)
    assert len(kernels) > 40  # the walk really finds the kernels (grow, split, route, encoding, render, ...)
    too_long = [k for k in kernels if k[2] > MAX_KERNEL_PARAMETERS]
    assert not too_long, f"numba kernels with more than {MAX_KERNEL_PARAMETERS} parameters: {too_long}"
