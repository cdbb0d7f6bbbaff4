"""Narrow streams (``split_features="auto"``): every feature in every tree, ``max_features`` drawn per split, each
generation outweighing the one before; past the narrow width, the paper's subspaces and bookkeeping resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import stream_in
from sklearn.metrics import roc_auc_score

from streamforest import FeatureStreamForest, growth
from streamforest.growth import LEAF_CHOICE_FROM, LEAF_CHOICES, auto_leaf
from streamforest.sampling import NARROW_ARRIVAL_GROWTH, NARROW_SUBSPACE, is_narrow, narrow_split_size


def xor_stream(n: int = 900, d: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A label that needs both of the first two features at once (neither helps alone)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = ((X[:, 0] * X[:, 1] > 0) ^ (rng.random(n) < 0.1)).astype(np.int64)
    return X, y


def test_narrow_width_and_split_size():
    # 2/3 of the features: narrow up to 9 features (6 < 6.5), not from 10 on (6.67).
    assert [is_narrow(d, 2 / 3, 64) for d in range(1, 13)] == [True] * 9 + [False] * 3
    assert NARROW_SUBSPACE == 6.5
    # Never once capped, however small the cap.
    assert [is_narrow(d, 2 / 3, 3) for d in range(1, 7)] == [True] * 4 + [False] * 2
    # Rounded down as scikit-learn does; 0 (every feature) once that is all of them.
    assert [narrow_split_size(d, 2 / 3, 64) for d in (1, 2, 3, 9)] == [0, 1, 2, 6]
    assert narrow_split_size(2, 1.0, 64) == 0


def test_every_tree_takes_every_feature_and_each_generation_outweighs_the_last():
    X, y = xor_stream(d=3)
    f = stream_in(FeatureStreamForest(trees_per_generation=6, random_state=0), X, y)
    gens = f._generations
    for d, g in enumerate(gens, start=1):
        assert all(s.tolist() == list(range(d)) for s in g.subspaces)  # the forced feature too
        assert g.split_ks.tolist() == [narrow_split_size(d, 2 / 3, 64)] * 6
    assert [g["forced"] for g in f.generations_] == [["x0"], ["x1"], ["x2"]]
    # Each arrival's generation outweighs the one before tenfold (only its trees see the new feature with the others).
    steps = np.diff([g.log_weight for g in gens])
    np.testing.assert_allclose(steps, math.log(NARROW_ARRIVAL_GROWTH))
    assert NARROW_ARRIVAL_GROWTH == 10.0
    np.testing.assert_allclose(f._ledger.virtual_use(), 6 * np.array([1 + 10 + 100, 10 + 100, 100]))
    # A refresh grows as generations do on a wide stream: 2/3 of the features per split, 1 / (1 - 2/3) = 3.
    before = gens[-1].log_weight
    f.refresh()
    assert f._generations[-1].log_weight - before == pytest.approx(math.log(3.0))


def test_past_the_narrow_width_the_paper_bookkeeping_resumes():
    X, y = xor_stream(d=13)
    f = stream_in(FeatureStreamForest(trees_per_generation=20, max_generations=None, prune_threshold=0.0,
                                      random_state=1), X, y)
    for d, g in enumerate(f._generations, start=1):
        full = all(s.size == d for s in g.subspaces)
        assert full == (d <= 9)
        assert (g.split_ks == 0).all() == (d == 1 or d >= 10)
    # Features 10 on arrive under Algorithm 1: the new feature's virtual use is the mean of the older ones'.
    for d in (10, 13):
        g = FeatureStreamForest(trees_per_generation=20, max_generations=None, prune_threshold=0.0, random_state=1)
        V = stream_in(g, X[:, :d], y)._ledger.virtual_use()
        assert V[-1] == pytest.approx(V[:-1].mean(), rel=1e-9)


def test_a_narrow_stream_learns_an_interaction_that_one_feature_trees_cannot():
    X, y = xor_stream()
    Xt, yt = xor_stream(seed=1)
    auc = {}
    for split in ("auto", None):  # None: the paper's per-tree subspaces on two features
        f = stream_in(FeatureStreamForest(split_features=split, random_state=3), X, y)
        auc[split] = roc_auc_score(yt, f.predict_proba(Xt)[:, 1])
    assert auc["auto"] > 0.85 and auc["auto"] > auc[None] + 0.05


def test_same_seed_same_narrow_forest_and_the_paper_setting_is_unchanged():
    X, y = xor_stream(d=3)
    a = stream_in(FeatureStreamForest(random_state=4), X, y).predict_proba(X)
    b = stream_in(FeatureStreamForest(random_state=4), X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    # split_features=None keeps the per-tree subspaces of Motl & Kordík on narrow streams.
    f = stream_in(FeatureStreamForest(split_features=None, trees_per_generation=30, random_state=4), X, y)
    assert any(s.size < 3 for s in f._generations[-1].subspaces)
    assert all((g.split_ks == 0).all() for g in f._generations)


def test_a_narrow_generation_keeps_the_leaf_size_that_errs_least_out_of_bag():
    X, y = xor_stream(n=600, d=3, seed=2)
    f = stream_in(FeatureStreamForest(trees_per_generation=8, random_state=1), X, y)
    base = auto_leaf(f.n_samples_)
    chosen = []
    for g in f._generations:
        # The same plans grown with each leaf size the generation chose among: it kept the least out-of-bag error.
        errors = {m: f._generation_oob_error(f._make_generation(g.id, g.forced, g.log_weight, g.subspaces,
                                                                 g.split_ks, np.full(g.n_trees, base * m)))
                  for m in (1.0, *LEAF_CHOICES)}
        m = float(g.min_leaf[0]) / base
        assert m in errors and errors[m] == min(errors.values())
        chosen.append(m)
    assert chosen != [1.0] * len(chosen)  # not the square-root rule alone on this stream


def test_few_samples_keep_the_square_root_leaf():
    X, y = xor_stream(n=LEAF_CHOICE_FROM - 1, d=3)
    f = stream_in(FeatureStreamForest(trees_per_generation=8, random_state=1), X, y)
    assert all((g.min_leaf == auto_leaf(f.n_samples_)).all() for g in f._generations)


def test_a_large_narrow_stream_tries_the_leaf_sizes_on_its_first_trees_and_grows_the_rest_with_the_choice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(growth, "LEAF_TRIAL_SAMPLES", 10_000)  # "large" at this test's size
    X, y = xor_stream(n=900, d=3, seed=2)
    n_trees = 30
    f = stream_in(FeatureStreamForest(trees_per_generation=n_trees, random_state=1), X, y)
    k = growth.leaf_trial_trees(n_trees, f.n_samples_)
    assert k == growth.LEAF_TRIAL_TREES < n_trees
    base = auto_leaf(f.n_samples_)
    chosen = []
    for g in f._generations:
        leaf = float(g.min_leaf[0])
        assert g.n_trees == n_trees and (g.min_leaf == leaf).all()
        # Chosen on the first k trees, by the error estimated for all n_trees of them ...
        errors = {m: f._generation_oob_error(f._make_generation(g.id, g.forced, g.log_weight, g.subspaces[:k],
                                                                 g.split_ks[:k], np.full(k, base * m)), n_trees)
                  for m in (1.0, *LEAF_CHOICES)}
        assert errors[leaf / base] == min(errors.values())
        chosen.append(leaf / base)
        # ... and the generation is the one grown whole with that leaf size.
        whole = f._make_generation(g.id, g.forced, g.log_weight, g.subspaces, g.split_ks, g.min_leaf)
        for name, array in whole.trees._asdict().items():
            np.testing.assert_array_equal(getattr(g.trees, name), array, err_msg=name)
    assert chosen != [1.0] * len(chosen)


def test_the_error_of_a_generations_first_trees_is_estimated_for_all_of_them() -> None:
    X, y = xor_stream(n=2000, d=3, seed=5)
    f = stream_in(FeatureStreamForest(trees_per_generation=100, random_state=2), X, y)
    g = f._generations[-1]
    first = f._make_generation(g.id, g.forced, g.log_weight, g.subspaces[:10], g.split_ks[:10], g.min_leaf[:10])
    whole, plain = f._generation_oob_error(g), f._generation_oob_error(first)
    estimate = f._generation_oob_error(first, n_trees=100)
    assert f._generation_oob_error(first, n_trees=10) == plain  # its own size: nothing to take off
    # Ten trees' votes spread: their error overstates a hundred's; the estimate takes most of the excess off.
    assert whole < estimate < plain
    assert estimate - whole < 0.25 * (plain - whole)


def test_the_whole_generations_error_is_estimated_for_a_regression_too() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    y = X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=2000)
    f = stream_in(FeatureStreamForest(task="regression", trees_per_generation=100, random_state=2), X, y)
    g = f._generations[-1]
    first = f._make_generation(g.id, g.forced, g.log_weight, g.subspaces[:10], g.split_ks[:10], g.min_leaf[:10])
    whole, plain = f._generation_oob_error(g), f._generation_oob_error(first)
    estimate = f._generation_oob_error(first, n_trees=100)
    assert whole < estimate < plain
    assert estimate - whole < 0.4 * (plain - whole)
