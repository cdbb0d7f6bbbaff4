"""FeatureStreamForest: predictions, weights, pruning, budget, importances, more samples, tasks, determinism."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from streamforest import FeatureReport, FeatureStreamForest
from streamforest.bookkeeping import shares
from streamforest.growth import bootstrap_draws
from streamforest.inputs import Binned
from streamforest.tree import route
from streamforest.tree.grow import bootstrap_counts

REPO = Path(__file__).resolve().parents[1]


def feed(f: FeatureStreamForest, X: np.ndarray, y: np.ndarray, start: int = 0, stop: int | None = None) -> list:
    """Add columns ``start:stop`` of ``X`` as features ``x{j}``; y goes with the first call of a fresh forest."""
    reports = []
    for j in range(start, X.shape[1] if stop is None else stop):
        reports.append(f.add_feature(f"x{j}", X[:, j], y=y if f.n_features_in_ == 0 else None))
    return reports


def wide_stream(n: int = 300, d: int = 12, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    signal = X[:, [j for j in (0, 3, 7) if j < d]] @ np.array([1.0, -1.0, 1.0])[: len([j for j in (0, 3, 7) if j < d])]
    y = (signal + 0.5 * rng.normal(size=n) > 0).astype(np.int64)
    return X, y


def check_consistent(f: FeatureStreamForest) -> None:
    gens = f.generations_
    assert f.n_trees_ == sum(g["n_trees"] for g in gens)
    assert sum(g["weight_share"] for g in gens) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose([g["weight_share"] for g in gens], shares(np.array([g["log_weight"] for g in gens])))
    ids = [g["id"] for g in gens]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    forced = [name for g in gens for name in g["forced"]]
    assert len(forced) == len(set(forced)) and set(forced) <= set(f.feature_names_in_)


def binned(f: FeatureStreamForest, X: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.stack([b.transform(X[:, j]) for j, b in enumerate(f.state().binners)]))


def oob_from_scratch(f: FeatureStreamForest, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-bag P(class 1) and which samples have one, over the generations whose trees were grown on the
    current samples (X, y)."""
    n = X.shape[0]
    Xb = binned(f, X)
    y_codes = np.searchsorted(f.classes_, y).astype(np.int32)
    votes, weight = np.zeros((n, 2)), np.zeros(n)
    for g, info in zip(f.state().generations, f.generations_, strict=True):
        if not g.in_oob:
            continue
        leaves = route.leaves(g.trees, Xb, n)
        for t in range(g.n_trees):
            oob = bootstrap_counts(n, y_codes, 2, True, bootstrap_draws(f.max_samples, n), np.uint64(g.seeds[t])) == 0
            w = info["weight_share"] / g.n_trees
            votes[oob] += w * g.trees.value[g.trees.offsets[t] + leaves[oob, t]]
            weight[oob] += w
    seen = weight > 0
    return np.divide(votes[:, 1], weight, out=np.zeros(n), where=seen), seen


# ----------------------------------------------------------------------------- predictions


def test_predict_proba_rows_are_probabilities(clf_data):
    X, y = clf_data
    f = FeatureStreamForest(trees_per_generation=10, max_depth=4, random_state=0)
    feed(f, X, y)
    p = f.predict_proba(X)
    assert p.shape == (X.shape[0], 2)
    assert np.all(p >= 0) and np.all(p <= 1)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(f.predict(X), f.classes_[np.argmax(p, axis=1)])
    assert np.mean(f.predict(X) == y) > 0.85


