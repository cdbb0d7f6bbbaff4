"""Hashed tree-path encodings: exact (unhashed) contents, hashing, missing values, determinism, deltas, errors."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from helpers import bin_for, feed_columns, mixed_stream, take_rows, tree_path

from streamforest import FeatureStreamForest
from streamforest.generations import DELTA_WINDOW
from streamforest.tree import route

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
FOREST_KW = dict(trees_per_generation=4, max_depth=3, prune_threshold=0.0, random_state=7)


@pytest.fixture(scope="module")
def stream():
    return mixed_stream(n=160, seed=0)


@pytest.fixture(scope="module")
def forest(stream):
    cols, y = stream
    f = FeatureStreamForest(**FOREST_KW)
    feed_columns(f, cols, y)
    trees, w, _ = f.alive_trees()
    # Preconditions of the tests below: the weights differ, both kinds of splits occur, some splits see missing.
    assert len(np.unique(np.round(w, 12))) > 1
    split = trees.left >= 0
    assert trees.nominal[split].any() and not trees.nominal[split].all()
    return f


@pytest.fixture(scope="module")
def X(stream):
    return take_rows(stream[0], slice(0, 40))


def expected_dense(forest, columns, mode="default", leaves_only=False, values="binary") -> np.ndarray:
    """The unhashed encoding computed in pure Python from the flat tree arrays."""
    trees, w, _ = forest.alive_trees()
    Xb = bin_for(forest, columns)
    scale = np.sqrt(w) if values == "weighted" else np.ones(trees.n_trees)
    out = np.zeros((Xb.shape[1], trees.n_nodes))
    for i in range(Xb.shape[1]):
        for t in range(trees.n_trees):
            base = int(trees.offsets[t])
            for node, mass in tree_path(trees, t, Xb[:, i], mode).items():
                if leaves_only and trees.left[base + node] >= 0:
                    continue
                out[i, base + node] = mass * scale[t]
    return out


def path_lengths(forest, columns) -> np.ndarray:
    """Per sample and tree, the number of nodes on the default path (leaf depth + 1), via route.leaves."""
    trees, _, _ = forest.alive_trees()
    Xb = bin_for(forest, columns)
    leaves = route.leaves(trees, Xb, Xb.shape[1])
    return trees.depth_of_nodes()[trees.offsets[:-1][None, :] + leaves].astype(np.int64) + 1


def canonical(E) -> sp.csr_matrix:
    E = sp.csr_matrix(E, copy=True)
    E.sum_duplicates()
    E.eliminate_zeros()
    return E


def assert_csr_equal(a, b) -> None:
    """Exactly equal as matrices (explicit zeros ignored)."""
    a, b = canonical(a), canonical(b)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)


def row_groups_by_tree(forest, E) -> np.ndarray:
    """Sum of each unhashed row over each tree's columns: ``(n, n_trees)``."""
    trees, _, _ = forest.alive_trees()
    tree_of_col = np.repeat(np.arange(trees.n_trees), np.diff(trees.offsets))
    onehot = sp.csr_matrix((np.ones(trees.n_nodes), (np.arange(trees.n_nodes), tree_of_col)))
    return (E.astype(np.float64) @ onehot).toarray()


# ----------------------------------------------------------------------------- unhashed: exactly the visited nodes


@pytest.mark.parametrize("leaves_only", [False, True])
@pytest.mark.parametrize("mode", ["default", "split"])
def test_unhashed_encoding_is_the_visited_nodes_with_their_mass(forest, X, mode, leaves_only):
    E = forest.encode(X, n_components=None, missing=mode, leaves_only=leaves_only)
    trees, _, _ = forest.alive_trees()
    assert E.shape == (40, trees.n_nodes)
    np.testing.assert_array_equal(E.toarray(), expected_dense(forest, X, mode, leaves_only))


def test_leaves_only_has_one_leaf_per_tree_matching_route_leaves(forest, X):
    trees, _, _ = forest.alive_trees()
    E = forest.encode(X, n_components=None, leaves_only=True)
    assert np.all(np.diff(E.indptr) == trees.n_trees)
    leaves = route.leaves(trees, bin_for(forest, X), 40)
    expected = np.sort(trees.offsets[:-1][None, :] + leaves, axis=1)
    np.testing.assert_array_equal(E.indices.reshape(40, trees.n_trees), expected)
    np.testing.assert_array_equal(E.data, 1.0)


