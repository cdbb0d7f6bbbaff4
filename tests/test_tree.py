"""Histogram CART on binned columns, compared with scikit-learn where the best split is unambiguous."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import Binned, bin_columns, grid_values, grow_tree, tree_values
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from streamforest.inputs import FeatureColumns
from streamforest.tree import route
from streamforest.tree.grow import TrainingSet, TreeSettings
from streamforest.tree.model import ARRAYS, Trees, concat, grow

# ----------------------------------------------------------------------------- comparison helpers


def partition(leaf_ids: np.ndarray) -> set[frozenset[int]]:
    """The training samples grouped by the leaf they reach (leaf numbering does not matter)."""
    groups: dict[int, list[int]] = {}
    for i, leaf in enumerate(leaf_ids.tolist()):
        groups.setdefault(leaf, []).append(i)
    return {frozenset(g) for g in groups.values()}


def internal_features_preorder(feature: np.ndarray, left: np.ndarray, right: np.ndarray) -> list[int]:
    """Split features in depth-first, left-first order (leaves as -1): comparable across implementations."""
    out: list[int] = []

    def walk(node: int) -> None:
        if left[node] < 0:
            out.append(-1)
            return
        out.append(int(feature[node]))
        walk(int(left[node]))
        walk(int(right[node]))

    walk(0)
    return out


def assert_same_tree_as_sklearn(trees: Trees, data: Binned, X: np.ndarray, sk, X_new: np.ndarray) -> None:
    ours = internal_features_preorder(trees.feature, trees.left, trees.right)
    theirs = internal_features_preorder(sk.tree_.feature, sk.tree_.children_left, sk.tree_.children_right)
    assert ours == theirs
    assert ours.count(-1) >= 2  # a real split, not two trivial stumps
    n = X.shape[0]
    leaves = route.leaves(trees, data.Xb, n)[:, 0]
    assert partition(leaves) == partition(sk.apply(X))
    # Leaf values (class shares / means) equal scikit-learn's predictions, on the training set and on new data.
    for Z in (X, X_new):
        Zb = data.transform([Z[:, j] for j in range(Z.shape[1])])
        ours_v = tree_values(trees, Zb)
        if isinstance(sk, DecisionTreeClassifier):
            np.testing.assert_allclose(ours_v, sk.predict_proba(Z), rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(np.argmax(ours_v, axis=1), sk.predict(Z))
        else:
            np.testing.assert_allclose(ours_v[:, 0], sk.predict(Z), rtol=1e-12, atol=1e-12)


def columns(X: np.ndarray) -> list[np.ndarray]:
    return [X[:, j] for j in range(X.shape[1])]


# ----------------------------------------------------------------------------- classification vs scikit-learn


def and_data(seed: int, n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    """y = (x0 > 0.4) & (x1 > 0.6) with empty gaps around both thresholds, plus three noise columns."""
    rng = np.random.default_rng(seed)
    x0 = grid_values(rng, n, 41, gap=(0.37, 0.43))
    x1 = grid_values(rng, n, 41, gap=(0.57, 0.63))
    noise = rng.choice(np.linspace(0, 1, 41), size=(n, 3))
    X = np.column_stack([noise[:, 0], x0, noise[:, 1], x1, noise[:, 2]])
    y = ((x0 > 0.4) & (x1 > 0.6)).astype(np.int64)
    return X, y


def two_sided_data(seed: int, n: int = 800) -> tuple[np.ndarray, np.ndarray]:
    """Both children of the root split again, on different features: y = x1 > .3 if x0 <= .5 else x2 > .8."""
    rng = np.random.default_rng(seed)
    x0 = grid_values(rng, n, 21, gap=(0.46, 0.54))
    x1 = grid_values(rng, n, 21, gap=(0.26, 0.34))
    x2 = grid_values(rng, n, 21, gap=(0.76, 0.84))
    noise = rng.choice(np.linspace(0, 1, 21), size=(n, 2))
    X = np.column_stack([x0, noise[:, 0], x1, x2, noise[:, 1]])
    y = np.where(x0 <= 0.5, x1 > 0.3, x2 > 0.8).astype(np.int64)
    return X, y


@pytest.mark.parametrize("depth", [1, 2])
def test_classifier_agrees_with_sklearn(depth):
    X, y = and_data(seed=1)
    X_new, _ = and_data(seed=2)
    data = bin_columns(columns(X))
    trees = grow_tree(data, y, max_depth=depth)
    sk = DecisionTreeClassifier(max_depth=depth, random_state=0).fit(X, y)
    assert trees.feature[0] == sk.tree_.feature[0] == 3  # the root splits x1 at 0.6 in both
    assert data.binners[3].threshold(int(trees.threshold[0])) == pytest.approx(0.6)
    assert_same_tree_as_sklearn(trees, data, X, sk, X_new)
    if depth == 2:
        # The AND is learned exactly.
        np.testing.assert_array_equal(np.argmax(tree_values(trees, data.Xb), axis=1), y)


def test_classifier_agrees_with_sklearn_when_both_children_split():
    X, y = two_sided_data(seed=3)
    X_new, _ = two_sided_data(seed=4)
    data = bin_columns(columns(X))
    trees = grow_tree(data, y, max_depth=2)
    sk = DecisionTreeClassifier(max_depth=2, random_state=0).fit(X, y)
    assert sorted(internal_features_preorder(trees.feature, trees.left, trees.right)) == [-1] * 4 + [0, 2, 3]
    assert_same_tree_as_sklearn(trees, data, X, sk, X_new)
    np.testing.assert_array_equal(np.argmax(tree_values(trees, data.Xb), axis=1), y)


def test_multiclass_agrees_with_sklearn():
    rng = np.random.default_rng(5)
    n = 900
    x0 = grid_values(rng, n, 31, gap=(0.27, 0.33))
    x1 = grid_values(rng, n, 31, gap=(0.57, 0.63))
    noise = rng.choice(np.linspace(0, 1, 31), size=(n, 2))
    X = np.column_stack([noise[:, 0], x0, x1, noise[:, 1]])
    y = np.where(x0 <= 0.3, 0, np.where(x1 <= 0.6, 1, 2)).astype(np.int64)
    data = bin_columns(columns(X))
    for depth in (1, 2):
        trees = grow_tree(data, y, max_depth=depth)
        sk = DecisionTreeClassifier(max_depth=depth, random_state=0).fit(X, y)
        assert trees.value.shape[1] == 3
        assert_same_tree_as_sklearn(trees, data, X, sk, X[:50])
    np.testing.assert_array_equal(np.argmax(tree_values(trees, data.Xb), axis=1), y)


# ----------------------------------------------------------------------------- regression vs scikit-learn


@pytest.mark.parametrize("depth", [1, 2])
def test_regressor_agrees_with_sklearn_on_a_step_function(depth):
    rng = np.random.default_rng(6)
    n = 700

    def sample(r):
        x0 = grid_values(r, n, 41, gap=(0.27, 0.33))
        x0 = np.where(np.abs(x0 - 0.7) < 0.03, 0.8, x0)  # also a gap around the second step
        noise = r.choice(np.linspace(0, 1, 41), size=(n, 2))
        X = np.column_stack([noise[:, 0], noise[:, 1], x0])
        y = np.where(x0 <= 0.3, 0.0, np.where(x0 <= 0.7, 5.0, 20.0)) + 0.1 * r.normal(size=n)
        return X, y

    X, y = sample(rng)
    X_new, _ = sample(np.random.default_rng(7))
    data = bin_columns(columns(X))
    trees = grow_tree(data, y, regression=True, max_depth=depth)
    sk = DecisionTreeRegressor(max_depth=depth, random_state=0).fit(X, y)
    assert trees.value.shape[1] == 1
    assert trees.feature[0] == 2
    assert_same_tree_as_sklearn(trees, data, X, sk, X_new)
    # Leaf values are the mean target of the training samples in the leaf.
    leaves = route.leaves(trees, data.Xb, n)[:, 0]
    for leaf in np.unique(leaves):
        assert trees.value[leaf, 0] == pytest.approx(y[leaves == leaf].mean(), rel=1e-12)


# ----------------------------------------------------------------------------- nominal features


def test_nominal_non_contiguous_categories_split_perfectly_in_one_split():
    rng = np.random.default_rng(8)
    n = 400
    cats = np.array(["a", "b", "c", "d", "e", "f"])
    x = rng.choice(cats, n).astype(object)
    y = np.isin(x, ["a", "c", "e"]).astype(np.int64)  # alternating: no threshold on a sorted order separates them
    noise = rng.normal(size=n)
    data = bin_columns([noise, x])
    assert data.binners[1].kind == "nominal"
    trees = grow_tree(data, y, max_depth=1)
    assert trees.feature[0] == 1 and trees.nominal[0] == 1
    values = tree_values(trees, data.Xb)
    np.testing.assert_array_equal(values[:, 1], y)  # pure leaves
    # The categories sent left are exactly one of the two groups.
    bits = int(trees.node_cats()[0, 0])
    left = {c for b, c in enumerate(data.binners[1].categories) if bits >> b & 1}
    assert left in ({"a", "c", "e"}, {"b", "d", "f"})
    # The same codes read as ordered numbers cannot be split perfectly in one split.
    codes = np.searchsorted(cats, x.astype(str)).reshape(-1, 1)
    sk = DecisionTreeClassifier(max_depth=1).fit(codes, y)
    assert sk.score(codes, y) < 1.0


def test_nominal_regression_split_groups_categories_by_mean():
    rng = np.random.default_rng(9)
    n = 500
    x = rng.integers(0, 8, n).astype(np.float64)
    y = np.where(np.isin(x, [0, 3, 5, 6]), 10.0, -10.0)
    data = bin_columns([x], kinds=["nominal"])
    trees = grow_tree(data, y, regression=True, max_depth=1)
    assert trees.nominal[0] == 1
    np.testing.assert_array_equal(tree_values(trees, data.Xb)[:, 0], y)


def test_unseen_category_follows_the_missing_side():
    rng = np.random.default_rng(10)
    x = rng.choice(["a", "b"], 200).astype(object)
    y = (x == "a").astype(np.int64)
    data = bin_columns([x])
    trees = grow_tree(data, y, max_depth=1)
    Zb = data.transform([np.array(["zzz", None], dtype=object)])
    side = route.leaves(trees, Zb, 2)[:, 0]
    expected = trees.left[0] if trees.missing_left[0] else trees.right[0]
    np.testing.assert_array_equal(side, [expected, expected])


# ----------------------------------------------------------------------------- missing values


@pytest.mark.parametrize("missing_class", [0, 1])
def test_missing_values_go_to_the_side_they_resemble(missing_class):
    rng = np.random.default_rng(11)
    n = 400
    x = grid_values(rng, n, 41, gap=(0.47, 0.53))
    y = (x > 0.5).astype(np.int64)
    # A quarter of the samples lose their value; all of them belong to missing_class.
    lost = rng.uniform(size=n) < 0.25
    y[lost] = missing_class
    x[lost] = np.nan
    data = bin_columns([x])
    trees = grow_tree(data, y, max_depth=1)
    assert trees.feature[0] == 0
    # class 0 lives on the left (small x): missing values go left exactly when they are class 0.
    assert trees.missing_left[0] == (1 if missing_class == 0 else 0)
    np.testing.assert_array_equal(np.argmax(tree_values(trees, data.Xb), axis=1), y)
    Zb = data.transform([np.array([np.nan])])
    assert np.argmax(tree_values(trees, Zb)[0]) == missing_class


@pytest.mark.parametrize("n_values", [1, 3, 40])
def test_missingness_alone_can_be_the_split(n_values):
    # "Present vs missing" is a split too (every value on one side, the missing bin on the other): here it is the
    # only perfect one. scikit-learn finds it; so must a histogram tree that learns the side of missing values.
    rng = np.random.default_rng(12)
    n = 300
    y = rng.integers(0, 2, n)
    x = np.where(y == 1, np.nan, rng.integers(0, n_values, n).astype(np.float64))
    data = bin_columns([x])
    trees = grow_tree(data, y, max_depth=1)
    assert trees.feature[0] == 0
    np.testing.assert_array_equal(np.argmax(tree_values(trees, data.Xb), axis=1), y)
    sk = DecisionTreeClassifier(max_depth=1).fit(x[:, None], y)
    assert sk.score(x[:, None], y) == 1.0


@pytest.mark.parametrize("share_left", [0.8, 0.2])
def test_without_missing_training_values_missing_follows_the_larger_side(share_left):
    rng = np.random.default_rng(13)
    n = 500
    x = rng.uniform(size=n)
    y = (x > share_left).astype(np.int64)
    data = bin_columns([x])
    trees = grow_tree(data, y, max_depth=1)
    assert trees.missing_left[0] == (1 if share_left > 0.5 else 0)
    Zb = data.transform([np.array([np.nan])])
    assert np.argmax(tree_values(trees, Zb)[0]) == (0 if share_left > 0.5 else 1)


# ----------------------------------------------------------------------------- limits


def random_task(n: int = 600, d: int = 4, seed: int = 14) -> tuple[Binned, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, 2, n)  # pure noise: trees keep splitting until a limit stops them
    return bin_columns(columns(X)), y


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
@pytest.mark.parametrize("bootstrap", [False, True])
def test_max_depth_is_respected_and_reached(depth, bootstrap):
    data, y = random_task()
    trees = grow_tree(data, y, max_depth=depth, bootstrap=bootstrap, seeds=(1, 2, 3))
    depths = trees.depth_of_nodes()
    for t in range(trees.n_trees):
        assert depths[trees.offsets[t] : trees.offsets[t + 1]].max() == depth


@pytest.mark.parametrize("min_leaf", [5, 20, 7.5])
@pytest.mark.parametrize("bootstrap", [False, True])
def test_min_samples_leaf_is_respected(min_leaf, bootstrap):
    data, y = random_task()
    unconstrained = grow_tree(data, y, bootstrap=bootstrap, seeds=(1, 2, 3))
    is_leaf = unconstrained.left < 0
    assert unconstrained.weight[is_leaf].min() < min_leaf  # the limit binds
    trees = grow_tree(data, y, min_samples_leaf=min_leaf, bootstrap=bootstrap, seeds=(1, 2, 3))
    assert trees.weight[trees.left < 0].min() >= min_leaf


def test_regression_limits_are_respected():
    data, _ = random_task()
    y = np.random.default_rng(15).normal(size=data.Xb.shape[1])
    trees = grow_tree(data, y, regression=True, max_depth=4, min_samples_leaf=10, bootstrap=True, seeds=(4, 5))
    assert trees.depth_of_nodes().max() == 4
    assert trees.weight[trees.left < 0].min() >= 10


def test_node_weights_add_up():
    data, y = random_task()
    trees = grow_tree(data, y, max_depth=6)
    assert trees.weight[0] == data.Xb.shape[1]
    internal = np.flatnonzero(trees.left >= 0)
    np.testing.assert_allclose(trees.weight[trees.left[internal]] + trees.weight[trees.right[internal]],
                               trees.weight[internal])
    assert np.all(trees.gain[internal] > 0) and np.all(trees.gain[trees.left < 0] == 0)


def test_a_pure_node_is_a_leaf():
    data, _ = random_task()
    y = np.zeros(data.Xb.shape[1], dtype=np.int64)
    y[0] = 1  # two classes exist, but after one split the rest is pure
    trees = grow_tree(data, y)
    for node in np.flatnonzero(trees.left < 0):
        assert trees.value[node].max() == 1.0


# ----------------------------------------------------------------------------- determinism and packing


def test_same_seed_gives_identical_arrays_and_other_seeds_differ():
    data, y = random_task()
    a = grow_tree(data, y, max_depth=5, bootstrap=True, seeds=(1, 2, 3))
    b = grow_tree(data, y, max_depth=5, bootstrap=True, seeds=(1, 2, 3))
    for name in ("feature", "threshold", "missing_left", "nominal", "cats", "left", "right", "value", "gain",
                 "weight", "offsets"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    c = grow_tree(data, y, max_depth=5, bootstrap=True, seeds=(4, 5, 6))
    assert a.n_nodes != c.n_nodes or not np.array_equal(a.feature, c.feature) or not np.array_equal(a.value, c.value)
    # Each tree depends on its own seed only (trees grow in parallel).
    single = grow_tree(data, y, max_depth=5, bootstrap=True, seeds=(2,))
    np.testing.assert_array_equal(a.take(np.array([1])).feature, single.feature)
    np.testing.assert_array_equal(a.take(np.array([1])).value, single.value)


def test_take_and_concat_preserve_routing():
    data, y = random_task()
    trees = grow_tree(data, y, max_depth=4, bootstrap=True, seeds=(1, 2, 3, 4))
    n = data.Xb.shape[1]
    leaves = route.leaves(trees, data.Xb, n)
    parts = [trees.take(np.array([2, 0])), trees.take(np.array([3])), trees.take(np.array([1]))]
    joined = concat(parts)
    np.testing.assert_array_equal(route.leaves(joined, data.Xb, n), leaves[:, [2, 0, 3, 1]])
    w = np.array([0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(
        route.weighted_values(joined, data.Xb, n, w[[2, 0, 3, 1]]), route.weighted_values(trees, data.Xb, n, w)
    )
    run = trees.take(np.arange(1, 4))  # consecutive trees: slices of the batch
    gathered = trees.take(np.array([3, 2, 1])).take(np.array([2, 1, 0]))  # the same trees, node by node
    for name in (*ARRAYS, "offsets"):
        np.testing.assert_array_equal(getattr(run, name), getattr(gathered, name), err_msg=name)


def test_importances_are_normalised_per_tree():
    data, y = random_task()
    trees = grow_tree(data, y, max_depth=3, bootstrap=True, seeds=(1, 2, 3), subspace=np.array([0, 2]))
    imp = trees.importances(4)
    np.testing.assert_allclose(imp.sum(axis=1), 1.0)
    assert np.all(imp[:, [1, 3]] == 0)  # features outside the subspace are never used


def _best_gain_brute_force(Xb: np.ndarray, stats: np.ndarray, regression: bool, min_leaf: float) -> float:
    """The best gain over every feature and threshold of a node (numeric bins, nothing missing), by cumulative
    sums over all 255 bins: what histograms, bitmaps and histogram subtraction must all agree with."""

    def score(s: np.ndarray) -> np.ndarray:
        w = s[..., 0] if regression else s.sum(-1)
        num = s[..., 1] ** 2 if regression else (s**2).sum(-1)
        return np.divide(num, w, out=np.zeros_like(w), where=w > 0)

    total = stats.sum(0)
    best = 0.0
    for f in range(Xb.shape[0]):
        hist = np.zeros((256, stats.shape[1]))
        np.add.at(hist, Xb[f].astype(np.int64), stats)
        left = np.cumsum(hist, axis=0)[:-1]
        right = total - left
        wl = left[:, 0] if regression else left.sum(1)
        wr = right[:, 0] if regression else right.sum(1)
        ok = (wl >= min_leaf) & (wr >= min_leaf) & (wl > 0) & (wr > 0)
        gains = score(left) + score(right) - score(total)
        if ok.any():
            best = max(best, float(gains[ok].max()))
    return best


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_splits_of_large_nodes_are_the_best_ones(task):
    # 4,000 samples: the root and its children hold over 512 samples, so their histograms are stored and the larger
    # child's come from subtraction; every split must still be the best one found by brute force.
    rng = np.random.default_rng(11)
    n, d = 4000, 5
    X = rng.normal(size=(n, d))
    data = bin_columns([X[:, j] for j in range(d)])
    if task == "regression":
        y = X[:, 0] * 2 + np.sin(3 * X[:, 1]) + rng.normal(scale=0.3, size=n)
        stats = np.column_stack([np.ones(n), y])
    else:
        y = np.digitize(X[:, 0] + 0.5 * X[:, 2] + rng.normal(scale=0.5, size=n), [-0.5, 0.5])
        stats = np.eye(3)[y]
    trees = grow_tree(data, y, regression=task == "regression", max_depth=3, min_samples_leaf=5)
    depth = trees.depth_of_nodes()
    node_of = np.zeros(n, dtype=np.int64)
    checked = 0
    for _ in range(3):
        for node in np.unique(node_of):
            if trees.left[node] < 0:
                continue
            members = node_of == node
            if members.sum() >= 512:
                expected = _best_gain_brute_force(data.Xb[:, members], stats[members], task == "regression", 5)
                assert trees.gain[node] == pytest.approx(expected, rel=1e-9)
                checked += 1
            f, t = trees.feature[node], trees.threshold[node]
            go_left = data.Xb[f, members] <= t
            node_of[np.flatnonzero(members)] = np.where(go_left, trees.left[node], trees.right[node])
    assert checked >= 3 and depth.max() == 3


def test_every_split_of_a_multiclass_tree_on_numeric_columns_is_the_best_one():
    # Four classes, numeric columns, nothing missing: nodes of over 512 samples scan stored histograms, nodes of 256
    # to 512 dense ones, smaller nodes the bins they touch; at every depth the split is the brute-force best.
    rng = np.random.default_rng(23)
    n, d = 1500, 4
    X = rng.normal(size=(n, d))
    data = bin_columns([X[:, j] for j in range(d)])
    y = np.digitize(X[:, 0] - X[:, 1] * X[:, 2] + rng.normal(scale=0.7, size=n), [-1.0, 0.0, 1.0])
    stats = np.eye(4)[y]
    trees = grow_tree(data, y, max_depth=7, min_samples_leaf=3)
    node_of = np.zeros(n, dtype=np.int64)
    sizes = []
    for _ in range(7):
        for node in np.unique(node_of):
            if trees.left[node] < 0:
                continue
            members = node_of == node
            sizes.append(int(members.sum()))
            expected = _best_gain_brute_force(data.Xb[:, members], stats[members], False, 3)
            assert trees.gain[node] == pytest.approx(expected, rel=1e-12), (node, sizes[-1])
            go_left = data.Xb[trees.feature[node], members] <= trees.threshold[node]
            node_of[np.flatnonzero(members)] = np.where(go_left, trees.left[node], trees.right[node])
    assert max(sizes) > 512 and any(256 <= s < 512 for s in sizes) and sum(s < 256 for s in sizes) >= 20


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_untracked_histograms_of_large_nodes_grow_the_same_trees(task):
    # Nodes of at least `dense_from` samples fill histograms without tracking the bins they touch and scan every
    # bin; smaller ones track them. Per-split feature draws (2 of 6) keep histogram subtraction out of the way, and
    # the columns hold missing values and a nominal one, so every scan (two statistics, general, nominal) is reached.
    rng = np.random.default_rng(17)
    n = 3000
    X = rng.normal(size=(n, 5))
    X[rng.random((n, 5)) < np.array([0.0, 0.2, 0.0, 0.05, 0.0])] = np.nan
    cats = rng.choice(np.array(list("abcdefgh")), size=n)
    signal = np.nan_to_num(X[:, 0] + X[:, 1]) + (cats < "d") + rng.normal(scale=0.5, size=n)
    data = bin_columns([X[:, j] for j in range(5)] + [cats], kinds=[None] * 5 + ["nominal"])
    if task == "regression":
        y_cls, y_reg, n_classes = np.zeros(n, dtype=np.int32), signal, 0
    else:
        y_cls = np.digitize(signal, [0.5] if task == "binary" else [-0.5, 1.0]).astype(np.int32)
        y_reg, n_classes = np.zeros(n), int(y_cls.max()) + 1
    sub = np.arange(6, dtype=np.int64)

    def grown(dense_from: int) -> Trees:
        return grow(TrainingSet(data.Xb, n, y_cls, y_reg, n_classes, data.is_nominal), [sub] * 4,
                    np.arange(1, 5, dtype=np.uint64), TreeSettings(12, 5.0, dense_from=dense_from),
                    min_samples_leaf=2, split_features=2)

    tracked = grown(n + 1)
    assert tracked.weight[tracked.left >= 0].max() >= 1000  # large nodes exist
    assert tracked.nominal.any() and tracked.missing_left.any()
    for dense_from in (256, 1):
        dense = grown(dense_from)
        for name in (*ARRAYS, "offsets"):
            np.testing.assert_array_equal(getattr(dense, name), getattr(tracked, name), err_msg=name)


@pytest.mark.parametrize(("task", "draws"), [("binary", 0), ("regression", 0), ("binary", 250), ("regression", 250)])
def test_out_of_bag_leaves_from_growth_are_the_routed_ones(task, draws):
    # Each tree routes the samples it left out just after growing; the same leaves as routing the grown trees from
    # their seeds' draws (missing values and a nominal column included).
    rng = np.random.default_rng(5)
    n = 700
    X = rng.normal(size=(n, 3))
    X[rng.random((n, 3)) < 0.1] = np.nan
    cats = rng.choice(np.array(list("abcdef")), size=n)
    signal = np.nan_to_num(X[:, 0]) + (cats < "c") + rng.normal(scale=0.3, size=n)
    data = bin_columns([X[:, j] for j in range(3)] + [cats], kinds=[None] * 3 + ["nominal"])
    if task == "regression":
        y_cls, y_reg, n_classes = np.zeros(n, dtype=np.int32), signal, 0
    else:
        y_cls, y_reg, n_classes = (signal > 0.5).astype(np.int32), np.zeros(n), 2
    seeds = np.arange(10, 16, dtype=np.uint64)
    subs = [np.arange(4, dtype=np.int64), np.array([0, 3], dtype=np.int64)] * 3
    leaves = np.full((len(seeds), n), -7, dtype=np.int32)
    training = TrainingSet(data.Xb, n, y_cls, y_reg, n_classes, data.is_nominal, draws=draws)
    trees = grow(training, subs, seeds, TreeSettings(8, 0.0), min_samples_leaf=2, split_features=2, oob_leaves=leaves)
    routed = route.out_of_bag_leaves(trees, data.Xb, n, y_cls, n_classes, seeds, draws)
    np.testing.assert_array_equal(leaves, routed)
    out = leaves >= 0
    # about e^-(draws/n) of the samples are out of each tree's bag
    share = np.exp(-(draws or n) / n)
    assert share - 0.06 < out.mean() < share + 0.06
    assert (trees.left[trees.offsets[:-1, None] + np.where(out, leaves, 0)][out] == -1).all()  # leaves


def test_category_rows_follow_their_nodes_through_take_concat_and_saving():
    # Category words are kept for the nodes that have any; taking trees out of order, concatenating batches and
    # saving must leave every node with its own words, and every sample in the same leaf.
    rng = np.random.default_rng(3)
    n = 600
    x = rng.choice(np.array(list("abcdefgh")), n).astype(object)
    z = rng.normal(size=n)
    y = (np.isin(x, ["a", "d", "g"]) ^ (z > 0.5)).astype(np.int64)
    data = bin_columns([z, x])
    trees = grow_tree(data, y, max_depth=6, bootstrap=True, seeds=(1, 2, 3, 4))
    assert (trees.nominal == 1).any() and trees.cats.shape[0] < trees.n_nodes
    full = trees.node_cats()
    order = np.array([2, 0, 3])
    taken = trees.take(order)
    both = concat([taken, trees.take(np.array([1]))])
    expected = np.concatenate([full[trees.offsets[t]:trees.offsets[t + 1]] for t in (2, 0, 3, 1)])
    np.testing.assert_array_equal(both.node_cats(), expected)
    again = Trees.from_arrays(trees.to_arrays("p_"), "p_")
    np.testing.assert_array_equal(again.node_cats(), full)
    assert trees.to_arrays("p_")["p_weight"].dtype == np.float64
    np.testing.assert_array_equal(route.leaves(both, data.Xb, n),
                                  route.leaves(trees, data.Xb, n)[:, [2, 0, 3, 1]])


@pytest.mark.parametrize("values", ["few", "quantiles"])
def test_midpoint_threshold_lies_midway_between_the_node_values_as_scikit_learn(values):
    # The column has values 0..10, the tree's samples only 0, 1 (class 0) and 9, 10 (class 1): scikit-learn's
    # threshold is 5, midway between 1 and 9. At the bin edge after 1 (the rule "edge"), 3 would go right.
    xs = np.array([0.0, 1.0, 9.0, 10.0, *range(2, 9)])
    if values == "quantiles":  # more than 255 distinct values: the bins are quantiles of the column
        xs = np.concatenate([xs, np.linspace(0.0, 10.0, 1000)])
    y = np.array([0, 0, 1, 1], dtype=np.int32)
    data = bin_columns([xs])
    training = TrainingSet(data.Xb, 4, y, np.zeros(4), 2, data.is_nominal, FeatureColumns(data.binners).bin_values())
    # Away from 5 by more than the bins' precision (half a unit with one bin per value).
    at = np.array([2.9, 3.0, 4.4, 5.6, 7.0])
    probe = data.transform([at])
    seen = {}
    for midpoint in (False, True):
        trees = grow(training, [np.array([0])], np.array([1], dtype=np.uint64),
                     TreeSettings(1, 0.0, bootstrap=False, midpoint=midpoint), min_samples_leaf=1)
        seen[midpoint] = tree_values(trees, probe)[:, 1].tolist()
        np.testing.assert_array_equal(tree_values(trees, data.Xb[:, :4])[:, 1], y)  # the samples' sides unchanged
    ref = DecisionTreeClassifier(max_depth=1).fit(xs[:4, None], y).predict_proba(at[:, None])[:, 1]
    assert seen[True] == ref.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert seen[False] == [1.0] * 5


@pytest.mark.parametrize("n", [0, 1, 2, 7, 64, 255])
def test_category_order_sorts_as_numpys_stable_argsort(n):
    # The node loop sorts a nominal feature's categories without allocating: the order must be numpy's mergesort's,
    # ties (categories of equal target share) in bin order and NaN last, or the trees would differ.
    from streamforest.tree.split import _stable_sort

    rng = np.random.default_rng(n)
    keys = rng.integers(0, 5, size=n).astype(np.float64) / 4
    keys[rng.random(n) < 0.1] = np.nan
    ids = rng.permutation(300)[:n].astype(np.int64)
    expected = ids[np.argsort(keys, kind="mergesort")]
    got_keys, got_ids = keys.copy(), ids.copy()
    _stable_sort(got_keys, got_ids, np.empty(n), np.empty(n, dtype=np.int64), n)
    assert got_ids.tolist() == expected.tolist()
    np.testing.assert_array_equal(got_keys, np.sort(keys, kind="mergesort"))


def test_one_sample_routed_alone_gets_the_batch_sums_to_the_bit():
    # A single sample goes through the serial kernel, which walks four trees side by side (and the rest one by one);
    # a batch goes through the blocked parallel one. Both add the trees' votes in tree order: the same sums. Missing
    # values and a nominal column take every branch of a split's rule.
    rng = np.random.default_rng(3)
    n = 400
    x0, x1 = rng.normal(size=n), rng.normal(size=n)
    x1[rng.random(n) < 0.2] = np.nan
    cat = rng.choice(np.array(["a", "b", "c", "d"], dtype=object), n)
    y = ((x0 > 0) ^ (cat == "b")).astype(int)
    data = bin_columns([x0, x1, cat], kinds=[None, None, "nominal"])
    trees = grow_tree(data, y, max_depth=6, bootstrap=True, seeds=tuple(range(1, 8)))  # 4 side by side, then 3
    assert trees.nominal.any() and (data.Xb == 255).any()
    w = rng.random(trees.n_trees)
    batch = route.weighted_values(trees, data.Xb, n, w)
    leaves = route.leaves(trees, data.Xb, n)
    for i in range(40):
        alone = route.weighted_values(trees, np.ascontiguousarray(data.Xb[:, i:i + 1]), 1, w)
        expected = np.zeros(trees.value.shape[1])
        for t in range(trees.n_trees):
            expected += w[t] * trees.value[trees.offsets[t] + leaves[i, t]]
        assert np.array_equal(alone[0], batch[i]) and np.array_equal(alone[0], expected)
