"""FeatureStreamForest on a moving window of samples: set_samples (new training set, old trees kept) and refresh
(a generation with no forced feature, weighted so that older generations decay)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from test_forest import binned, check_consistent, oob_from_scratch, wide_stream

from streamforest import FeatureStreamForest


def drifting(n: int = 1200, d: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The label follows x0 in the first half and -x0 (with x1) in the second."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(np.arange(n) < n // 2, X[:, 0] > 0, X[:, 0] + X[:, 1] < 0).astype(np.int64)
    return X, y


def small(**kw) -> FeatureStreamForest:
    return FeatureStreamForest(**{"trees_per_generation": 6, "max_depth": 4, "random_state": 3, **kw})


def check_oob(f: FeatureStreamForest, X: np.ndarray, y: np.ndarray, reported: float) -> None:
    proba, seen = oob_from_scratch(f, X, y)
    ok = f.state().oob_count > 1e-9 * f.state().oob_count.max()
    np.testing.assert_array_equal(ok, seen)
    np.testing.assert_allclose(f.state().oob_sum[ok, 1] / f.state().oob_count[ok], proba[seen], rtol=1e-9, atol=1e-12)
    # AUC only up to ties that rounding may break after votes were subtracted.
    assert reported == pytest.approx(roc_auc_score(y[seen], proba[seen]), abs=1e-3)


# ----------------------------------------------------------------------------- set_samples


def test_set_samples_replaces_the_training_set_and_keeps_the_trees():
    X, y = drifting()
    f = small().fit(X[:300], y[:300])
    p_before, version = f.predict_proba(X[600:700]), f.model_version_
    gens = f.generations_
    f.set_samples(X[300:800], y[300:800])
    assert f.n_samples_ == 500
    np.testing.assert_array_equal(f.state().columns, binned(f, X[300:800]))
    assert f.generations_ == gens
    np.testing.assert_array_equal(f.predict_proba(X[600:700]), p_before)
    assert f.model_version_ == version + 1
    # Like add_samples: encodings from before are re-encoded, not patched.
    with pytest.raises(ValueError, match="re-encode"):
        f.encode_delta(X[:5], since=version)
    # A mapping works too, and a new length again.
    f.set_samples({f"x{j}": X[:50, j] for j in range(X.shape[1])}, y[:50])
    assert f.n_samples_ == 50


def test_out_of_bag_counts_only_generations_grown_on_the_current_samples():
    X, y = drifting()
    f = small(prune_threshold=0.0, max_generations=2)
    f.fit(X[:400], y[:400])
    f.set_samples(X[400:900], y[400:900])
    r = f.refresh()
    assert r.oob_before is None  # nothing alive was grown on these samples
    check_oob(f, X[400:900], y[400:900], r.oob_after)
    # The budget merges the old generation with the first refresh: trees grown on other samples are in the
    # merged one, so it leaves the out-of-bag votes.
    r = f.refresh()
    assert r.merged and r.oob_before is not None
    check_oob(f, X[400:900], y[400:900], r.oob_after)
    assert [g.in_oob for g in f.state().generations] == [False, True]
    check_consistent(f)


def test_set_samples_bad_inputs():
    X, y = drifting(200)
    with pytest.raises(ValueError, match="needs at least one feature"):
        FeatureStreamForest().set_samples(X, y)
    f = small().fit(X, y)
    with pytest.raises(ValueError, match="one label per sample"):
        f.set_samples(X[:10], y[:9])
    with pytest.raises(ValueError, match="not seen on the first call"):
        f.set_samples(X[:3], np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="lacks features"):
        f.set_samples({"x0": X[:3, 0]}, y[:3])
    with pytest.raises(ValueError, match="at least one sample"):
        f.set_samples(X[:0], y[:0])


def test_refresh_before_any_feature():
    with pytest.raises(ValueError, match="no trees yet"):
        FeatureStreamForest().refresh()


# ----------------------------------------------------------------------------- refresh


def test_refreshes_follow_a_drifting_concept_and_stay_bounded():
    X, y = drifting(1600)
    f = small(trees_per_generation=10, max_depth=5, max_generations=6)
    f.fit(X[:400], y[:400])
    n_gens = []
    for stop in range(500, 1601, 100):
        f.set_samples(X[stop - 400:stop], y[stop - 400:stop])
        r = f.refresh()
        assert r.feature == "" and r.importance == 0.0 and r.n_trees == 10
        assert f.generations_[-1]["forced"] == []
        n_gens.append(len(f.generations_))
        check_consistent(f)
    # Each refresh outweighs the one before by about 1 / (1 - mtry): the old concept's trees are pruned away.
    assert max(n_gens) <= 6 and 0 not in [g["id"] for g in f.generations_]
    rng = np.random.default_rng(9)
    Xt = rng.normal(size=(2000, 4))
    yt = (Xt[:, 0] + Xt[:, 1] < 0).astype(int)
    assert roc_auc_score(yt, f.predict_proba(Xt)[:, 1]) > 0.9


def test_refresh_weight_is_the_challenger_weight_of_the_fresh_samples():
    X, y = wide_stream(n=300, d=12)  # past the narrow width
    f = small(prune_threshold=0.0, max_generations=None, oob_score=False).fit(X, y)
    ratios = []
    for _ in range(6):
        V_prev = f.state().ledger.virtual_use()
        r = f.refresh()
        g = f.state().generations[-1]
        use = np.zeros(12)
        for s in g.subspaces:
            use[s] += 1
        w = math.exp(r.log_weight)
        # w = mean(V) / (trees - mean(use)), and every feature gains w * use.
        assert w == pytest.approx(V_prev.mean() / (f.trees_per_generation - use.mean()), rel=1e-9)
        np.testing.assert_allclose(f.state().ledger.virtual_use(), V_prev + w * use, rtol=1e-9)
        ratios.append(math.exp(r.log_weight - f.state().generations[-2].log_weight))
    # About 1 / (1 - 2/3) = 3 per refresh once the first generations have faded.
    assert 2 < np.median(ratios) < 4.5


def test_add_feature_after_refreshes_keeps_the_bookkeeping_balanced():
    X, y = wide_stream(n=300, d=13)
    f = small(prune_threshold=0.0, max_generations=None, oob_score=False)
    f.fit(X[:, :12], y)  # past the narrow width
    for _ in range(5):
        f.refresh()
    last_refresh = f.state().generations[-1].log_weight
    r = f.add_feature("late", X[:, 12])
    V = f.state().ledger.virtual_use()
    # Algorithm 1 still holds: the new feature is as used as an average old one...
    assert V[-1] == pytest.approx(V[:-1].mean(), rel=1e-9)
    # ...and its generation sits on the refreshes' scale (about one more step of 1 / (1 - mtry)), neither
    # swamped by them nor swamping the forest.
    assert 1.5 < math.exp(r.log_weight - last_refresh) < 6
    assert 0.4 < r.weight_share < 0.9
    f.refresh()
    assert f.generations_[-1]["weight_share"] > f.generations_[-2]["weight_share"]


def test_thousands_of_refreshes_keep_weights_finite():
    X, y = wide_stream(n=60, d=3)
    f = FeatureStreamForest(trees_per_generation=2, max_depth=1, oob_score=False, random_state=0).fit(X, y)
    for _ in range(2000):
        f.refresh()
    assert all(math.isfinite(g["log_weight"]) for g in f.generations_)
    assert f.generations_[-1]["log_weight"] > 1000  # far beyond what exp() could hold
    assert len(f.generations_) <= f.max_generations
    check_consistent(f)


def test_baseline_refreshes_weigh_the_same():
    X, y = wide_stream(n=200, d=4)
    f = small(policy="baseline", prune_threshold=0.0, max_generations=None).fit(X, y)
    f.refresh()
    f.refresh()
    assert [g["weight_share"] for g in f.generations_] == pytest.approx([1 / 3] * 3)


def test_refresh_is_deterministic_and_survives_save_and_load(tmp_path):
    X, y = drifting(900)

    def run(save_at: int | None) -> FeatureStreamForest:
        f = small(max_generations=3).fit(X[:300], y[:300])
        for k, stop in enumerate(range(400, 901, 100)):
            if k == save_at:
                f.save(tmp_path / "f.npz")
                f = FeatureStreamForest.load(tmp_path / "f.npz")
            f.set_samples(X[stop - 300:stop], y[stop - 300:stop])
            f.refresh()
            if k == save_at:  # the out-of-bag flags went through the file too
                f.save(tmp_path / "g.npz")
                assert [g.in_oob for g in FeatureStreamForest.load(tmp_path / "g.npz").state().generations] == [
                    g.in_oob for g in f.state().generations]
        return f

    ref = run(None)
    for save_at in (0, 3):
        other = run(save_at)
        assert other.generations_ == ref.generations_
        np.testing.assert_array_equal(other.predict_proba(X[:50]), ref.predict_proba(X[:50]))


def test_one_row_mapping_takes_the_row_path_with_the_same_bins():
    X, y = drifting(300)
    cat = np.array(["a", "b", "c"], dtype=object)[np.arange(300) % 3]
    f = small()
    for j in range(3):
        f.add_feature(f"x{j}", X[:, j], y=y if j == 0 else None)
    f.add_feature("c", cat)
    rows = [(X[i, 0], np.float32(X[i, 1]), None, cat[i]) for i in range(20)] + [(1e9, -1e9, 0, "zz")]
    for row in rows:
        one = f.predict_proba(dict(zip(f.feature_names_in_, row, strict=True)))
        cols = {name: np.array([v], dtype=object if name == "c" else float)
                for name, v in zip(f.feature_names_in_, row, strict=True)}
        np.testing.assert_array_equal(one, f.predict_proba(cols))
    with pytest.raises(TypeError, match="numeric values expected"):
        f.predict_proba({"x0": "high", "x1": 0.0, "x2": 0.0, "c": "a"})
    with pytest.raises(ValueError, match="infinite"):
        f.predict_proba({"x0": math.inf, "x1": 0.0, "x2": 0.0, "c": "a"})