def test_weighted_values_are_root_weights_and_squared_norm_is_weighted_path_length(forest, X):
    _, w, _ = forest.alive_trees()
    E = forest.encode(X, n_components=None, values="weighted")
    np.testing.assert_allclose(E.toarray(), expected_dense(forest, X, values="weighted"), rtol=1e-6)
    norms = np.asarray(E.multiply(E).sum(axis=1)).ravel()
    np.testing.assert_allclose(norms, path_lengths(forest, X) @ w, rtol=1e-5)
    # Leaves-only weighted rows: one sqrt(w_t) per tree, squared norm 1 (the weights sum to 1).
    L = forest.encode(X, n_components=None, values="weighted", leaves_only=True)
    np.testing.assert_allclose(np.asarray(L.multiply(L).sum(axis=1)).ravel(), 1.0, rtol=1e-5)


# ----------------------------------------------------------------------------- hashing


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("n_components", [1, 7, 2**10, 2**30, None])
def test_rows_are_canonical_float32_of_the_requested_width(forest, X, n_components, signed):
    trees, _, _ = forest.alive_trees()
    E = forest.encode(X, n_components=n_components, signed=signed)
    assert isinstance(E, sp.csr_matrix)
    assert E.dtype == np.float32
    assert E.shape == (40, n_components if n_components is not None else trees.n_nodes)
    assert E.has_canonical_format
    visited = path_lengths(forest, X).sum(axis=1)
    for i in range(40):
        cols = E.indices[E.indptr[i]:E.indptr[i + 1]]
        assert np.all(np.diff(cols) > 0)  # sorted, no duplicates
        assert cols.size <= visited[i]
        assert cols.size == 0 or 0 <= cols.min() <= cols.max() < E.shape[1]
    if not signed:
        np.testing.assert_array_equal(np.asarray(E.sum(axis=1)).ravel(), visited)  # collisions are summed
    if n_components == 1:
        np.testing.assert_array_equal(E.indices, 0)


def test_wide_hashing_without_collisions_gives_path_lengths(forest, X):
    E = forest.encode(X, n_components=2**30)
    lengths = path_lengths(forest, X)
    assert np.all(lengths >= 1) and lengths.max() > 1
    visited = lengths.sum(axis=1)
    np.testing.assert_array_equal(np.diff(E.indptr), visited)  # no collisions at this width
    np.testing.assert_array_equal(E.data, 1.0)
    np.testing.assert_array_equal(np.asarray(E.sum(axis=1)).ravel(), visited)


def test_signed_hashing_changes_only_the_signs(forest, X):
    U = forest.encode(X, n_components=2**30)
    S = forest.encode(X, n_components=2**30, signed=True)
    np.testing.assert_array_equal(S.indptr, U.indptr)
    np.testing.assert_array_equal(S.indices, U.indices)
    assert set(np.unique(S.data).tolist()) == {-1.0, 1.0}
    np.testing.assert_array_equal(np.asarray(abs(S).sum(axis=1)).ravel(), np.asarray(U.sum(axis=1)).ravel())
    # The sign belongs to the node, not to the row: a node has the same sign for every sample.
    sign_of = {}
    for c, v in zip(S.indices.tolist(), S.data.tolist(), strict=True):
        assert sign_of.setdefault(c, v) == v


@pytest.mark.parametrize("kw", [{}, {"signed": True}, {"values": "weighted"}, {"signed": True, "leaves_only": True}])
def test_narrow_hashing_sums_collisions_of_the_wide_one(forest, X, kw):
    """Column ``c mod 64`` of the 2**30-wide encoding is column ``c`` of the 64-wide one (64 divides 2**30)."""
    wide = forest.encode(X, n_components=2**30, **kw)
    narrow = forest.encode(X, n_components=64, **kw)
    folded = sp.csr_matrix(
        (wide.data.astype(np.float64), (np.repeat(np.arange(40), np.diff(wide.indptr)), wide.indices % 64)),
        shape=(40, 64),
    ).toarray()  # duplicates are summed
    assert np.diff(narrow.indptr).sum() < wide.nnz  # there really are collisions
    np.testing.assert_allclose(narrow.toarray(), folded, rtol=1e-6, atol=1e-6)


