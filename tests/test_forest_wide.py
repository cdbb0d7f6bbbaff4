"""Leaf sizes: ``min_samples_leaf="auto"`` grows leaves with the training samples while the stream is narrow, keeps
them at one size past the narrow width and at a larger one once the subspaces are capped (a wide stream), and every
tree keeps the leaf size it was born with through regrowth, merges and files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import stream_in

from streamforest import FeatureStreamForest
from streamforest.growth import AUTO_LEAF, AUTO_LEAF_CAPPED, AUTO_LEAF_MAX, LEAF_CHOICE_FROM, LEAF_CHOICES, auto_leaf
from streamforest.persistence import state_arrays, state_from_arrays
from streamforest.sampling import is_capped, is_narrow

# Capped from the 7th feature on: 2/3 of 7 features is more than a subspace of 4 can hold.
KW = dict(trees_per_generation=4, max_subspace=8, prune_threshold=0.0, random_state=0)


def wide_stream(n: int = 400, d: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + X[:, 7] + 0.7 * rng.normal(size=n) > 0).astype(np.int64)
    return X, y


def leaf_weights(f: FeatureStreamForest) -> list[tuple[float, float]]:
    """(the tree's leaf size, its lightest leaf) for every alive tree."""
    out = []
    for g in f._generations:
        t = g.trees
        for k in range(t.n_trees):
            nodes = slice(t.offsets[k], t.offsets[k + 1])
            out.append((float(g.min_leaf[k]), float(t.weight[nodes][t.left[nodes] == -1].min())))
    return out


def narrow_leaves(n: int) -> set[float]:
    """The leaf sizes ``min_samples_leaf="auto"`` may give a narrow generation on ``n`` training samples: the
    square-root rule's, or from LEAF_CHOICE_FROM samples on, the one of it, half and twice it that errs least out of
    bag."""
    if n < LEAF_CHOICE_FROM:
        return {auto_leaf(n)}
    return {auto_leaf(n) * m for m in (1.0, *LEAF_CHOICES)}


def test_auto_leaves_grow_from_the_cap_on():
    assert [is_capped(d, 2 / 3, 8) for d in (12, 13)] == [False, True]
    X, y = wide_stream()
    f = stream_in(FeatureStreamForest(max_generations=None, **KW), X, y)
    for d, g in enumerate(f._generations, start=1):
        expected = narrow_leaves(len(y)) if is_narrow(d, 2 / 3, 8) else {AUTO_LEAF_CAPPED if d >= 13 else AUTO_LEAF}
        assert len(set(g.min_leaf.tolist())) == 1 and g.min_leaf[0] in expected
    pairs = leaf_weights(f)
    assert all(lightest >= size for size, lightest in pairs)
    # The bound is what shapes the trees: before the cap some leaves are lighter than the capped size.
    assert min(lightest for size, lightest in pairs if size == AUTO_LEAF) < AUTO_LEAF_CAPPED


def test_auto_leaves_grow_with_the_samples_while_narrow():
    # The square root of the training samples, from AUTO_LEAF on tiny sets to AUTO_LEAF_MAX.
    sizes = [auto_leaf(n) for n in (10, 36, 64, 100, 144, 10_000)]
    assert sizes == [AUTO_LEAF, AUTO_LEAF, 8.0, 10.0, AUTO_LEAF_MAX, AUTO_LEAF_MAX]
    assert [is_narrow(d, 2 / 3, 64) for d in (9, 10)] == [True, False]
    for n in (20, 100, 400):
        X, y = wide_stream(n)
        f = stream_in(FeatureStreamForest(trees_per_generation=4, prune_threshold=0.0, random_state=0), X[:, :10], y)
        sizes = [set(g.min_leaf.tolist()) for g in f._generations]
        assert all(len(s) == 1 and s <= narrow_leaves(n) for s in sizes[:9]) and sizes[9] == {AUTO_LEAF}
        narrow = [pair for pair in leaf_weights(f) if pair[0] in narrow_leaves(n)]
        assert narrow and all(lightest >= size for size, lightest in narrow)
        if auto_leaf(n) > AUTO_LEAF:
            # The bound shapes the narrow trees: the trees of the 10th feature have leaves lighter than theirs.
            assert min(lightest for size, lightest in leaf_weights(f) if size == AUTO_LEAF) < auto_leaf(n)


def test_a_given_leaf_size_holds_for_every_tree():
    X, y = wide_stream()
    f = stream_in(FeatureStreamForest(min_samples_leaf=5, max_generations=None, **KW), X, y)
    assert all(size == 5.0 and lightest >= 5.0 for size, lightest in leaf_weights(f))


def test_merges_regrowth_and_files_keep_each_trees_leaf_size(tmp_path):
    X, y = wide_stream()
    f = stream_in(FeatureStreamForest(max_generations=3, **KW), X[:300], y[:300])
    # The budget merged generations born on both sides of the cap: their trees differ in leaf size.
    mixed = [g for g in f._generations if len(set(g.min_leaf.tolist())) == 2]
    assert mixed, "expected a merged generation with trees from before and after the cap"
    sizes = [g.min_leaf.tolist() for g in f._generations]
    f.add_samples(X[300:], y[300:])
    assert [g.min_leaf.tolist() for g in f._generations] == sizes
    pairs = leaf_weights(f)
    assert all(lightest >= size for size, lightest in pairs)
    # Regrown with their own leaf size, not the one the stream's width gives now: the trees of the smaller bound
    # have leaves lighter than the larger one.
    bounds = sorted({size for size, _ in pairs})
    assert len(bounds) >= 2
    assert min(lightest for size, lightest in pairs if size == bounds[0]) < bounds[-1]
    path = tmp_path / "forest.npz"
    f.save(path)
    g = FeatureStreamForest.load(path)
    assert [gen.min_leaf.tolist() for gen in g._generations] == sizes
    np.testing.assert_array_equal(g.predict_proba(X), f.predict_proba(X))
    # Regrown after loading, the trees are the ones the saved forest regrows.
    f.add_samples(X[:50], y[:50])
    g.add_samples(X[:50], y[:50])
    np.testing.assert_array_equal(g.predict_proba(X), f.predict_proba(X))


def test_a_file_from_before_per_tree_leaf_sizes_takes_the_forests():
    X, y = wide_stream()
    f = stream_in(FeatureStreamForest(min_samples_leaf=4, **KW), X[:, :4], y)
    arrays, header = state_arrays(f.state())
    old = {k: v for k, v in arrays.items() if not k.endswith("_min_leaf")}
    assert len(old) < len(arrays)
    state = state_from_arrays(old, json.loads(json.dumps(header)))
    assert all(g.min_leaf.tolist() == [4.0] * g.n_trees for g in state.generations)


@pytest.mark.parametrize("value", ["big", True, 0.5, None])
def test_min_samples_leaf_is_a_number_or_auto(value):
    X, y = wide_stream()
    with pytest.raises(ValueError, match="min_samples_leaf"):
        FeatureStreamForest(min_samples_leaf=value).add_feature("x0", X[:, 0], y=y)