def test_prediction_is_the_share_weighted_average_of_tree_probabilities(clf_data):
    X, y = clf_data
    f = FeatureStreamForest(trees_per_generation=6, max_depth=3, prune_threshold=0.0, random_state=3)
    feed(f, X, y)
    shares_by_id = {g["id"]: g["weight_share"] for g in f.generations_}
    assert len(set(np.round(list(shares_by_id.values()), 9))) > 1  # the weights really differ
    Xb = binned(f, X)
    expected = np.zeros((X.shape[0], 2))
    for g in f.state().generations:
        leaves = route.leaves(g.trees, Xb, X.shape[0])
        per_tree = np.stack([g.trees.value[g.trees.offsets[t] + leaves[:, t]] for t in range(g.n_trees)])
        expected += shares_by_id[g.id] * per_tree.mean(axis=0)
    # The weighted average of the trees' class shares is already a probability: no renormalisation needed.
    np.testing.assert_allclose(expected.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(f.predict_proba(X), expected, rtol=1e-10, atol=1e-12)


def test_mapping_input_matches_array_input(clf_data):
    X, y = clf_data
    f = FeatureStreamForest(trees_per_generation=5, max_depth=3, random_state=1)
    feed(f, X, y)
    mapping = {f"x{j}": X[:20, j] for j in reversed(range(X.shape[1]))}  # any order of keys
    np.testing.assert_array_equal(f.predict_proba(mapping), f.predict_proba(X[:20]))
    one_row = {f"x{j}": float(X[0, j]) for j in range(X.shape[1])}
    np.testing.assert_array_equal(f.predict_proba(one_row), f.predict_proba(X[:1]))


def test_binned_input_is_the_input_it_was_binned_from(clf_data):
    X, y = clf_data
    f = FeatureStreamForest(trees_per_generation=5, max_depth=3, random_state=1)
    feed(f, X, y)
    bins = Binned(f.binned(X[:20]))
    np.testing.assert_array_equal(f.predict_proba(bins), f.predict_proba(X[:20]))
    assert (f.encode(bins) != f.encode(X[:20])).nnz == 0
    with pytest.raises(ValueError, match=r"binned samples must be uint8 of shape \(\d+, n_samples\)"):
        f.predict_proba(Binned(bins.bins[:-1]))
    with pytest.raises(ValueError, match="binned samples must be uint8"):
        f.predict_proba(Binned(bins.bins.astype(np.int64)))
    with pytest.raises(ValueError, match=r"binned samples must be uint8 .*, got list"):
        f.predict_proba(Binned(bins.bins.tolist()))


def test_nominal_string_feature_and_string_labels():
    rng = np.random.default_rng(5)
    n = 300
    colour = rng.choice(["red", "green", "blue"], n).astype(object)
    size = rng.normal(size=n)
    y = np.where((colour == "red") | (size > 1.0), "yes", "no")
    f = FeatureStreamForest(trees_per_generation=8, max_depth=3, random_state=2)
    f.add_feature("colour", colour, y=y)
    f.add_feature("size", size)
    assert list(f.classes_) == ["no", "yes"]
    assert set(f.predict({"colour": colour, "size": size})) <= {"yes", "no"}
    assert np.mean(f.predict({"colour": colour, "size": size}) == y) > 0.9
    # Unseen categories and missing values are predicted, not refused.
    p = f.predict_proba({"colour": np.array(["purple", None], dtype=object), "size": np.array([np.nan, 0.0])})
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


# ----------------------------------------------------------------------------- weights, pruning, budget


def test_pruning_drops_exactly_the_generations_under_the_threshold():
    X, y = wide_stream(d=14)
    threshold = 0.02
    f = FeatureStreamForest(trees_per_generation=5, max_features=0.8, max_subspace=None, max_depth=3,
                            prune_threshold=threshold, max_generations=None, oob_score=False, random_state=4)
    n_pruned = 0
    for j in range(X.shape[1]):
        before = f.generations_
        r = f.add_feature(f"x{j}", X[:, j], y=y if j == 0 else None)
        # Shares right after the new generation joined, before pruning:
        s = shares(np.array([g["log_weight"] for g in before] + [r.log_weight]))
        expected = [g["id"] for g, share in zip(before, s[:-1], strict=True) if share < threshold]
        assert r.pruned == expected
        alive = [g["id"] for g in f.generations_]
        assert alive == [g["id"] for g in before if g["id"] not in expected] + [r.generation]
        assert r.generation in alive
        check_consistent(f)
        n_pruned += len(r.pruned)
    assert n_pruned >= 3  # pruning really happened
    assert len(f.generations_) < X.shape[1]


def test_pruning_never_drops_the_newest_generation():
    # Baseline: equal weights, so with three generations every share (1/3) is under the threshold.
    X, y = wide_stream(d=4)
    f = FeatureStreamForest(trees_per_generation=3, policy="baseline", max_depth=2, prune_threshold=0.4,
                            oob_score=False, random_state=0)
    r = feed(f, X, y, stop=2)[-1]
    assert r.pruned == [] and len(f.generations_) == 2
    r = f.add_feature("x2", X[:, 2])
    assert r.pruned == [0, 1]
    assert [g["id"] for g in f.generations_] == [2]
    assert r.weight_share == 1.0
    np.testing.assert_allclose(f.predict_proba(X[:, :3]).sum(axis=1), 1.0)


@pytest.mark.parametrize("policy", ["challenger", "baseline"])
def test_max_generations_budget_and_merging_preserve_total_weight(policy):
    X, y = wide_stream(d=10)
    budget = 3
    f = FeatureStreamForest(trees_per_generation=6, max_depth=3, policy=policy, prune_threshold=0.0,
                            max_generations=budget, oob_score=False, random_state=6)
    all_log_weights = []
    n_merged = 0
    for j in range(X.shape[1]):
        before = f.generations_
        r = f.add_feature(f"x{j}", X[:, j], y=y if j == 0 else None)
        all_log_weights.append(r.log_weight)
        gens = f.generations_
        assert len(gens) <= budget
        check_consistent(f)
        # Merging keeps the total weight: it equals the sum of every generation's weight ever grown.
        total = np.logaddexp.reduce([g["log_weight"] for g in gens])
        assert total == pytest.approx(np.logaddexp.reduce(all_log_weights), rel=1e-12, abs=1e-12)
        if r.merged:
            n_merged += 1
            a, b = before[0], before[1]
            assert r.merged == [b["id"]]
            merged = gens[0]
            assert merged["id"] == a["id"]
            assert merged["forced"] == a["forced"] + b["forced"]
            assert merged["log_weight"] == pytest.approx(np.logaddexp(a["log_weight"], b["log_weight"]), rel=1e-12)
            assert merged["n_trees"] == f.trees_per_generation
        assert all(g["n_trees"] == f.trees_per_generation for g in gens)
        assert f.n_trees_ == len(gens) * f.trees_per_generation
        f.predict_proba(X[:5, : j + 1])
    assert n_merged == X.shape[1] - budget
    assert sorted(n for g in f.generations_ for n in g["forced"]) == sorted(f.feature_names_in_)


def test_baseline_policy_gives_equal_weights(clf_data):
    X, y = clf_data
    f = FeatureStreamForest(trees_per_generation=4, max_depth=3, policy="baseline", prune_threshold=0.0,
                            random_state=0)
    reports = feed(f, X, y)
    assert [r.log_weight for r in reports] == [0.0] * X.shape[1]
    np.testing.assert_allclose([g["weight_share"] for g in f.generations_], 1.0 / X.shape[1])


def test_challenger_weights_grow_with_the_stream():
    X, y = wide_stream(d=8)
    f = FeatureStreamForest(trees_per_generation=10, max_depth=2, prune_threshold=0.0, max_generations=None,
                            oob_score=False, random_state=0)
    lw = [r.log_weight for r in feed(f, X, y)]
    # About 1 / (1 - mtry) per generation: clearly growing over the stream.
    assert lw[-1] > lw[len(lw) // 2] > lw[0]
    share = [g["weight_share"] for g in f.generations_]
    assert share[-1] == max(share)


@pytest.mark.parametrize(
    "kw",
    [{"prune_threshold": 0.02, "max_generations": None}, {"prune_threshold": 0.0, "max_generations": 3},
     {"prune_threshold": 0.02, "max_generations": 3, "max_samples": 0.4}],
    ids=["pruning", "merging", "max_samples"],
)
def test_out_of_bag_score_matches_a_computation_from_scratch(kw):
    X, y = wide_stream(n=250, d=16)
    f = FeatureStreamForest(trees_per_generation=5, max_depth=3, max_subspace=None, random_state=1, **kw)
    reports = feed(f, X, y)
    assert any(r.pruned or r.merged for r in reports)  # the incremental bookkeeping had to remove votes
    proba, seen = oob_from_scratch(f, X, y)
    assert reports[-1].oob_after == pytest.approx(roc_auc_score(y[seen], proba[seen]), rel=1e-9)


def test_cached_out_of_bag_leaves_give_the_same_sums_as_routing_again(monkeypatch):
    # Merges take some trees of two generations: their cached leaves must be exactly those trees' leaves.
    X, y = wide_stream(n=300, d=24)

    def run():
        f = FeatureStreamForest(trees_per_generation=6, max_depth=4, max_generations=4, random_state=2)
        reports = feed(f, X, y)
        return f, [r.oob_after for r in reports], sum(len(r.merged) for r in reports)

    cached, cached_scores, n_merged = run()
    monkeypatch.setattr("streamforest.oob.OOB_CACHE_BYTES", 0)
    routed, routed_scores, _ = run()
    assert n_merged > 5
    assert cached_scores == routed_scores
    assert np.array_equal(cached.state().oob_sum, routed.state().oob_sum)
    assert all(g.oob_leaves is None for g in routed.state().generations)
    assert all(g.oob_leaves is not None for g in cached.state().generations)


def test_cached_out_of_bag_votes_outlast_leaves_under_a_small_budget(monkeypatch):
    # A budget for every generation's votes but not their leaves: the leaves give way, the sums stay the same.
    X, y = wide_stream(n=300, d=24)

    def run():
        f = FeatureStreamForest(trees_per_generation=6, max_depth=4, max_generations=4, random_state=2)
        feed(f, X, y)
        return f

    full = run()
    gens = full.state().generations
    votes = sum(g.oob_votes[0].nbytes + g.oob_votes[1].nbytes for g in gens)
    monkeypatch.setattr("streamforest.oob.OOB_CACHE_BYTES", votes + gens[0].oob_leaves.nbytes)
    small = run()
    assert np.array_equal(full.state().oob_sum, small.state().oob_sum)
    assert all(g.oob_votes is not None for g in small.state().generations)
    assert sum(g.oob_leaves is not None for g in small.state().generations) < len(gens)


def test_forest_trees_respect_depth_and_leaf_size():
    X, y = wide_stream(n=400, d=6)
    f = FeatureStreamForest(trees_per_generation=6, max_depth=3, min_samples_leaf=12, split_features=0.5,
                            random_state=0)
    feed(f, X, y)
    for g in f.state().generations:
        assert g.trees.depth_of_nodes().max() <= 3
        assert g.trees.weight[g.trees.left < 0].min() >= 12
    deep = FeatureStreamForest(trees_per_generation=3, max_depth=None, random_state=0)
    feed(deep, X, y, stop=2)
    assert max(g.trees.depth_of_nodes().max() for g in deep.state().generations) > 6  # None really is unlimited


# ----------------------------------------------------------------------------- importances


def test_feature_importances_sum_to_one_and_rank_informative_above_noise(clf_data):
    X, y = clf_data  # x0 and x2 informative, x1 and x3 noise
    f = FeatureStreamForest(trees_per_generation=15, max_depth=4, random_state=0)
    feed(f, X, y)
    assert isinstance(f.feature_importances_, np.ndarray)
    assert f.feature_importances_.shape == f.feature_names_in_.shape
    imp = dict(zip(f.feature_names_in_, f.feature_importances_, strict=True))
    assert sum(imp.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(v >= 0 for v in imp.values())
    assert min(imp["x0"], imp["x2"]) > max(imp["x1"], imp["x3"])
    assert imp["x0"] > imp["x2"]


# ----------------------------------------------------------------------------- reports


def test_add_feature_reports_are_sane(clf_data):
    X, y = clf_data
    f = FeatureStreamForest(trees_per_generation=8, max_depth=4, random_state=0)
    reports = feed(f, X, y)
    for k, r in enumerate(reports):
        assert isinstance(r, FeatureReport)
        assert r.feature == f"x{k}"
        assert r.generation == k
        assert r.n_trees == 8
        assert r.oob_metric == "auc"
        assert 0.0 <= r.oob_after <= 1.0
        assert 0.0 < r.weight_share <= 1.0 and math.isfinite(r.log_weight)
        assert r.seconds > 0
        assert set(r.to_dict()) >= {"feature", "generation", "weight_share", "pruned", "importance",
                                    "oob_before", "oob_after"}
        if k == 0:
            assert r.oob_before is None
            assert r.weight_share == 1.0
        else:
            # The score before a generation is the score after the previous one.
            assert r.oob_before == pytest.approx(reports[k - 1].oob_after, rel=1e-12)
    last = reports[-1]
    assert last.weight_share == pytest.approx(
        next(g["weight_share"] for g in f.generations_ if g["id"] == last.generation), rel=1e-12)
    assert last.importance == pytest.approx(f.feature_importances_[list(f.feature_names_in_).index("x3")], rel=1e-9)
    # Informative x0 gives a good out-of-bag AUC; noise x1 cannot add much.
    assert reports[0].oob_after > 0.75
    assert reports[2].oob_after > reports[2].oob_before  # x2 is informative


def test_a_paired_null_is_the_forest_grown_on_the_permuted_feature_and_leaves_the_forest_as_it_was(clf_data):
    from streamforest.forest import _NULL_SALT
    from streamforest.rng import derive_seed

    X, y = clf_data
    kw = {"trees_per_generation": 12, "max_depth": 5, "random_state": 3}
    plain, paired, permuted = (FeatureStreamForest(**kw) for _ in range(3))
    for f in (plain, paired, permuted):
        feed(f, X, y, stop=2)
    r_plain = plain.add_feature("x2", X[:, 2])
    r = paired.add_feature("x2", X[:, 2], paired_null=True)
    # the twin never joins the forest: the same report (but the twin's fields) and the same predictions
    assert {k: v for k, v in r.to_dict().items() if k not in ("seconds", "oob_null", "oob_paired_se")} == \
        {k: v for k, v in r_plain.to_dict().items() if k != "seconds"}
    assert "oob_null" not in r_plain.to_dict()
    np.testing.assert_array_equal(paired.predict_proba(X[:, :3]), plain.predict_proba(X[:, :3]))
    # oob_null is the score of the forest whose newest feature had the twin's permuted values
    order = np.random.default_rng(derive_seed(3, r.generation, _NULL_SALT)).permutation(X.shape[0])
    assert r.oob_null == pytest.approx(permuted.add_feature("x2", X[order, 2]).oob_after, abs=1e-12)
    # x2 is informative: far more than its noise over the pairs of trees
    assert r.oob_after - r.oob_null > 3 * r.oob_paired_se > 0


def test_a_paired_null_of_noise_is_within_its_standard_error():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 1] + rng.normal(size=200) > 0).astype(int)
    f = FeatureStreamForest(trees_per_generation=20, random_state=0)
    feed(f, X, y, stop=2)
    t = []
    for k in range(12):
        r = f.add_feature(f"noise{k}", rng.normal(size=200), paired_null=True)
        t.append((r.oob_after - r.oob_null) / r.oob_paired_se)
    # a t statistic of noise: about normal (with 12 of them, the mean within 3 SE of 0 and the sd near 1)
    assert abs(np.mean(t)) < 3 / np.sqrt(12) and 0.5 < np.std(t) < 1.6, t


def test_oob_score_off_reports_none(clf_data):
    X, y = clf_data
    f = FeatureStreamForest(trees_per_generation=4, max_depth=3, oob_score=False, random_state=0)
    for r in feed(f, X, y):
        assert r.oob_before is None and r.oob_after is None


def test_the_out_of_bag_error_is_the_share_of_left_out_samples_whose_vote_is_wrong(clf_data):
    X, y = clf_data
    f = FeatureStreamForest(trees_per_generation=20, max_depth=4, random_state=0).fit(X, y)
    oob = f._oob
    voted = oob.count > 0
    assert voted.sum() > 0.9 * len(y)  # nearly every sample is left out by one of 20 trees
    wrong = np.argmax(oob.sum[voted], axis=1) != y[voted]
    assert f.oob_error_ == pytest.approx(wrong.mean()) and 0 < f.oob_error_ < 0.25  # x0 and x2 are informative
    shuffled = FeatureStreamForest(trees_per_generation=20, max_depth=4, random_state=0).fit(
        X, np.random.default_rng(0).permutation(y))
    assert shuffled.oob_error_ > 0.35  # labels unrelated to the features: about a coin's error
    assert FeatureStreamForest(oob_score=False, random_state=0).fit(X, y).oob_error_ is None
    assert FeatureStreamForest(task="regression", random_state=0).fit(X, X[:, 0]).oob_error_ is None


# ----------------------------------------------------------------------------- more samples


def test_add_samples_regrows_but_keeps_the_bookkeeping():
    X, y = wide_stream(n=400, d=5)
    f = FeatureStreamForest(trees_per_generation=8, max_depth=4, random_state=7)
    feed(f, X[:250], y[:250])
    ledger_before = (f.state().ledger.log_scale, f.state().ledger.v.copy())
    gens_before = f.generations_
    p_before = f.predict_proba(X[250:])
    f.add_samples(X[250:], y[250:])
    assert f.n_samples_ == 400
    assert f.state().ledger.log_scale == ledger_before[0]
    np.testing.assert_array_equal(f.state().ledger.v, ledger_before[1])
    assert f.generations_ == gens_before  # same ids, forced features, weights, tree counts
    assert not np.array_equal(f.predict_proba(X[250:]), p_before)
    # Every tree was regrown on all samples: a bootstrap draws as many samples as there are.
    for g in f.state().generations:
        np.testing.assert_array_equal(g.trees.weight[g.trees.offsets[:-1]], 400.0)
    # A mapping works too, and the next feature sees every sample.
    f.add_samples({f"x{j}": X[:10, j] for j in range(5)}, y[:10])
    assert f.n_samples_ == 410
    r = f.add_feature("late", np.concatenate([X[:400, 0], X[:10, 0]]))
    assert r.n_trees == 8
    check_consistent(f)


def test_auto_trees_per_generation_follow_the_training_samples_and_drop_to_50_once_capped():
    X, y = wide_stream(n=6000, d=6)
    f = FeatureStreamForest(max_depth=2, max_subspace=3, prune_threshold=0.0, random_state=0)
    assert f.trees_per_generation == "auto"
    assert f.add_feature("x0", X[:3000, 0], y=y[:3000]).n_trees == 250  # 750,000 / 3,000
    f.add_samples(X[3000:, :1], y[3000:])
    # A generation keeps its trees; the next one is grown for 6,000 samples.
    assert [g["n_trees"] for g in f.generations_] == [250]
    for j in range(1, 6):
        f.add_feature(f"x{j}", X[:, j])
    # 2/3 of 5 features is more than max_subspace=3 can follow: the fifth arrival's generation is capped.
    assert [g["n_trees"] for g in f.generations_][-5:] == [125, 125, 125, 50, 50]
    check_consistent(f)
    g = FeatureStreamForest(max_depth=2, random_state=0).fit(X[:200, :2], y[:200])
    assert g.n_trees_ == 300


def test_add_samples_gives_the_forest_grown_with_all_samples_from_the_start():
    # With few distinct values the bins do not depend on which samples came first; then the forest after
    # add_samples is exactly the one grown on all samples from the start (same subspaces, seeds and weights).
    rng = np.random.default_rng(0)
    X = rng.integers(0, 12, size=(400, 5)).astype(np.float64)
    y = (X[:, 0] - X[:, 3] + 3 * rng.normal(size=400) > 0).astype(np.int64)
    # A fixed leaf size: "auto" chooses a narrow generation's among three on the samples of its birth.
    kw = dict(trees_per_generation=6, max_depth=4, max_generations=3, min_samples_leaf=12, random_state=2)
    late = FeatureStreamForest(**kw)
    feed(late, X[:250], y[:250], stop=4)
    early = FeatureStreamForest(**kw)
    feed(early, X, y, stop=4)
    assert [b.to_json() for b in late.state().binners] == [b.to_json() for b in early.state().binners]  # the premise
    late.add_samples(X[250:, :4], y[250:])
    np.testing.assert_array_equal(late.predict_proba(X[:, :4]), early.predict_proba(X[:, :4]))
    assert late.generations_ == early.generations_
    r_late, r_early = late.add_feature("x4", X[:, 4]), early.add_feature("x4", X[:, 4])
    assert (r_late.oob_before, r_late.oob_after) == (r_early.oob_before, r_early.oob_after)


def test_add_samples_learns_from_the_new_samples():
    # The first samples say nothing about x0; the new ones do.
    rng = np.random.default_rng(8)
    x = rng.normal(size=600)
    y = (x > 0).astype(int)
    y_first = rng.integers(0, 2, 200)
    f = FeatureStreamForest(trees_per_generation=10, max_depth=3, random_state=0)
    f.add_feature("x", x[:200], y=y_first)
    acc_before = np.mean(f.predict(x[200:, None]) == y[200:])
    f.add_samples(x[200:, None], y[200:])
    acc_after = np.mean(f.predict(x[200:, None]) == y[200:])
    assert acc_after > 0.9 > acc_before


# ----------------------------------------------------------------------------- tasks


def test_regression():
    rng = np.random.default_rng(9)
    n = 400
    X = rng.normal(size=(n, 3))
    y = 3.0 * X[:, 0] + np.where(X[:, 2] > 0, 2.0, -2.0) + 0.2 * rng.normal(size=n)
    f = FeatureStreamForest(trees_per_generation=10, max_depth=5, task="regression", random_state=0)
    reports = feed(f, X, y)
    assert f.classes_ is None
    assert all(r.oob_metric == "r2" for r in reports)
    # x0 alone carries 9 / 13 of the variance; the step on x2 most of the rest.
    assert reports[0].oob_after > 0.5
    assert reports[2].oob_after > reports[2].oob_before
    pred = f.predict(X)
    assert pred.shape == (n,) and pred.dtype == np.float64
    assert 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2) > reports[0].oob_after
    # Predictions are averages of training targets.
    assert y.min() <= pred.min() and pred.max() <= y.max()
    with pytest.raises(AttributeError, match="predict_proba"):
        f.predict_proba(X)
    f.add_samples(X[:5], y[:5])
    assert f.n_samples_ == n + 5