def test_numpy_integer_width_is_accepted(forest, X):
    assert_csr_equal(forest.encode(X, n_components=np.int64(512)), forest.encode(X, n_components=512))


# ----------------------------------------------------------------------------- missing values


def complete_rows(columns: dict[str, np.ndarray]) -> np.ndarray:
    """Rows without a missing value."""
    ok = np.ones(len(next(iter(columns.values()))), dtype=bool)
    for v in columns.values():
        ok &= np.array([not (x is None or x != x) for x in v.tolist()])
    return np.flatnonzero(ok)


def all_missing(forest, m: int = 1) -> dict[str, np.ndarray]:
    return {name: np.array([None] * m, dtype=object) if b.is_nominal else np.full(m, np.nan)
            for name, b in zip(forest.feature_names_in_, forest.state().binners, strict=True)}


@pytest.mark.parametrize("mode", ["default", "random", "split"])
def test_every_tree_gives_mass_one_to_leaves_with_missing_values(forest, X, mode):
    trees, _, _ = forest.alive_trees()
    for columns in (X, all_missing(forest, 5)):
        E = forest.encode(columns, n_components=None, leaves_only=True, missing=mode)
        np.testing.assert_array_equal(np.asarray(E.sum(axis=1)).ravel(), trees.n_trees)
        np.testing.assert_array_equal(row_groups_by_tree(forest, E), 1.0)
        is_leaf = trees.left[E.indices] < 0  # unhashed columns are global node ids
        assert is_leaf.all()


def test_split_mode_sends_half_the_mass_down_each_side_of_a_root_on_a_missing_feature(forest, stream):
    cols, _ = stream
    trees, _, _ = forest.alive_trees()
    base_row = take_rows(cols, complete_rows(cols)[:1])
    seen_roots = set()
    for t in range(trees.n_trees):
        root = int(trees.offsets[t])
        assert trees.left[root] >= 0
        name = forest.feature_names_in_[trees.feature[root]]
        seen_roots.add(name)
        sample = dict(base_row)
        sample[name] = np.array([None], dtype=object) if forest.state().binners[trees.feature[root]].is_nominal \
            else np.array([np.nan])
        E = forest.encode(sample, n_components=None, missing="split").toarray()[0]
        left, right = root + trees.left[root], root + trees.right[root]
        assert E[root] == 1.0
        assert E[left] == 0.5 and E[right] == 0.5
        # Leaves only: the left subtree's leaves carry 1/2 in all, so do the right subtree's.
        L = forest.encode(sample, n_components=None, missing="split", leaves_only=True).toarray()[0]
        sub_left = subtree(trees, t, int(trees.left[root]))
        assert L[[root + n for n in sub_left]].sum() == 0.5
        assert L[root:int(trees.offsets[t + 1])].sum() == 1.0
        np.testing.assert_array_equal(E, expected_dense(forest, sample, "split")[0])
    assert len(seen_roots) > 1


def subtree(trees, t: int, node: int) -> list[int]:
    base = int(trees.offsets[t])
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        if trees.left[base + n] >= 0:
            stack += [int(trees.left[base + n]), int(trees.right[base + n])]
    return out


def test_default_mode_follows_missing_left(forest):
    trees, _, _ = forest.alive_trees()
    sample = all_missing(forest)
    E = forest.encode(sample, n_components=None).toarray()[0]
    expected = np.zeros(trees.n_nodes)
    for t in range(trees.n_trees):
        base, node = int(trees.offsets[t]), 0
        while True:
            expected[base + node] = 1.0
            if trees.left[base + node] < 0:
                break
            node = int(trees.left[base + node] if trees.missing_left[base + node] else trees.right[base + node])
    np.testing.assert_array_equal(E, expected)
    split = trees.left >= 0
    assert trees.missing_left[split].any() and not trees.missing_left[split].all()  # both sides are exercised


