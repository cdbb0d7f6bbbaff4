"""The weighted-feature-use bookkeeping (Motl & Kordík 2019, Algorithm 1), in the ledger and in the forest."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamforest import FeatureStreamForest, sampling
from streamforest.bookkeeping import WeightLedger, shares

LOG_FLOAT_MAX = math.log(np.finfo(np.float64).max)


def generation_use(generation, n_features: int) -> np.ndarray:
    """How many trees of a generation may use each feature (from the subspaces it was grown on)."""
    use = np.zeros(n_features)
    for s in generation.subspaces:
        use[s] += 1
    return use


def realistic_use(rng: np.random.Generator, d: int, n_trees: int, max_subspace: int | None) -> np.ndarray:
    """Per-feature tree counts of a challenger generation: old features ~ Binomial(trees, p_old), the new one forced."""
    k = sampling.subspace_size(d, 2 / 3, max_subspace)
    p_old = sampling.old_feature_probabilities(d, k, None)
    old = rng.binomial(n_trees, p_old[0], size=d - 1) if d > 1 else np.zeros(0)
    return np.append(old, n_trees).astype(np.float64)


def naive_challenger(V: np.ndarray, use: np.ndarray) -> float:
    """Algorithm 1 in plain floats: the weight that makes the new feature's virtual use the old features' mean."""
    if use.size == 1:
        return 1.0
    denom = use[-1] - use[:-1].mean()
    if denom <= 0:
        denom = use[-1]
    return V[: use.size - 1].mean() / denom


# ----------------------------------------------------------------------------- the ledger alone


def test_ledger_doc_example_numbers():
    ledger = WeightLedger()
    assert ledger.challenger(np.array([30.0])) == 0.0
    lw = ledger.challenger(np.array([10.0, 30.0]))
    assert math.exp(lw) == pytest.approx(30.0 / 20.0, rel=1e-12)
    np.testing.assert_allclose(ledger.virtual_use(), [30 + 1.5 * 10, 1.5 * 30], rtol=1e-12)


def test_ledger_matches_plain_float_algorithm_while_it_fits_in_floats():
    rng = np.random.default_rng(0)
    ledger = WeightLedger()
    V = np.zeros(0)
    for d in range(1, 301):
        use = realistic_use(rng, d, 30, None)
        w = naive_challenger(V, use)
        V = np.append(V, 0.0) + w * use
        lw = ledger.challenger(use)
        assert lw == pytest.approx(math.log(w), rel=1e-9, abs=1e-9)
        np.testing.assert_allclose(ledger.virtual_use(), V, rtol=1e-9)
    # The weights grew far beyond what a generation count would suggest: this exercised the geometric regime.
    assert math.log(w) > 100


def test_zero_denominator_guard_gives_a_finite_weight():
    # Every tree used every feature: no weight can make the new feature catch up; it is weighted as if the old
    # features had not been used (denominator = uses of the new feature).
    ledger = WeightLedger()
    ledger.challenger(np.array([10.0]))
    lw = ledger.challenger(np.array([10.0, 10.0]))
    assert math.isfinite(lw)
    assert lw == pytest.approx(math.log(10.0 / 10.0), abs=1e-12)
    np.testing.assert_allclose(ledger.virtual_use(), [20.0, 10.0])
    # Old features used more often than the new one: also guarded.
    lw = ledger.challenger(np.array([10.0, 10.0, 4.0]))
    assert lw == pytest.approx(math.log(15.0 / 4.0), rel=1e-12)
    assert np.all(np.isfinite(ledger.virtual_use()))


def test_uniform_policy_weights_are_equal():
    ledger = WeightLedger()
    for d in range(1, 6):
        assert ledger.uniform(np.full(d, 3.0)) == 0.0
    # The ledger still counts use, with weight 1 per generation.
    np.testing.assert_allclose(ledger.virtual_use(), [15.0, 12.0, 9.0, 6.0, 3.0])


@pytest.mark.parametrize("max_subspace", [64, None], ids=["capped", "uncapped"])
def test_ten_thousand_generations_stay_finite(max_subspace):
    rng = np.random.default_rng(7)
    ledger = WeightLedger()
    log_weights = np.empty(10_000)
    worst = 0.0
    for i in range(10_000):
        d = i + 1
        use = realistic_use(rng, d, 30, max_subspace)
        log_weights[i] = ledger.challenger(use)
        assert math.isfinite(log_weights[i])
        assert np.all(np.isfinite(ledger.v)) and math.isfinite(ledger.log_scale)
        if d > 1:
            # Algorithm 1's invariant, in the ledger's scaled space (V itself would overflow).
            old = ledger.v[: d - 1].mean()
            worst = max(worst, abs(ledger.v[d - 1] - old) / old)
    assert worst < 1e-9
    s = shares(log_weights)
    assert np.all(np.isfinite(s)) and np.all(s >= 0)
    assert s.sum() == pytest.approx(1.0, abs=1e-9)
    # Later generations weigh more (the old features' virtual use keeps growing).
    assert log_weights[-1] > log_weights[100] > log_weights[1]
    if max_subspace is None:
        # The uncapped stream went where plain float weights overflow.
        assert log_weights[-1] > LOG_FLOAT_MAX


def test_virtual_use_overflows_to_inf_as_documented():
    # virtual_use() is documented to "overflow to inf for very long streams"; it must not raise.
    ledger = WeightLedger.from_json({"log_scale": 1000.0, "v": [1.0, 0.5]})
    assert np.isposinf(ledger.virtual_use()).all()


def test_ledger_json_round_trip():
    rng = np.random.default_rng(3)
    ledger = WeightLedger()
    for d in range(1, 30):
        ledger.challenger(realistic_use(rng, d, 10, None))
    copy = WeightLedger.from_json(ledger.to_json())
    use = realistic_use(rng, 30, 10, None)
    assert copy.challenger(use) == ledger.challenger(use)
    np.testing.assert_array_equal(copy.v, ledger.v)


def test_shares():
    np.testing.assert_allclose(shares(np.array([0.0, math.log(3.0)])), [0.25, 0.75])
    s = shares(np.array([-1e6, 0.0, 1e6, 1e6]))
    np.testing.assert_array_equal(s, [0.0, 0.0, 0.5, 0.5])
    assert shares(np.array([])).size == 0


# ----------------------------------------------------------------------------- in the forest


def stream(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, :3].sum(axis=1) + rng.normal(size=n) > 0).astype(int)
    return X, y


@pytest.mark.parametrize(
    ("max_features", "feature_sampling", "max_subspace"),
    [
        (0.3, "uniform", None),
        (0.5, "uniform", None),
        (2 / 3, "uniform", None),
        (0.9, "uniform", None),
        (3, "uniform", None),
        (0.5, "importance", None),
        (0.5, "auto", 3),  # a capped subspace: old features join by importance
    ],
)
def test_new_feature_is_as_used_as_the_average_old_one(max_features, feature_sampling, max_subspace):
    X, y = stream(120, 15, seed=11)
    f = FeatureStreamForest(
        trees_per_generation=8, max_features=max_features, max_depth=3, feature_sampling=feature_sampling,
        max_subspace=max_subspace, split_features=None, prune_threshold=0.0, max_generations=None, oob_score=False,
        random_state=5,
    )
    V_prev = np.zeros(0)
    property_checked = 0
    for j in range(X.shape[1]):
        report = f.add_feature(f"x{j}", X[:, j], y=y if j == 0 else None)
        d = j + 1
        V = f.state().ledger.virtual_use()
        assert V.shape == (d,)
        use = generation_use(f.state().generations[-1], d)
        assert use[-1] == f.trees_per_generation  # the new feature is forced into every tree
        # The ledger adds the generation's weighted use to the virtual use: V = V_prev + w * use.
        w = math.exp(report.log_weight)
        np.testing.assert_allclose(V, np.append(V_prev, 0.0) + w * use, rtol=1e-9)
        if d > 1:
            if use[:-1].mean() < use[-1]:
                # Algorithm 1: the new feature is exactly as represented as an average old feature.
                assert V[-1] == pytest.approx(V[:-1].mean(), rel=1e-9)
                assert w == pytest.approx(V_prev.mean() / (use[-1] - use[:-1].mean()), rel=1e-9)
                property_checked += 1
            else:
                # Old features were used in every tree: the guarded, finite weight.
                assert math.isfinite(report.log_weight)
                assert w == pytest.approx(V_prev.mean() / use[-1], rel=1e-9)
        V_prev = V
    assert property_checked >= 10


def test_guard_with_every_feature_in_every_tree():
    X, y = stream(100, 6, seed=2)
    f = FeatureStreamForest(trees_per_generation=5, max_features=1.0, max_depth=2, prune_threshold=0.0,
                            split_features=None, max_generations=None, oob_score=False, random_state=0)
    V_prev = np.zeros(0)
    for j in range(X.shape[1]):
        r = f.add_feature(f"x{j}", X[:, j], y=y if j == 0 else None)
        use = generation_use(f.state().generations[-1], j + 1)
        np.testing.assert_array_equal(use, np.full(j + 1, 5.0))
        assert math.isfinite(r.log_weight)
        if j:
            assert math.exp(r.log_weight) == pytest.approx(V_prev.mean() / 5.0, rel=1e-9)
        V_prev = f.state().ledger.virtual_use()
        assert np.all(np.isfinite(V_prev))
    assert all(math.isfinite(g["weight_share"]) for g in f.generations_)


def test_bookkeeping_continues_after_an_offline_fit():
    X, y = stream(150, 6, seed=4)
    f = FeatureStreamForest(trees_per_generation=10, max_features=0.5, max_depth=3, prune_threshold=0.0,
                            split_features=None, oob_score=False, random_state=1).fit(X[:, :4], y)
    for j in range(4, 6):
        f.add_feature(f"x{j}", X[:, j])
        V = f.state().ledger.virtual_use()
        assert V[-1] == pytest.approx(V[:-1].mean(), rel=1e-9)