def test_multiclass():
    rng = np.random.default_rng(10)
    n = 450
    X = rng.normal(size=(n, 3))
    labels = np.array(["low", "mid", "high"])
    y = labels[np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5])]
    f = FeatureStreamForest(trees_per_generation=10, max_depth=4, random_state=0)
    reports = feed(f, X, y)
    assert sorted(f.classes_) == sorted(labels)
    assert all(r.oob_metric == "log_loss" for r in reports)
    assert reports[-1].oob_after < math.log(3)  # better than guessing the three classes uniformly
    p = f.predict_proba(X)
    assert p.shape == (n, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    assert np.mean(f.predict(X) == y) > 0.8
    with pytest.raises(ValueError, match="classes not seen"):
        f.add_samples(X[:2], np.array(["low", "extreme"]))


def test_offline_fit():
    X, y = wide_stream(d=6)
    f = FeatureStreamForest(trees_per_generation=12, max_depth=4, random_state=0).fit(X, y)
    assert list(f.feature_names_in_) == [f"x{j}" for j in range(6)]
    assert f.n_trees_ == 12
    assert len(f.generations_) == 1 and f.generations_[0]["weight_share"] == 1.0
    assert np.mean(f.predict(X) == y) > 0.8
    g = f.fit({"a": X[:, 0], "b": X[:, 3]}, y)
    assert g is f and list(f.feature_names_in_) == ["a", "b"] and f.n_trees_ == 12
    check_consistent(f)


# ----------------------------------------------------------------------------- determinism

DETERMINISM_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from streamforest import FeatureStreamForest

    seed = int(sys.argv[1])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    X[rng.uniform(size=X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 4]) + 0.5 * rng.normal(size=300) > 0).astype(int)
    f = FeatureStreamForest(trees_per_generation=7, max_depth=5, split_features=0.5, max_generations=4,
                            random_state=seed)
    reports = [f.add_feature(f"x{j}", X[:200, j], y=y[:200] if j == 0 else None) for j in range(6)]
    f.add_samples(X[200:250], y[200:250])
    p = f.predict_proba(X[250:])
    sys.stdout.write(p.tobytes().hex() + "\\n")
    sys.stdout.write(" ".join(float(r.oob_after).hex() for r in reports) + "\\n")
    """
)


def run_script(seed: int, threads: int) -> str:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads))
    out = subprocess.run(
        [sys.executable, "-c", DETERMINISM_SCRIPT, str(seed)], cwd=REPO, env=env, capture_output=True, text=True,
        check=True, timeout=300,
    )
    return out.stdout


def test_same_seed_gives_identical_predictions_in_separate_processes():
    a = run_script(seed=42, threads=1)
    b = run_script(seed=42, threads=2)
    assert len(a.splitlines()[0]) == 50 * 2 * 8 * 2  # 50 rows x 2 classes x 8 bytes, as hex
    assert a == b


def test_same_seed_same_forest_in_process_and_different_seeds_differ(clf_data):
    X, y = clf_data
    kw = dict(trees_per_generation=6, max_depth=4, random_state=11)
    a = FeatureStreamForest(**kw)
    b = FeatureStreamForest(**kw)
    feed(a, X, y)
    feed(b, X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.generations_ == b.generations_
    c = FeatureStreamForest(**{**kw, "random_state": 12})
    feed(c, X, y)
    assert not np.array_equal(a.predict_proba(X), c.predict_proba(X))


# ----------------------------------------------------------------------------- bad inputs


@pytest.fixture
def fitted(clf_data):
    X, y = clf_data
    f = FeatureStreamForest(trees_per_generation=3, max_depth=2, random_state=0)
    feed(f, X[:, :2], y)
    return f, X, y


def test_wrong_length_of_a_feature_column(fitted):
    f, X, _ = fitted
    with pytest.raises(ValueError, match=r"'late' has 399 values; the forest has 400 samples"):
        f.add_feature("late", X[:-1, 0])
    assert list(f.feature_names_in_) == ["x0", "x1"]  # nothing half-added


def test_wrong_length_on_the_first_call(clf_data):
    X, y = clf_data
    with pytest.raises(ValueError, match=r"'x0' has 400 values but y has"):
        FeatureStreamForest().add_feature("x0", X[:, 0], y=y[:-1])


def test_duplicate_feature_name(fitted):
    f, X, _ = fitted
    with pytest.raises(ValueError, match="duplicate feature name 'x1'"):
        f.add_feature("x1", X[:, 2])


@pytest.mark.parametrize("name", ["", None, 3])
def test_feature_name_must_be_a_string(fitted, name):
    f, X, _ = fitted
    with pytest.raises(TypeError, match="feature name"):
        f.add_feature(name, X[:, 2])


def test_feature_values_must_be_one_dimensional(fitted):
    f, X, _ = fitted
    with pytest.raises(ValueError, match=r"'wide'.*1-D"):
        f.add_feature("wide", X[:, :2])


def test_labels_with_nan(clf_data):
    X, y = clf_data
    y = y.astype(float)
    y[5] = np.nan
    with pytest.raises(ValueError, match="NaN labels"):
        FeatureStreamForest().add_feature("x0", X[:, 0], y=y)
    y_obj = np.array(["a", "b", None] * 10, dtype=object)
    with pytest.raises(ValueError, match="missing labels"):
        FeatureStreamForest().add_feature("x0", np.arange(30.0), y=y_obj)


def test_regression_targets_must_be_finite():
    with pytest.raises(ValueError, match="NaN or infinite"):
        FeatureStreamForest(task="regression").add_feature("x", np.arange(3.0), y=np.array([1.0, np.inf, 2.0]))


def test_one_class_only(clf_data):
    X, _ = clf_data
    with pytest.raises(ValueError, match="single class"):
        FeatureStreamForest().add_feature("x0", X[:, 0], y=np.ones(X.shape[0]))


def test_infinite_feature_values(fitted):
    f, X, _ = fitted
    col = X[:, 2].copy()
    col[3] = np.inf
    with pytest.raises(ValueError, match=r"'inf_col'.*infinite"):
        f.add_feature("inf_col", col)
    Z = X[:4, :2].copy()
    Z[0, 1] = -np.inf
    with pytest.raises(ValueError, match=r"'x1'.*infinite"):
        f.predict_proba(Z)


def test_unknown_and_missing_feature_names_at_predict_time(fitted):
    f, X, _ = fitted
    with pytest.raises(ValueError, match=r"unknown feature names: \['typo'\]"):
        f.predict_proba({"x0": X[:3, 0], "x1": X[:3, 1], "typo": X[:3, 2]})
    with pytest.raises(ValueError, match=r"lacks features: \['x1'\]"):
        f.predict_proba({"x0": X[:3, 0]})
    with pytest.raises(ValueError, match="differ in length"):
        f.predict_proba({"x0": X[:3, 0], "x1": X[:4, 1]})


def test_wrong_number_of_columns_at_predict_time(fitted):
    f, X, _ = fitted
    with pytest.raises(ValueError, match="has 3 columns; the forest has 2 features"):
        f.predict_proba(X[:5, :3])
    with pytest.raises(ValueError, match="2-D"):
        f.predict(X[:5, 0])


def test_predicting_before_any_feature(clf_data):
    X, _ = clf_data
    with pytest.raises(ValueError, match="no trees yet"):
        FeatureStreamForest().predict_proba(X[:, :0])
    with pytest.raises(ValueError, match="no trees yet"):
        FeatureStreamForest().predict(X[:, :0])


def test_missing_y_on_first_add_feature(clf_data):
    X, _ = clf_data
    with pytest.raises(ValueError, match=r"y .*required"):
        FeatureStreamForest().add_feature("x0", X[:, 0])


def test_later_y_must_match(fitted):
    f, X, y = fitted
    f.add_feature("x2", X[:, 2], y=y)  # the same labels again are fine
    with pytest.raises(ValueError, match="y differs"):
        f.add_feature("x3", X[:, 3], y=1 - y)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"policy": "greedy"}, ValueError, "policy must be one of"),
        ({"max_features": 0.0}, ValueError, "max_features"),
        ({"max_features": 1.5}, ValueError, "max_features"),
        ({"max_features": 0}, ValueError, "max_features"),
        ({"max_features": "sqrt"}, TypeError, "max_features"),
        ({"max_features": True}, TypeError, "max_features"),
        ({"max_features": float("nan")}, ValueError, "max_features"),
        ({"trees_per_generation": 0}, ValueError, "trees_per_generation"),
        ({"trees_per_generation": 2.5}, ValueError, "trees_per_generation"),
        ({"trees_per_generation": True}, ValueError, "trees_per_generation"),
        ({"trees_per_generation": "many"}, ValueError, "positive integer or 'auto'"),
        ({"task": "clustering"}, ValueError, "task must be one of"),
        ({"max_depth": 0}, ValueError, "max_depth"),
        ({"max_subspace": -1}, ValueError, "max_subspace"),
        ({"max_generations": 1}, ValueError, "max_generations"),
        ({"min_samples_leaf": 0.5}, ValueError, "min_samples_leaf"),
        ({"min_samples_leaf": "1"}, ValueError, "min_samples_leaf"),
        ({"split_features": 0.0}, ValueError, "split_features"),
        ({"split_features": 1.5}, ValueError, "split_features"),
        ({"feature_sampling": "chi2"}, ValueError, "feature_sampling"),
        ({"prune_threshold": 1.0}, ValueError, "prune_threshold"),
        ({"prune_threshold": -0.1}, ValueError, "prune_threshold"),
        ({"prune_threshold": float("nan")}, ValueError, "prune_threshold"),
        ({"prune_threshold": "0.01"}, (TypeError, ValueError), "prune_threshold"),
        ({"split_features": "half"}, (TypeError, ValueError), "split_features"),
    ],
)
def test_bad_constructor_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        FeatureStreamForest(**kwargs)


def test_add_samples_before_any_feature():
    with pytest.raises(ValueError, match="add_samples needs at least one feature"):
        FeatureStreamForest().add_samples(np.zeros((2, 1)), np.array([0, 1]))


def test_add_samples_bad_inputs(fitted):
    f, X, _ = fitted
    with pytest.raises(ValueError, match=r"classes not seen on the first call: \[7\]"):
        f.add_samples(X[:3, :2], np.array([0, 1, 7]))
    with pytest.raises(ValueError, match="one label per row"):
        f.add_samples(X[:3, :2], np.array([0, 1]))
    with pytest.raises(ValueError, match="has 4 columns"):
        f.add_samples(X[:3], np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="NaN labels"):
        f.add_samples(X[:2, :2], np.array([0.0, np.nan]))
    assert f.n_samples_ == X.shape[0]  # nothing half-added


def test_fit_bad_inputs(clf_data):
    X, y = clf_data
    with pytest.raises(ValueError, match="2-D"):
        FeatureStreamForest().fit(X[:, 0], y)
    with pytest.raises(ValueError, match="'b' has 3 values but y has 400"):
        FeatureStreamForest().fit({"a": X[:, 0], "b": X[:3, 1]}, y)
    with pytest.raises(ValueError, match="no features"):
        FeatureStreamForest().fit(X[:, :0], y)


# ----------------------------------------------------------------------------- scikit-learn conventions, state


def test_get_params_round_trips_and_set_params_refuses_bad_values_without_change():
    f = FeatureStreamForest(trees_per_generation=7, max_depth=None, random_state=3)
    params = f.get_params()
    assert params["trees_per_generation"] == 7 and params["max_depth"] is None
    assert FeatureStreamForest(**params).get_params() == params
    assert f.set_params(max_depth=4, policy="baseline") is f
    assert (f.max_depth, f.policy) == (4, "baseline")
    with pytest.raises(ValueError, match="max_depth"):
        f.set_params(max_depth=0, policy="challenger")
    assert (f.max_depth, f.policy) == (4, "baseline")  # nothing half-set
    with pytest.raises(ValueError, match="unknown parameters"):
        f.set_params(n_estimators=3)


@pytest.mark.parametrize("bad", [0, -3, 1.5, 0.0, "half", True])
def test_max_samples_refuses_what_is_not_a_count_or_a_share(bad):
    with pytest.raises(ValueError, match="max_samples must be a positive integer, a float in"):
        FeatureStreamForest(max_samples=bad)


def test_max_samples_draws_that_many_per_tree_by_class_and_is_fixed_once_fitted(clf_data, tmp_path):
    X, y = clf_data  # 400 samples
    small = FeatureStreamForest(trees_per_generation=20, min_samples_leaf=1, max_samples=100, random_state=0).fit(X, y)
    full = FeatureStreamForest(trees_per_generation=20, min_samples_leaf=1, random_state=0).fit(X, y)
    y_codes = y.astype(np.int32)
    for g in small.state().generations:
        for seed in g.seeds:
            counts = bootstrap_counts(400, y_codes, 2, True, 100, np.uint64(seed))
            assert counts.sum() == 100 and counts[y == 1].sum() == round(100 * y.mean())
    # Trees grown on a quarter of the samples, leaves of one sample: about a quarter of the nodes.
    assert small.state().generations[0].trees.n_nodes < 0.4 * full.state().generations[0].trees.n_nodes
    assert roc_auc_score(y, small.predict_proba(X)[:, 1]) > 0.9
    with pytest.raises(ValueError, match="max_samples cannot change once the forest has samples"):
        small.set_params(max_samples=200)
    small.save(tmp_path / "f.npz")
    again = FeatureStreamForest.load(tmp_path / "f.npz")
    assert again.max_samples == 100
    np.testing.assert_array_equal(again.predict_proba(X), small.predict_proba(X))
    # max_samples of at least the samples is Breiman's bootstrap: the same forest as without it
    same = FeatureStreamForest(trees_per_generation=20, min_samples_leaf=1, max_samples=1.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(same.predict_proba(X), full.predict_proba(X))


def test_midpoint_thresholds_send_an_unseen_value_to_the_side_of_the_nearer_training_values():
    # Class 0 at 0..9, class 1 at 20..29. A tree whose bootstrap left out 9 splits between 8 and 20: midway (as
    # scikit-learn) 9.4 goes left with 8; at the bin edge after 8 ("edge") it goes right, in about a third of trees.
    x = np.concatenate([np.arange(10.0), np.arange(20.0, 30.0)])
    y = (x > 15).astype(int)
    p1 = {}
    for rule in ("midpoint", "edge"):
        f = FeatureStreamForest(trees_per_generation=40, split_threshold=rule, random_state=0)
        f.add_feature("x", x, y=y)
        p1[rule] = f.predict_proba(np.array([[9.4], [19.6]]))[:, 1]
    assert p1["midpoint"][0] == 0.0 and p1["midpoint"][1] == 1.0
    assert p1["edge"][0] > 0.2


def test_midpoint_thresholds_lie_midway_between_the_node_values_as_scikit_learns():
    # Class 0 at 0..9, class 1 at 20..29. A tree whose bootstrap kept 9 splits at 14.5, one that left 9 out at 14
    # (midway between 8 and 20, as scikit-learn's trees): 14.2 goes right in about a third of the trees and 10 in
    # none. Without empty bins between the training values, 10 and 14.2 share the bin of 9 and the same fate.
    x = np.concatenate([np.arange(10.0), np.arange(20.0, 30.0)])
    y = (x > 15).astype(int)
    f = FeatureStreamForest(trees_per_generation=60, split_threshold="midpoint", random_state=0)
    f.add_feature("x", x, y=y)
    p1 = f.predict_proba(np.array([[10.0], [14.2]]))[:, 1]
    assert p1[0] == 0.0 and 0.15 < p1[1] < 0.6


def test_set_params_random_state_reseeds_and_task_is_fixed_once_fitted(clf_data):
    X, y = clf_data
    a = FeatureStreamForest(trees_per_generation=5, random_state=0).set_params(random_state=1).fit(X, y)
    b = FeatureStreamForest(trees_per_generation=5, random_state=1).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    with pytest.raises(ValueError, match="task"):
        a.set_params(task="regression")


def test_state_rebuilds_a_forest_that_continues_identically(clf_data):
    X, y = clf_data
    a = FeatureStreamForest(trees_per_generation=5, random_state=0)
    a.add_feature("x0", X[:, 0], y=y)
    b = FeatureStreamForest.from_state(a.state())
    for f in (a, b):
        f.add_feature("x1", X[:, 1])
    np.testing.assert_array_equal(a.predict_proba(X[:, :2]), b.predict_proba(X[:, :2]))
    assert a.generations_ == b.generations_