def test_random_mode_is_keyed_by_sample_ids(forest):
    trees, _, _ = forest.alive_trees()
    m = 200
    sample = all_missing(forest, m)
    ids = np.arange(m)
    a = forest.encode(sample, n_components=None, missing="random", sample_ids=ids)
    assert_csr_equal(a, forest.encode(sample, n_components=None, missing="random", sample_ids=ids))
    assert_csr_equal(a, forest.encode(sample, n_components=None, missing="random"))  # default ids: row numbers
    # One path per tree (values 1), like the default mode, but the side is drawn per sample and node.
    np.testing.assert_array_equal(a.data, 1.0)
    b = forest.encode(sample, n_components=None, missing="random", sample_ids=ids + 10_000)
    dense_a, dense_b = a.toarray(), b.toarray()
    assert all(not np.array_equal(dense_a[i], dense_b[i]) for i in range(m))
    # At each tree's root, about half of the ids go left.
    for t in range(trees.n_trees):
        root = int(trees.offsets[t])
        share_left = dense_a[:, root + trees.left[root]].mean()
        assert 0.3 < share_left < 0.7
    # String ids are hashed stably; the same ids in another order give the rows in that order.
    sids = np.array([f"sample-{i}" for i in range(m)], dtype=object)
    s = forest.encode(sample, n_components=None, missing="random", sample_ids=sids)
    perm = np.random.default_rng(0).permutation(m)
    s_perm = forest.encode(take_rows(sample, perm), n_components=None, missing="random", sample_ids=sids[perm])
    np.testing.assert_array_equal(s_perm.toarray(), s.toarray()[perm])
    assert not np.array_equal(s.toarray(), dense_a)


def test_missing_modes_agree_when_nothing_is_missing(forest, stream):
    cols, _ = stream
    X = take_rows(cols, complete_rows(cols)[:20])
    d = forest.encode(X, n_components=2**12)
    assert_csr_equal(d, forest.encode(X, n_components=2**12, missing="split"))
    assert_csr_equal(d, forest.encode(X, n_components=2**12, missing="random", sample_ids=np.arange(20) + 99))


# ----------------------------------------------------------------------------- determinism

ENCODE_OPTIONS = [
    {"n_components": 2**18},
    {"n_components": 2**10, "signed": True, "values": "weighted"},
    {"n_components": None, "missing": "split"},
    {"n_components": 2**16, "missing": "random", "sample_ids": [f"id{i}" for i in range(160)]},
    {"n_components": 2**20, "leaves_only": True},
]

DETERMINISM_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from helpers import feed_columns, mixed_stream
    from streamforest import FeatureStreamForest
    import test_encoding as te

    cols, y = mixed_stream(n=160, seed=0)
    f = FeatureStreamForest(**te.FOREST_KW)
    feed_columns(f, cols, y)
    print(json.dumps([te.digest(f.encode(cols, **opts)) for opts in te.ENCODE_OPTIONS]))
    """
)


def digest(E) -> str:
    h = hashlib.sha256(repr((E.shape, str(E.dtype), str(E.indices.dtype), str(E.indptr.dtype))).encode())
    for a in (E.indptr, E.indices, E.data):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def test_encodings_are_identical_in_another_process(forest, stream):
    cols, _ = stream
    here = [digest(forest.encode(cols, **opts)) for opts in ENCODE_OPTIONS]
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONHASHSEED="12345")
    out = subprocess.run(
        [sys.executable, "-c", DETERMINISM_SCRIPT, str(TESTS)], cwd=REPO, env=env, capture_output=True, text=True,
        check=True, timeout=300,
    )
    there = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(set(here)) == len(here)
    assert there == here


def test_encodings_are_identical_after_save_and_load(forest, stream, tmp_path):
    cols, _ = stream
    forest.save(tmp_path / "f.npz")
    g = FeatureStreamForest.load(tmp_path / "f.npz")
    for opts in ENCODE_OPTIONS:
        assert digest(g.encode(cols, **opts)) == digest(forest.encode(cols, **opts))


# ----------------------------------------------------------------------------- encode_delta


def numeric_stream(n: int = 150, d: int = 8, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] - X[:, 3 % d] + 0.5 * rng.normal(size=n) > 0).astype(np.int64)
    X[rng.uniform(size=X.shape) < 0.05] = np.nan
    return X, y


DELTA_CASES = [
    ("prune", {}),
    ("prune", {"n_components": 64, "signed": True, "missing": "split"}),  # collisions, cancellations, halves
    ("merge", {"leaves_only": True}),
    ("merge", {"missing": "random", "sample_ids": np.arange(30) * 7 + 3, "n_components": 2**12}),
]


def check_deltas(f, X_eval, history, opts) -> None:
    """For every recorded (version, encoding): old + delta == now, and the delta is not empty."""
    now = f.encode(X_eval, **opts)
    for version, old in history:
        delta = f.encode_delta(X_eval, since=version, **opts)
        assert delta.shape == now.shape
        assert canonical(delta).nnz > 0
        assert_csr_equal(old + delta, now)


@pytest.mark.parametrize(("budget", "opts"), DELTA_CASES)
def test_delta_turns_old_encodings_into_the_new_one(budget, opts):
    X, y = numeric_stream(d=7)
    kw = dict(prune_threshold=0.05, max_generations=None) if budget == "prune" else \
        dict(prune_threshold=0.0, max_generations=2)
    f = FeatureStreamForest(trees_per_generation=3, max_depth=3, random_state=1, **kw)
    X_eval = X[:30]
    history: list = []
    reports = []
    for j in range(X.shape[1]):
        reports.append(f.add_feature(f"x{j}", X[:, j], y=y if j == 0 else None))
        # Earlier encodings were made with fewer columns; encode_delta takes the current ones.
        cols = X_eval[:, : j + 1]
        check_deltas(f, cols, history[:1] + history[-1:], opts)  # one step, and all steps so far
        history.append((f.model_version_, f.encode(cols, **opts)))
        assert canonical(f.encode_delta(cols, since=f.model_version_, **opts)).nnz == 0
    check_deltas(f, X_eval, history[:-1], opts)  # from every version
    if budget == "prune":
        assert any(r.pruned for r in reports)
    else:
        assert any(r.merged for r in reports) and len(f.generations_) == 2


def test_delta_reaches_back_exactly_delta_window_versions():
    X, y = numeric_stream(n=120, d=DELTA_WINDOW + 4, seed=9)
    # A high threshold prunes at almost every step, from the third on: generations die all through the window.
    f = FeatureStreamForest(trees_per_generation=2, max_depth=2, prune_threshold=0.4, random_state=2)
    X_eval = X[:20]
    encodings, reports = {}, []
    for j in range(X.shape[1]):
        reports.append(f.add_feature(f"x{j}", X[:, j], y=y if j == 0 else None))
        cols = X_eval[:, : j + 1]
        encodings[f.model_version_] = f.encode(cols)
        oldest = f.model_version_ - DELTA_WINDOW
        if oldest >= 1:  # the oldest reachable version, at every step: removed generations are kept long enough
            assert_csr_equal(encodings[oldest] + f.encode_delta(cols, since=oldest), encodings[f.model_version_])
    assert sum(bool(r.pruned) for r in reports) > DELTA_WINDOW // 2
    now = f.model_version_
    oldest = now - DELTA_WINDOW
    for v in range(oldest, now + 1):
        assert_csr_equal(encodings[v] + f.encode_delta(X_eval, since=v), f.encode(X_eval))
    for v in (oldest - 1, 0, -1, now + 1):
        with pytest.raises(ValueError, match="re-encode"):
            f.encode_delta(X_eval, since=v)


def test_delta_refuses_versions_from_before_add_samples():
    X, y = numeric_stream(n=150, d=4)
    f = FeatureStreamForest(trees_per_generation=3, max_depth=3, random_state=4)
    for j in range(3):
        f.add_feature(f"x{j}", X[:120, j], y=y[:120] if j == 0 else None)
    before = f.model_version_
    f.encode_delta(X[:10, :3], since=before - 1)  # reachable so far
    f.add_samples(X[120:140, :3], y[120:140])
    for v in (before - 1, before):
        with pytest.raises(ValueError, match="re-encode"):
            f.encode_delta(X[:10, :3], since=v)
    regrown = f.model_version_
    assert regrown > before
    assert canonical(f.encode_delta(X[:10, :3], since=regrown)).nnz == 0
    old = f.encode(X[:10, :3])
    f.add_feature("x3", np.concatenate([X[:120, 3], X[120:140, 3]]))
    assert_csr_equal(old + f.encode_delta(X[:10], since=regrown), f.encode(X[:10]))


def test_delta_refuses_versions_from_before_load(tmp_path):
    X, y = numeric_stream(n=150, d=4)
    f = FeatureStreamForest(trees_per_generation=3, max_depth=3, random_state=4)
    for j in range(3):
        f.add_feature(f"x{j}", X[:, j], y=y if j == 0 else None)
    v = f.model_version_
    f.encode_delta(X[:10, :3], since=v - 1)  # the original forest can still reach back
    f.save(tmp_path / "f.npz")
    g = FeatureStreamForest.load(tmp_path / "f.npz")
    assert g.model_version_ == v
    with pytest.raises(ValueError, match="re-encode"):
        g.encode_delta(X[:10, :3], since=v - 1)
    assert canonical(g.encode_delta(X[:10, :3], since=v)).nnz == 0
    old = g.encode(X[:10, :3])
    g.add_feature("x3", X[:, 3])
    f.add_feature("x3", X[:, 3])
    assert_csr_equal(old + g.encode_delta(X[:10], since=v), g.encode(X[:10]))
    assert digest(g.encode(X[:10])) == digest(f.encode(X[:10]))


@pytest.mark.parametrize("since", [1.0, "1", True, None, np.float64(1.0)])
def test_delta_since_must_be_an_integer(forest, X, since):
    with pytest.raises(TypeError, match="since"):
        forest.encode_delta(X, since=since)


def test_delta_accepts_numpy_integer_versions(forest, X):
    assert canonical(forest.encode_delta(X, since=np.int64(forest.model_version_))).nnz == 0


def test_delta_needs_hashed_encodings(forest, X):
    with pytest.raises(ValueError, match="hashed"):
        forest.encode_delta(X, since=forest.model_version_, n_components=None)


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"n_components": 0}, "n_components"), ({"n_components": -4}, "n_components"),
     ({"n_components": 2.5}, "n_components"), ({"missing": "sideways"}, "missing")],
)
def test_delta_checks_its_arguments_even_when_nothing_changed(forest, X, kw, match):
    """Bad arguments are refused whether or not there is anything to encode (same errors as encode)."""
    with pytest.raises(ValueError, match=match):
        forest.encode_delta(X, since=forest.model_version_, **kw)


# ----------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": -1}, "n_components"),
        ({"n_components": 2.0}, "n_components"),
        ({"n_components": "1024"}, "n_components"),
        ({"n_components": True}, "n_components"),
        ({"values": "counts"}, "values"),
        ({"missing": "sideways"}, "missing"),
        ({"sample_ids": np.arange(39)}, "sample_ids"),
        ({"sample_ids": np.arange(80).reshape(40, 2)}, "sample_ids"),
    ],
)
def test_encode_refuses_bad_arguments(forest, X, kw, match):
    with pytest.raises(ValueError, match=match):
        forest.encode(X, **kw)


def test_encode_refuses_the_wrong_number_of_columns(forest):
    with pytest.raises(ValueError, match="columns"):
        forest.encode(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="columns"):
        forest.encode(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="lacks features"):
        forest.encode({"x0": np.zeros(3)})


def test_encode_before_any_feature_is_refused():
    f = FeatureStreamForest(**FOREST_KW)
    with pytest.raises(ValueError, match="no trees"):
        f.encode(np.zeros((2, 0)))
    with pytest.raises(ValueError, match="no trees"):
        f.encode_delta(np.zeros((2, 0)), since=0)


def test_a_replaced_forest_copy_goes_without_the_cyclic_collector():
    """The engine copies a stream's forest before every change: the copy it replaces (and the generations only that
    copy holds) must go when the last reference does, not when Python's cyclic collector happens to run."""
    import copy
    import gc

    import orjson

    from streamforest.engine.core import Engine, EngineConfig

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4))
    engine = Engine(EngineConfig(forest={"trees_per_generation": 3, "random_state": 0}, encoding="none"))
    ids = [str(i) for i in range(200)]
    samples = [{"id": i, "label": int(v > 0)} for i, v in zip(ids, x[:, 0], strict=True)]
    engine.process(orjson.dumps({"v": 1, "type": "samples", "stream": "s", "samples": samples}))
    gc.collect()
    gc.disable()
    try:
        others = {id(o) for o in gc.get_objects() if isinstance(o, FeatureStreamForest)}  # other tests' forests
        for k in range(4):
            engine.process(orjson.dumps({"v": 1, "type": "feature", "stream": "s", "name": f"f{k}", "ids": ids,
                                         "values": x[:, k].tolist()}))
        forests = [o for o in gc.get_objects() if isinstance(o, FeatureStreamForest) and id(o) not in others]
        assert forests == [engine.streams["s"].forest]
    finally:
        gc.enable()
    f = engine.streams["s"].forest
    c = copy.deepcopy(f)
    assert c.encoder._forest is c and f.encoder._forest is f
