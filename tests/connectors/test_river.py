"""The River adapter: River's own check suite, the window-driven schedule, determinism, bounds, the feed iterator."""

from __future__ import annotations

import copy
import itertools
import math
import pickle

import numba
import numpy as np
import orjson
import pytest
from river import checks, compose, datasets, drift, linear_model, metrics, optim
from river.datasets import synth

from streamforest.connectors.river import (
    ForestClassifier,
    ForestEncoder,
    ForestRegressor,
    driver,
    iter_encodings,
    labels_from_messages,
    read_records,
)
from streamforest.connectors.river.rise import rise_point
from streamforest.connectors.river.window import SampleWindow
from streamforest.engine.core import EngineConfig
from streamforest.engine.produce import produce_messages
from streamforest.engine.runtime import run
from streamforest.threads import ThreadChoice

PHISHING = list(datasets.Phishing())
#: Small models: the schedule's every step happens within a few hundred samples.
SMALL = {"window_size": 200, "grace_period": 30, "refresh_every": 40, "min_key_count": 10,
         "trees_per_generation": 5, "max_depth": 6}


def river_checks():
    for cls in (ForestClassifier, ForestEncoder, ForestRegressor):
        for k, params in enumerate(cls._unit_test_params()):
            model = cls(**params)
            skips = model._unit_test_skips()
            seen: dict[str, int] = {}
            for check in checks.yield_checks(model):
                if check.__name__ in skips:
                    continue
                # A check that runs on several datasets gets one case per dataset: number them.
                n = seen[check.__name__] = seen.get(check.__name__, -1) + 1
                yield pytest.param(model, check, id=f"{cls.__name__}{k}-{check.__name__}-{n}")


@pytest.mark.parametrize(("model", "check"), list(river_checks()))
def test_river_check(model, check):
    check(model.clone())


# ----------------------------------------------------------------------------- predictions and the schedule


def test_prediction_before_learning_the_prior_then_provisional_forests():
    model = ForestClassifier(**SMALL)
    assert model.predict_proba_one(PHISHING[0][0]) == {}
    assert model.predict_one(PHISHING[0][0]) is None
    # Phishing starts with four phishing sites: no forest tells one class from another yet, the prior predicts.
    first = next(i for i, (_, y) in enumerate(PHISHING) if y != PHISHING[0][1])
    assert first >= driver.PROVISIONAL_AT
    for x, y in PHISHING[:first]:
        model.learn_one(x, y)
    assert model.forest is None
    assert model.predict_proba_one(PHISHING[0][0]) == {PHISHING[0][1]: 1.0}
    model.learn_one(*PHISHING[first])  # the second class: a provisional forest, leaves of a sample
    provisional = model.forest
    assert provisional is not None and provisional.min_samples_leaf == 1.0
    # Its trees place the second class's sample apart; on five samples the prior keeps two thirds of the vote.
    second = PHISHING[first][1]
    assert model.predict_proba_one(PHISHING[first][0])[second] > 1 / (first + 1)
    for x, y in PHISHING[first + 1 : 29]:
        model.learn_one(x, y)
    assert model.forest is not provisional and model.forest.min_samples_leaf == 2.0
    # Its probabilities lean toward the label prior: 10 pseudo-samples of it against the window's 29.
    d, x = model._driver, PHISHING[40][0]
    d._temper = d._rise_temper = 0.0
    forest_p = model.forest.predict_proba({name: x.get(key) for key, name in d._forest_keys})[0]
    counts = np.array([d._label_counts[int(c)] for c in model.forest.classes_])
    share = driver.PROVISIONAL_PRIOR / (29 + driver.PROVISIONAL_PRIOR)
    expected = (1 - share) * forest_p + share * counts / counts.sum()
    got = model.predict_proba_one(x)
    assert [got[d.labels[int(c)]] for c in model.forest.classes_] == pytest.approx(expected.tolist())
    model.learn_one(*PHISHING[29])
    assert model.forest.min_samples_leaf == SMALL.get("min_samples_leaf", 3)
    assert len(model.forest.generations_) == 1


def test_from_grace_period_on_the_provisional_forests_change_nothing(monkeypatch):
    def predictions() -> list[dict]:
        model, out = ForestClassifier(**{**SMALL, "seed": 3}), []
        for x, y in PHISHING[:300]:
            out.append(model.predict_proba_one(x))
            model.learn_one(x, y)
        return out

    with_provisional = predictions()
    first, grace = driver.PROVISIONAL_AT, SMALL["grace_period"]
    monkeypatch.setattr(driver, "PROVISIONAL_AT", 10**9)
    without = predictions()
    assert with_provisional[grace:] == without[grace:]
    assert with_provisional[first:grace] != without[first:grace]


def test_classifier_learns_phishing():
    model = ForestClassifier(seed=1)
    metric = metrics.ROCAUC()
    for x, y in PHISHING:
        metric.update(y, model.predict_proba_one(x))
        model.learn_one(x, y)
    assert metric.get() > 0.94


def test_multiclass_and_a_class_arriving_late_restarts_the_forest():
    rng = np.random.default_rng(0)
    model = ForestClassifier(**SMALL, seed=0)
    for i in range(500):
        x = {"a": float(rng.normal()), "b": float(rng.normal())}
        y = "low" if x["a"] < 0 else "high"
        if i >= 250 and x["b"] > 1:
            y = "odd"
        model.learn_one(x, y)
        if i == 249:
            first = model.forest
    assert model.forest is not first  # restarted when "odd" came
    proba = model.predict_proba_one({"a": 0.5, "b": 2.0})
    assert set(proba) == {"low", "high", "odd"} and math.isclose(sum(proba.values()), 1.0)
    assert set(model.forest.classes_.tolist()) == {0, 1, 2}
    assert max(proba, key=proba.get) == "odd"


def test_a_key_appearing_mid_stream_gets_a_forced_generation():
    model = ForestClassifier(**SMALL, seed=3)
    late = "is_popular"
    for i, (x, y) in enumerate(PHISHING[:400]):
        model.learn_one({k: v for k, v in x.items() if k != late or i >= 300}, y)
        if i == 299:
            assert late not in model.forest.feature_names_in_
    forced = [g["forced"] for g in model.forest.generations_ if g["forced"]]
    assert forced == [[late]] and late in model.feature_importances
    # It arrived once min_key_count samples of the window held it: 10 samples after it first appeared.
    assert model.forest.feature_names_in_[-1] == late


def test_keys_present_in_too_few_samples_do_not_become_features():
    model = ForestClassifier(**SMALL, seed=3)
    for i, (x, y) in enumerate(PHISHING[:400]):
        extra = {"rare": 1.0} if i % 50 == 0 else {}
        model.learn_one({**x, **extra}, y)
    assert "rare" not in model.forest.feature_names_in_
    assert model.predict_proba_one({**PHISHING[0][0], "rare": 1.0}) == model.predict_proba_one(PHISHING[0][0])


def test_refreshes_follow_the_window_and_the_weights_decay():
    model = ForestClassifier(**SMALL, seed=2)
    for x, y in PHISHING[:600]:
        model.learn_one(x, y)
    f = model.forest
    assert f.n_samples_ == SMALL["window_size"]  # the training set is the window
    shares = [g["weight_share"] for g in f.generations_]
    assert shares == sorted(shares) and shares[-1] > 0.4  # each refresh outweighs the ones before it
    assert all(not g["forced"] for g in f.generations_)


def test_refreshes_back_off_while_the_forest_is_not_stale():
    def refreshes(stream, backoff: int, **params) -> tuple[ForestClassifier, list[int], list[int]]:
        model = ForestClassifier(seed=1, refresh_backoff=backoff, **params)
        at, every = [], []  # the growths on the window: refreshes, and the re-binned forest before any drift
        d = model._driver
        refresh, start = d._refresh, d._start
        d._refresh = lambda: at.append(d.window.n_seen) or refresh()
        d._start = lambda provisional=False, rebin=False: (rebin and at.append(d.window.n_seen)) or start(
            provisional, rebin)
        for x, y in stream:
            model.learn_one(x, y)
            every.append(model._driver._every)
        return model, at, every

    model, backed_off, _ = refreshes(PHISHING, 4)
    _, plain, _ = refreshes(PHISHING, 1)
    assert model.n_drifts_detected == 0 and model.forest._oob.count.any()
    assert max(np.diff(backed_off)) == 4 * 50 and len(backed_off) < 0.6 * len(plain) and max(np.diff(plain)) == 50
    # Detection off: the errors are scored for the back-off alone, and the schedule is the same.
    assert refreshes(PHISHING, 4, drift_detector=drift.NoDrift())[1] == backed_off
    # A cut (the switch of STAGGER's rule) brings the refreshes back to every refresh_every samples.
    model, _, every = refreshes(STAGGER[: SWITCH + 100], 4)
    assert model.n_drifts_detected >= 1 and max(every[:SWITCH]) == 4 * 50 and every[-1] == 50


def test_a_prediction_routes_through_the_trees_of_every_generation_at_once(monkeypatch):
    from streamforest.tree import route

    calls = []
    weighted_values = route.weighted_values
    monkeypatch.setattr(route, "weighted_values", lambda *a, **k: calls.append(1) or weighted_values(*a, **k))
    model = ForestClassifier(**SMALL, seed=2)
    for x, y in PHISHING[:400]:
        calls.clear()
        p = model.predict_proba_one(x)
        if model.forest is not None and len(model.forest.generations_) > 1:
            # The alive trees are packed once per growth: one routing call, not one per generation.
            assert len(calls) == 1 and model.forest.predict_proba(model._driver._row(x))[0].tolist() == list(p.values())
        model.learn_one(x, y)
    assert len(model.forest.generations_) > 1


@pytest.mark.parametrize("long_window", [None, 2.0])
def test_nominal_keys_missing_values_and_bad_values(long_window):
    rng = np.random.default_rng(1)
    model = ForestClassifier(**SMALL, long_window=long_window, seed=0)
    for _ in range(300):
        colour = str(rng.choice(["red", "green", "blue"]))
        x = {"colour": colour, "size": float(rng.normal()), "note": None}
        model.learn_one(x, colour == "red")
    assert list(model.forest.feature_names_in_) == ["colour", "size"]  # sorted on first sight; None is missing
    assert model.predict_proba_one({"colour": "red"})[True] > 0.9
    assert model.predict_proba_one({"colour": "purple", "size": 0.0})[True] < 0.9  # unseen: missing
    before = pickle.dumps(model)
    with pytest.raises(TypeError, match="'size' has had numeric values"):
        model.learn_one({"colour": "red", "size": "big"}, True)
    with pytest.raises(TypeError, match="numbers, booleans or strings"):
        model.learn_one({"colour": "red", "shape": [1, 2]}, True)
    assert pickle.dumps(model) == before  # a refused sample changes nothing


def test_keys_of_other_types_get_distinct_feature_names():
    model = ForestClassifier(**SMALL, seed=0)
    rng = np.random.default_rng(2)
    for _ in range(100):
        a, b = rng.normal(size=2)
        model.learn_one({1: float(a), "1": float(b), (2, "x"): 0.0}, bool(a > 0))
    # In sorted order of (str, repr): the tuple, the string "1", then the integer 1, whose name "1" is taken.
    assert list(model.forest.feature_names_in_) == ["(2, 'x')", "1", "1'"]
    assert model.predict_proba_one({1: 2.0, "1": 0.0})[True] > 0.8


# ----------------------------------------------------------------------------- River conventions


@pytest.mark.parametrize("cls", [ForestClassifier, ForestEncoder])
def test_same_seed_same_predictions_and_key_order_does_not_matter(cls):
    def outputs(seed: int, shuffle: bool) -> list:
        model = cls(**SMALL, seed=seed)
        rng = np.random.default_rng(5)
        out = []
        for x, y in PHISHING[:300]:
            if shuffle:
                x = {k: x[k] for k in rng.permutation(list(x))}
            out.append(model.predict_proba_one(x) if cls is ForestClassifier else model.transform_one(x))
            model.learn_one(x, y)
        return out

    ref = outputs(7, shuffle=False)
    assert outputs(7, shuffle=False) == ref
    assert outputs(7, shuffle=True) == ref
    assert outputs(8, shuffle=False) != ref


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="numba has one thread here")
def test_growth_on_one_thread_or_on_all_gives_the_same_predictions(monkeypatch):
    def outputs(parallel: bool) -> list:
        monkeypatch.setattr(ThreadChoice, "_choose", lambda self: (parallel, False))
        model = ForestClassifier(window_size=600, grace_period=30, seed=3)  # 600 x 30 trees: above SMALL_WORK
        out = []
        for x, y in PHISHING[:900]:
            out.append(model.predict_proba_one(x))
            model.learn_one(x, y)
        return out, model._driver._threads._cost

    serial, serial_cost = outputs(False)
    parallel, parallel_cost = outputs(True)
    assert list(serial_cost) == [False] and list(parallel_cost) == [True]  # the growths did run each way
    assert serial == parallel


def test_the_window_grows_on_a_stationary_concept_and_not_on_a_moving_one():
    def longest(stream, growth: float) -> int:
        model = ForestClassifier(window_size=1000, window_growth=growth, seed=1)
        n = 0
        for x, y in stream.take(3000):
            model.predict_one(x)
            model.learn_one(x, y)
            n = max(n, len(model._driver.window))
        return n

    assert longest(synth.Sine(0, seed=7), 2.0) == 2000 and longest(synth.Sine(0, seed=7), 1.0) == 1000
    # Moving centroids: the forest is stale, the window holds window_size.
    moving = synth.RandomRBFDrift(seed_model=7, seed_sample=7, n_classes=2, n_features=10, change_speed=0.01,
                                  n_drift_centroids=50)
    assert longest(moving, 2.0) == 1000


def test_window_growth_changes_nothing_until_the_window_is_full():
    def outputs(**params: float) -> list:
        model = ForestClassifier(window_size=1500, seed=3, **params)
        out = []
        for x, y in PHISHING:  # 1,250 samples
            out.append(model.predict_proba_one(x))
            model.learn_one(x, y)
        return out

    assert outputs(window_growth=3.0) == outputs(window_growth=1.0)
    with pytest.raises(ValueError, match="window_growth"):
        ForestClassifier(window_growth=0.5)


def test_clone_and_parameters():
    model = ForestClassifier(window_size=300, seed=4)
    for x, y in PHISHING[:100]:
        model.learn_one(x, y)
    clone = model.clone()
    assert clone.forest is None and clone.window_size == 300 and clone.seed == 4
    assert repr(clone) == repr(model)
    assert ForestClassifier().max_features == 1.0 and ForestEncoder().values == "weighted"


@pytest.mark.parametrize("cls", [ForestClassifier, ForestEncoder])
def test_x_is_never_modified(cls):
    model = cls(**SMALL, seed=0)
    for i, (x, y) in enumerate(PHISHING[:200]):
        x = {**x, "tag": "a" if i % 2 else "b", "gap": None, "np": np.float32(i)}
        kept = copy.deepcopy(x)
        model.learn_one(x, y)
        (model.predict_proba_one if cls is ForestClassifier else model.transform_one)(x)
        assert x == kept and list(x) == list(kept)


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"window_size": 0}, "window_size"),
        ({"grace_period": 2.5}, "grace_period"),
        ({"refresh_every": -1}, "refresh_every"),
        ({"refresh_backoff": 0}, "refresh_backoff"),
        ({"refresh_backoff": 2.0}, "refresh_backoff"),
        ({"min_key_count": True}, "min_key_count"),
        ({"trees_per_generation": 0}, "trees_per_generation"),
        ({"max_features": 1.5}, "max_features"),
        ({"max_features": "all"}, "max_features"),
        ({"split_features": 0.0}, "split_features"),
        ({"max_depth": 0}, "max_depth"),
        ({"min_samples_leaf": 0}, "min_samples_leaf"),
        ({"max_generations": 1}, "max_generations"),
        ({"prune_threshold": 1.0}, "prune_threshold"),
        ({"seed": "x"}, "seed"),
        ({"drift_detector": "adwin"}, "drift_detector"),
        ({"drift_detector": metrics.Accuracy()}, "drift_detector"),
    ],
)
@pytest.mark.parametrize("cls", [ForestClassifier, ForestEncoder, ForestRegressor])
def test_bad_parameters_raise_value_error_naming_them(cls, params, name):
    with pytest.raises(ValueError, match=name):
        cls(**params)


@pytest.mark.parametrize(
    ("params", "name"),
    [({"n_components": 0}, "n_components"), ({"values": "counts"}, "values"), ({"task": "ranking"}, "task"),
     ({"leaves_only": 1}, "leaves_only")],
)
def test_bad_encoder_parameters(params, name):
    with pytest.raises(ValueError, match=name):
        ForestEncoder(**params)


def test_a_regressor_refuses_a_refresh_backoff():
    with pytest.raises(ValueError, match="refresh_backoff must be 1 for a regressor"):
        ForestRegressor(refresh_backoff=2)
    with pytest.raises(ValueError, match="refresh_backoff must be 1 for a regressor"):
        ForestEncoder(task="regression", refresh_backoff=2)


@pytest.mark.parametrize("value", [1, 1.0, 0.5, True, "2", [2]])
def test_a_long_window_that_is_not_longer_is_refused(value):
    with pytest.raises(ValueError, match="long_window"):
        ForestClassifier(long_window=value)


# ----------------------------------------------------------------------------- the short and the long window


def scored(model, samples):
    """Progressive validation of ``model``; per sample, the window that predicted it."""
    used = []
    for x, y in samples:
        used.append(model.predicting_window)
        model.predict_proba_one(x)
        model.learn_one(x, y)
    return np.array(used)


PAIRED = {**SMALL, "long_window": 2.0}


def test_the_long_window_learns_twice_the_samples_an_eighth_as_often():
    model = ForestClassifier(**PAIRED, seed=2)
    scored(model, PHISHING[:700])
    short, long = model._pair.short, model._pair.long
    assert (len(short.window), len(long.window)) == (200, 400)
    assert long.params["refresh_every"] == 8 * SMALL["refresh_every"]
    assert long.params["seed"] != short.params["seed"]
    # Each forest learned from its own window: the long one's newest generation from all 400 samples.
    assert (short.forest.n_samples_, long.forest.n_samples_) == (200, 400)


def test_the_window_with_fewer_recent_errors_predicts():
    model = ForestClassifier(**PAIRED, seed=2)
    used = scored(model, PHISHING[:700])
    assert {200, 400} <= set(used.tolist())  # each predicted some of the samples
    pair = model._pair
    n = 300
    pair._cuts = (pair.short.n_cuts, pair.long.n_cuts)
    for short_errors, long_errors, want in ((5, 3, 400), (3, 5, 200), (4, 4, 200)):  # a tie: the short window
        pair.short._note_errors(np.r_[np.ones(short_errors), np.zeros(n - short_errors)])
        pair.long._note_errors(np.r_[np.ones(long_errors), np.zeros(n - long_errors)])
        pair._since = (pair.short.n_scored - n, pair.long.n_scored - n)
        assert model.predicting_window == want
        x = PHISHING[700][0]
        assert model.predict_proba_one(x) == (pair.long if want == 400 else pair.short).predict_proba(x)


def test_a_cut_starts_the_comparison_over():
    # STAGGER's abrupt change: each window is cut, and the prediction after a cut is the short window's (no error
    # has been scored since: those before the change say nothing of the new concept).
    model = ForestClassifier(seed=1, long_window=2.0)
    pair, after_cut = model._pair, []
    for x, y in STAGGER[:SWITCH + 300]:
        cuts = pair.short.n_cuts + pair.long.n_cuts
        model.learn_one(x, y)
        if pair.short.n_cuts + pair.long.n_cuts > cuts:
            after_cut.append(model.predicting_window)
    assert pair.short.n_cuts >= 1 and pair.long.n_cuts >= 1
    assert after_cut and set(after_cut) == {2000}


def test_without_drift_detection_there_is_one_window():
    model = ForestClassifier(**PAIRED, seed=2, drift_detector=drift.NoDrift())
    assert set(scored(model, PHISHING[:500]).tolist()) == {200}
    assert model._pair is None
    one = ForestClassifier(**SMALL, seed=2)  # the default: one window
    assert set(scored(one, PHISHING[:500]).tolist()) == {200} and one._pair is None


def test_a_new_key_arrives_in_both_windows():
    model = ForestClassifier(**PAIRED, seed=3)
    for i, (x, y) in enumerate(PHISHING[:600]):
        model.learn_one({k: v for k, v in x.items() if i >= 450 or k != "is_popular"}, y)
    for one in (model._pair.short, model._pair.long):
        assert ["is_popular"] in [g["forced"] for g in one.forest.generations_]


def test_the_pair_is_deterministic():
    def probas(model):
        out = []
        for x, y in PHISHING[:600]:
            out.append(model.predict_proba_one(x))
            model.learn_one(x, y)
        return out

    assert probas(ForestClassifier(**PAIRED, seed=5)) == probas(ForestClassifier(**PAIRED, seed=5))


# ----------------------------------------------------------------------------- concept drift

#: STAGGER's rule 0 for SWITCH samples, then its rule 2: an abrupt change of concept.
SWITCH = 1500
STAGGER = [*synth.STAGGER(classification_function=0, seed=1).take(SWITCH),
           *synth.STAGGER(classification_function=2, seed=2).take(SWITCH)]


def post_drift_accuracy(model, stream, start: int, stop: int) -> float:
    """Progressive accuracy on samples ``start:stop`` (the model learns every sample)."""
    acc = metrics.Accuracy()
    for i, (x, y) in enumerate(stream):
        if start <= i < stop:
            acc.update(y, model.predict_one(x))
        model.learn_one(x, y)
    return acc.get()


def test_the_detector_sees_the_same_errors_whether_samples_were_predicted_before_learning_or_not():
    # The detector's batch reuses the class predicted for a sample learned next with the same values by the same
    # forest: predicting first, not predicting, or predicting other values changes nothing it sees.
    stream = [*STAGGER[SWITCH - 300:SWITCH], *STAGGER[-300:]]
    held_out = [x for x, _ in STAGGER[SWITCH - 400:SWITCH - 300]]

    def learn(predict) -> tuple:
        model = ForestClassifier(**SMALL, seed=2)
        for x, y in stream:
            predict(model, x)
            model.learn_one(x, y)
        d = model._driver
        return (model.n_drifts_detected, d._errors[~np.isnan(d._errors)].tolist(), d._temper, d._rise_temper,
                [model.predict_proba_one(x) for x in held_out])

    ref = learn(lambda model, x: None)
    assert ref[0] >= 1  # the switch is detected: the errors fed matter
    assert learn(lambda model, x: model.predict_proba_one(x)) == ref
    # Other values (each feature's next value; 1.0 for the int 1): the prediction is not the learned sample's.
    assert learn(lambda model, x: model.predict_proba_one({k: (v + 1) % 3 for k, v in x.items()})) == ref
    assert learn(lambda model, x: model.predict_proba_one({k: {1: 1.0}.get(v, v) for k, v in x.items()})) == ref


def test_a_sample_learned_without_a_prediction_never_takes_an_earlier_samples_class():
    # A window slot keeps the class predicted for its sample until the next growth: a later sample in the same slot
    # learned without a prediction is routed, not given that class. No scheduled refreshes (refresh_every=None), so
    # the window wraps between growths; predictions stop half way.
    data = list(datasets.Phishing())[:600]

    def learn(predict_until: int) -> tuple:
        model = ForestClassifier(window_size=100, grace_period=20, refresh_every=None, seed=1)
        for i, (x, y) in enumerate(data):
            if i < predict_until:
                model.predict_proba_one(x)
            model.learn_one(x, y)
        d = model._driver
        return model.n_drifts_detected, d._errors[~np.isnan(d._errors)].tolist()

    assert learn(300) == learn(0)


def test_after_an_abrupt_switch_the_classifier_recovers_within_200_samples():
    model = ForestClassifier(seed=3)
    recovered = post_drift_accuracy(model, STAGGER, SWITCH + 200, 2 * SWITCH)
    assert model.n_drifts_detected == 1 and recovered > 0.97
    # Without detection the window forgets the old concept one sample at a time: the same segment is mostly wrong.
    slow = ForestClassifier(seed=3, drift_detector=drift.NoDrift())
    assert post_drift_accuracy(slow, STAGGER, SWITCH + 200, 2 * SWITCH) < 0.8
    assert slow.n_drifts_detected == 0


def test_after_abrupt_changes_the_classifier_recovers_as_fast_as_arf():
    # The benchmark's measure (scenarios.benchmarks.river): samples from a change until 100 predictions in a row
    # reach 95% of the settled accuracy, ours against River's ARF on the same streams (STAGGER rule 0 -> 2, other
    # seeds than above, the change at three positions), summed over the streams.
    from river import forest

    from scenarios.benchmarks.river import drift_stream, progressive, recovery

    ours_total = arf_total = 0
    for seed, position in [(5, 600), (6, 700), (7, 800)]:
        stream = drift_stream("stagger", position, width=1, n=position + 500, seed=seed)
        _, _, ours = progressive(ForestClassifier(seed=0), stream)
        _, _, arf = progressive(forest.ARFClassifier(seed=0), stream)
        target = 0.95 * max(ours[-300:].mean(), arf[-300:].mean())
        ours_total += recovery(ours, position, target)
        arf_total += recovery(arf, position, target)
    assert ours_total <= arf_total


def test_the_benchmarks_exact_auc_ranks_what_rivers_ten_thresholds_tie():
    # The recovery table prints the exact ROC AUC beside River's ROCAUC: 0.91, 0.95 and 0.99 fall in River's top
    # bin of 10 thresholds, ranked as ties there, in order by every threshold.
    from river import metrics

    from scenarios.benchmarks.river import exact_auc

    samples = [({}, False), ({}, True), ({}, True), ({}, False)]
    probas = [{False: 0.09, True: 0.91}, {False: 0.01, True: 0.99}, {False: 0.05, True: 0.95},
              {False: 0.99, True: 0.01}]
    river_auc = metrics.ROCAUC()
    for (_, y), p in zip(samples, probas, strict=True):
        river_auc.update(y, p)
    assert exact_auc(samples, probas) == 1.0 > river_auc.get()
    # A prediction before any label (an empty dict) scores one half; a stream of one class has no AUC.
    assert exact_auc([({}, 0), ({}, 1), ({}, 1)], [{}, {0: 0.4, 1: 0.6}, {0: 0.8, 1: 0.2}]) == 0.5
    assert math.isnan(exact_auc([({}, 1), ({}, 1)], [{1: 1.0}, {1: 1.0}]))


def test_the_recovery_tables_rows_over_model_seeds_take_the_median_recovery_with_never_ranking_last():
    # ``--recovery-reps``: a row is the mean of the model seeds' figures and the median of their recoveries (the
    # upper one of an even count); a recovery never reached is the longest, and a median that falls on one is "never".
    from scenarios.benchmarks.river import _median_recovery, drift_stream, recovery_run

    assert _median_recovery([30, None, 10]) == 30
    assert _median_recovery([None, None, 10]) is None
    assert _median_recovery([20, 10]) == 20
    assert _median_recovery([10, None]) is None
    stream = drift_stream("stagger", 300, width=1, n=1300, seed=5)
    runs = [recovery_run(stream, 300, model_seed) for model_seed in (1, 2)]
    assert [r["model_seed"] for r in runs] == [1, 2]
    # Another model seed is another forest: the two runs do not predict alike on every sample.
    assert runs[0]["exact_auc_ours"] != runs[1]["exact_auc_ours"]
    assert all(0.9 < r["accuracy_ours"] <= 1 and r["recovery_ours"] is not None for r in runs)


def test_through_a_gradual_change_the_window_is_cut_past_the_mixed_samples():
    # STAGGER rule 0 -> 2 over a transition of 100 samples: the drift is detected while both rules still mix, and
    # a forest grown on the mixed samples would go on voting for the old rule. The old rule's forest follows the
    # transition and cuts the window again while its error rises: 50 to 150 samples after the middle of the
    # transition, ours is right on 98% of the samples.
    from scenarios.benchmarks.river import drift_stream, progressive

    accuracies = []
    for seed, position in [(5, 600), (6, 700), (8, 900)]:
        model = ForestClassifier(seed=0)
        _, _, right = progressive(model, drift_stream("stagger", position, width=100, n=position + 200, seed=seed))
        accuracies.append(right[position + 50 : position + 150].mean())
        assert model._driver.n_cuts > model.n_drifts_detected >= 1
    assert np.mean(accuracies) > 0.88


def _sine_old_concept(x0: float, x1: float, y: int) -> bool:
    """Whether ``y`` is Sine function 0's label and not function 2's (River's ``synth.Sine``)."""
    zero = 0 if x0 >= math.sin(x1) else 1
    two = 0 if x0 >= 0.5 + 0.3 * math.sin(3 * math.pi * x1) else 1
    return zero != two and y == zero


def _sifting(monkeypatch) -> list[tuple[int, list[tuple[float, float, int]]]]:
    """Record, per refresh that sifts, the arrival number and the (x0, x1, label) of each sample it leaves out."""
    sifted = driver.ForestDriver._sifted
    notes = []

    def noting(self, order):
        kept = sifted(self, order)
        out = np.setdiff1d(order, kept)
        if out.size:
            w = self.window
            labels = [self.labels[int(c)] for c in w.labels(out)]
            notes.append((w.n_seen, list(zip(w.column(w.index[0], out).tolist(), w.column(w.index[1], out).tolist(),
                                             labels, strict=True))))
        return kept

    monkeypatch.setattr(driver.ForestDriver, "_sifted", noting)
    return notes


def test_after_a_gradual_change_refreshes_leave_out_the_old_concepts_samples(monkeypatch):
    # Sine function 0 -> 2 over 500 samples at 2,500: the drift is detected early in the change, and the samples
    # kept then hold the old function's labels where the two disagree. After the transition, refreshes leave out
    # the earlier samples that a generation grown on the later ones gets wrong and the old forest gets right: most of
    # those left out are the old function's, and the forest errs less from 3,000 to 4,000 samples than without.
    stream = list(synth.ConceptDriftStream(synth.Sine(0, seed=4), synth.Sine(2, seed=5), seed=6, position=2500,
                                           width=500).take(4000))

    def errors() -> int:
        model = ForestClassifier(seed=1)
        wrong = 0
        for i, (x, y) in enumerate(stream):
            wrong += i >= 3000 and model.predict_one(x) != y
            model.learn_one(x, y)
        return wrong

    notes = _sifting(monkeypatch)
    sifted = errors()
    left_out = [s for _, samples in notes for s in samples]
    assert notes and all(2500 < n < 4000 for n, _ in notes)
    assert np.mean([_sine_old_concept(*s) for s in left_out]) > 0.8
    monkeypatch.setattr(driver, "SIFT_Z", math.inf)
    assert sifted < errors()


def test_after_an_abrupt_change_refreshes_leave_out_nothing(monkeypatch):
    # Sine function 2 -> 3 at 2,500: every sample kept after the drift is of the new function, and the old forest
    # errs as often on the earlier ones as on the later ones: nothing is left out.
    stream = [*synth.Sine(2, seed=4).take(2500), *synth.Sine(3, seed=5).take(1000)]
    notes = _sifting(monkeypatch)
    model = ForestClassifier(seed=1)
    for x, y in stream:
        model.learn_one(x, y)
    assert model.n_drifts_detected >= 1 and not notes


def test_through_a_gradual_change_a_refresh_learns_from_the_samples_after_the_old_concepts_error_rose(monkeypatch):
    # STAGGER rule 0 -> 2 over 200 samples: the samples kept at the cut still mix both rules. Through the transition
    # a refresh learns from the samples after the most likely rise of the old rule's forest's errors (and those of
    # them that forest got wrong TRANSITION_WRONG more times): before it, that forest erred less (more samples of the
    # old rule); the window keeps them.
    from scenarios.benchmarks.river import drift_stream, progressive

    trims = []
    order_of = driver.ForestDriver._training_order

    def noting(self):
        order = order_of(self)
        whole = self.window.order()
        held = np.unique(order)
        if self._old is not None and held.size < whole.size:  # after the transition, a sift leaves out others
            dropped = whole[: whole.size - held.size]
            assert np.array_equal(held, np.sort(whole[whole.size - held.size:]))  # the latest samples
            wrong = int(np.sum(self._old_errors[held] > 0))
            trims.append((np.nanmean(self._old_errors[dropped]), np.nanmean(self._old_errors[held]),
                          order.size == held.size + driver.TRANSITION_WRONG * wrong))
        return order

    monkeypatch.setattr(driver.ForestDriver, "_training_order", noting)
    for seed, position in [(5, 600), (9, 600)]:
        progressive(ForestClassifier(seed=0), drift_stream("stagger", position, width=200, n=position + 300, seed=seed))
    assert trims and all(before < after and weighted for before, after, weighted in trims)


def test_a_transition_ends_before_the_settled_concepts_errors_pass_for_a_rise():
    # After the change (STAGGER rule 0 -> 2, abrupt; SEA variant 0 -> 3 over 250 samples), the old concept's forest
    # errs at a steady rate on the new concept; a scan of those errors every few samples, over a transition of
    # 500 samples, took runs of them for rises and cut the window to a few dozen samples (about 350 and 700 samples
    # after the STAGGER change, 300 and 450 after SEA's). The transition ends sooner: the window refills.
    from scenarios.benchmarks.river import drift_stream, progressive

    for kind, seed, position, width in [("stagger", 11, 2000, 1), ("sea", 23, 1500, 250)]:
        model = ForestClassifier(seed=1)
        progressive(model, drift_stream(kind, position, width, n=position + 800, seed=seed))
        assert model.n_drifts_detected == 1
        assert len(model._driver.window) > 500


def test_through_a_transition_nothing_is_cut_while_the_current_forest_does_not_err(monkeypatch):
    # STAGGER rule 0 -> 2 over 50 samples at 1,400: long after the change the old rule's forest errs at a steady rate
    # on the new rule, and its scan took a run of those errors for a rise: the window was cut to 16 samples while the
    # current forest had not erred for over a hundred samples, and the forest grown on them erred on samples it had
    # got right (seed 131; since the new forest waits for 2 * grace_period samples, seed 151, cut 237 samples after
    # the change). A cut through the transition needs an error of the current forest after the rise.
    from scenarios.benchmarks.river import drift_stream, progressive

    stream = drift_stream("stagger", 1400, width=50, n=1700, seed=151)
    cut = driver.ForestDriver._cut

    def run() -> tuple[list[tuple[int, bool]], np.ndarray]:
        cuts = []

        def noting(self, keep):
            e = self._errors[self.window.order()]
            cuts.append((self.window.n_seen, bool(np.nansum(e[~np.isnan(e)][-keep:]) > 0)))
            cut(self, keep)

        monkeypatch.setattr(driver.ForestDriver, "_cut", noting)
        return cuts, progressive(ForestClassifier(seed=1), stream)[2]

    cuts, right = run()
    assert cuts and all(erred for _, erred in cuts)
    monkeypatch.setattr(driver.ForestDriver, "_misled", lambda self, after: True)
    cuts_without, right_without = run()
    assert any(not erred and n > 1500 for n, erred in cuts_without)
    assert right[1500:].sum() > right_without[1500:].sum()


def test_early_in_a_long_transition_the_old_concepts_forest_predicts(monkeypatch):
    # STAGGER rule 0 -> 2 over 250 samples: the drift is detected while the old rule still dominates, and the
    # forest grown on the few mixed samples kept errs more than the old rule's forest. While the old forest errs
    # less on the new samples, it predicts: over the first half of the transitions, ours is right more often.
    from scenarios.benchmarks.river import drift_stream, progressive

    streams = [(position, drift_stream("stagger", position, width=250, n=position + 300, seed=seed))
               for seed, position in [(5, 700), (6, 800), (7, 900)]]

    def right_before_the_middle() -> tuple[int, int]:
        right, old_predicted = 0, 0
        for position, stream in streams:
            model = ForestClassifier(seed=0)
            note = model._driver._note_duel

            def noting(old, current, note=note, model=model):
                nonlocal old_predicted
                note(old, current)
                old_predicted += model._driver._use_old

            model._driver._note_duel = noting
            right += int(progressive(model, stream)[2][position - 250 : position].sum())
        return right, old_predicted

    right, old_predicted = right_before_the_middle()
    monkeypatch.setattr(driver, "DUEL_MARGIN", math.inf)  # the old forest never predicts alone
    monkeypatch.setattr(driver.ForestDriver, "_mixed_with_old", lambda self, x, p, classes: p)  # nor in a mixture
    right_without, never = right_before_the_middle()
    assert old_predicted > 0 and never == 0
    assert right > right_without


def test_until_the_current_forest_leads_the_old_concepts_forest_shares_the_prediction(monkeypatch):
    # Right after a drift detected early in a gradual change, neither forest has erred DUEL_MARGIN fewer yet; the
    # forest grown on the few samples kept is the weaker one, and mixing in the old forest's probabilities (by how
    # each erred) is right more often before the middle of the change than the young forest alone.
    from scenarios.benchmarks.river import drift_stream, progressive

    streams = [(position, drift_stream("stagger", position, width=250, n=position + 250, seed=seed))
               for seed, position in [(5, 700), (6, 800), (7, 900)]]

    def right_before_the_middle() -> int:
        return sum(int(progressive(ForestClassifier(seed=0), stream)[2][position - 250 : position].sum())
                   for position, stream in streams)

    shares = []
    mixed = driver.ForestDriver._mixed_with_old

    def mixing(self, x, p, classes):
        shares.append(self._old_share)
        return mixed(self, x, p, classes)

    monkeypatch.setattr(driver.ForestDriver, "_mixed_with_old", mixing)
    right = right_before_the_middle()
    assert shares and all(0 < s < 1 for s in shares)
    monkeypatch.setattr(driver.ForestDriver, "_mixed_with_old", lambda self, x, p, classes: p)
    assert right > right_before_the_middle()


def test_after_a_drift_the_window_keeps_the_samples_since_the_change():
    model = ForestClassifier(seed=3)
    for i in range(SWITCH + 200):
        before = model.forest
        model.learn_one(*STAGGER[i])
        if model.n_drifts_detected:
            break
    # Detected within a few dozen samples of the switch; what the window kept came after it (give or take the
    # few samples on which both rules agree).
    assert SWITCH <= i < SWITCH + 100
    kept = len(model._driver.window)
    assert kept <= i - SWITCH + 10
    for x, y in STAGGER[i + 1 : SWITCH + 400]:
        model.learn_one(x, y)
    # A new forest (bins of the new concept), trained on the refilling window: every sample since the cut, or
    # since a later one that trimmed the first samples it kept (around the switch, where the old rule's forest
    # was right more often than after).
    w = model._driver.window
    first = w.n_seen - len(w)
    assert model.forest is not before and w.n_seen == SWITCH + 400 and i + 1 - kept <= first <= SWITCH + 20
    assert 0.75 * len(model._driver.window) <= model.forest.n_samples_ <= len(model._driver.window)


def test_the_rise_scan_finds_where_the_error_rose_in_the_ring():
    rng = np.random.default_rng(0)
    errors = np.concatenate([rng.random(300) < 0.3, rng.random(600) < 0.05, rng.random(100) < 0.4]).astype(float)
    errors[:50] = np.nan  # before the forest: not scored
    ring = np.roll(errors, 137)  # the window starts at slot 137 of a ring of 1,000
    llr, after = rise_point(ring, 137, 1000, 8, 4)
    assert llr > 9 and 92 <= after <= 108  # the fall at 300 is no rise; the rise at 900 is found
    assert rise_point(ring, 137, 900, 8, 4) == (0.0, 0)  # before the rise: only the fall
    assert rise_point(np.full(1000, np.nan), 0, 1000, 8, 4) == (0.0, 0)


def test_the_rise_scan_of_a_regressors_errors_takes_their_size():
    # Absolute errors falling from 2 to 1 (a learning curve), then rising to 1.8: normal likelihoods with one
    # variance; steady errors show no rise, and errors all alike none at all.
    rng = np.random.default_rng(0)
    errors = np.abs(np.concatenate([rng.normal(2, 0.5, 300), rng.normal(1, 0.5, 600), rng.normal(1.8, 0.5, 100)]))
    ring = np.roll(errors, 137)
    llr, after = rise_point(ring, 137, 1000, 8, 4, False)
    assert llr > 12 and 92 <= after <= 108
    assert rise_point(ring, 137, 900, 8, 4, False)[0] < 12  # before the rise: only the fall
    steady = np.abs(rng.normal(1, 0.5, 2000))
    assert rise_point(steady, 0, 2000, 8, 4, False)[0] < 12
    assert rise_point(np.ones(1000), 0, 1000, 8, 4, False) == (0.0, 0)
    assert rise_point(np.full(1000, 0.1) + np.arange(1000) * 1e-17, 0, 1000, 8, 4, False) == (0.0, 0)
    # The same ring as 0/1 errors (above 1.5) rises at the same point.
    assert 92 <= rise_point((ring > 1.5).astype(float), 137, 1000, 8, 4)[1] <= 108


def test_a_regressors_error_rising_after_its_learning_curve_cuts_the_window_and_the_old_forest_predicts_meanwhile():
    # River's FriedmanDrift, a global abrupt change at 2,000. ADWIN signals it at once, but the most likely change of
    # the whole window's errors is the fall of the young forest's learning curve, so the detector alone cut nothing
    # until 2,810 (then forgot its history). The scan of the window's errors finds the rise: the window is cut
    # within 50 samples of the change, and the old forest predicts while it errs less than the one regrown on the
    # few samples kept.
    stream = list(synth.FriedmanDrift(drift_type="gra", position=(2000, 5000), seed=4).take(2600))
    model = ForestRegressor(seed=1)
    cut, old_predicted = None, 0
    for i, (x, y) in enumerate(stream):
        model.predict_one(x)
        old_predicted += model._driver._use_old
        model.learn_one(x, y)
        if cut is None and model.n_drifts_detected:
            cut = i
    assert cut is not None and 2000 <= cut < 2050
    assert len(model._driver.window) < 600
    assert 0 < old_predicted < 100


def test_a_regressors_first_forest_takes_new_bins_once_and_none_after_a_drift():
    # The regressor's first forest is re-binned once, as a classifier's, when the window holds twice grace_period
    # samples; after a drift its new forest comes at grace_period samples and keeps its bins.
    stream = list(synth.FriedmanDrift(drift_type="gra", position=(2000, 5000), seed=4).take(2600))
    model = ForestRegressor(seed=1)
    state, grace = model._driver, model.grace_period
    starts = []  # (drifts so far, samples the new forest was grown on, its generations)
    forest = None
    for x, y in stream:
        model.learn_one(x, y)
        if model.forest is not forest and not state._provisional:
            forest = model.forest
            starts.append((model.n_drifts_detected, forest.n_samples_, len(forest.generations_)))
    assert starts[0] == (0, grace, 1) and starts[1][::2] == (0, driver.REBIN_GENERATIONS)
    assert 2 * grace <= starts[1][1] < 2 * grace + model.refresh_every
    after = [s for s in starts if s[0]]
    assert after and all(g == 1 for _, _, g in after)


def first_drift(stream: list) -> int | None:
    """The sample at which a ForestClassifier learning ``stream`` first detects a drift (None: never)."""
    model = ForestClassifier(seed=1)
    for i, (x, y) in enumerate(stream):
        model.learn_one(x, y)
        if model.n_drifts_detected:
            return i
    return None


def test_a_rise_soon_after_the_learning_curve_is_cut_without_waiting_for_the_detector(monkeypatch):
    # Agrawal function 4 -> 7 at sample 1,000: ADWIN signals the fall of the young forest's error at 931 and
    # forgets what came before; the rise after 1,000 is then compared with a few dozen samples and goes unseen for
    # a thousand samples. The scan of the window's errors cuts within 200 samples of the change.
    from scenarios.benchmarks.river import drift_stream

    stream = drift_stream("agrawal47", 1000, width=1, n=1200, seed=11)

    at = first_drift(stream)
    assert at is not None and 1000 <= at < 1200
    monkeypatch.setattr(driver, "RISE_LLR", math.inf)
    assert first_drift(stream) is None


def test_a_rise_after_the_learning_curve_is_compared_with_the_errors_of_a_forest_that_has_learned(monkeypatch):
    # Agrawal function 4 -> 7 over 100 samples at sample 1,000: the young forest's early errors, pooled before a
    # split of the whole window, hide the rise; the latest half or quarter of the window shows it.
    from scenarios.benchmarks.river import drift_stream

    stream = drift_stream("agrawal47", 1000, width=100, n=1200, seed=11)

    at = first_drift(stream)
    assert at is not None and 1000 <= at < 1050
    monkeypatch.setattr(driver, "RISE_SPANS", 1)
    late = first_drift(stream)
    assert late is None or late >= 1100


def test_a_custom_detector_and_the_regressor_follow_a_drift():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(3000, 2))
    y = np.where(np.arange(3000) < 1500, 3 * X[:, 0], -3 * X[:, 0]) + 0.1 * rng.normal(size=3000)
    stream = [({"a": float(a), "b": float(b)}, float(t)) for (a, b), t in zip(X, y, strict=True)]

    def late_mae(model) -> float:
        mae = metrics.MAE()
        for i, (x, t) in enumerate(stream):
            if i >= 1800:
                mae.update(t, model.predict_one(x))
            model.learn_one(x, t)
        return mae.get()

    detector = drift.PageHinkley(mode="up")
    adaptive = ForestRegressor(seed=0, drift_detector=detector)
    fast, slow = late_mae(adaptive), late_mae(ForestRegressor(seed=0, drift_detector=drift.NoDrift()))
    assert adaptive.n_drifts_detected >= 1 and fast < 0.5 * slow
    assert detector._x_mean.n == 0  # the parameter is cloned, never fed itself


def test_the_window_recalls_the_forgotten_samples_no_later_one_has_overwritten():
    rows = [({"a": float(i), "b": "odd" if i % 2 else "even"}, i % 2) for i in range(9)]
    rows.append(({"a": 9.0, "c": 1.5}, 1))  # a key first seen after the window forgot
    full, w = SampleWindow(size=8), SampleWindow(size=8)
    for x, y in rows[:7]:
        full.add(x, y)
        w.add(x, y)
    before = copy.deepcopy(w)
    w.forget(2)
    assert w.recall(w) == 0 and len(w) == 2  # a copy made after the forget holds nothing older
    for x, y in rows[7:]:
        full.add(x, y)
        w.add(x, y)
    # Samples 0-6 were held before; 0 and 1 have been overwritten by 8 and 9: 2, 3 and 4 come back.
    assert w.recall(before) == 3 and w.recall(before) == 0
    assert len(w) == len(full) == 8 and w.keys == full.keys and w.count.tolist() == full.count.tolist()
    for j in range(len(w.keys)):
        assert np.array_equal(w.column(j), full.column(j), equal_nan=w.nominal[j] is False)
    assert w.labels().tolist() == full.labels().tolist()


def test_a_drift_signalled_on_a_stationary_stream_is_withdrawn_and_the_old_forest_learns_on():
    # SEA's first concept alone (seed 149 of the benchmark's recovery table): with model seed 1, ADWIN signals a
    # change at sample 1,196 on a run of errors. The old forest errs no more often after it: at the end of the
    # transition the drift is withdrawn, the window holds its 2,000 samples again and the old forest predicts.
    from river import forest

    from scenarios.benchmarks.river import RECOVERY_KINDS, progressive

    first, _ = RECOVERY_KINDS["sea"](149)
    stream = list(first.take(3000))
    model = ForestClassifier(seed=1)
    _, _, right = progressive(model, stream)
    driver = model._driver
    assert model.n_drifts_detected == 1 and driver.n_withdrawn == 1 and driver.n_cuts == 1
    assert len(driver.window) >= driver.params["window_size"]
    # On samples 1,500-2,750: 17 errors, ARF 20; without the withdrawal (checked) 43, the forest regrown on the
    # refilling window.
    _, _, arf = progressive(forest.ARFClassifier(seed=1), stream)
    assert (~right[1500:2750]).sum() <= (~arf[1500:2750]).sum() + 5


def test_a_change_of_concept_is_never_withdrawn():
    from scenarios.benchmarks.river import drift_stream, progressive

    for kind, width in [("stagger", 1), ("sea", 1), ("sea", 100), ("agrawal", 100)]:
        model = ForestClassifier(seed=1)
        progressive(model, drift_stream(kind, 1200, width, n=2400, seed=131))
        assert model.n_drifts_detected >= 1 and model._driver.n_withdrawn == 0, (kind, width)


@pytest.mark.parametrize("stream", ["phishing", "agrawal"])
def test_no_drift_is_detected_on_stationary_streams(stream):
    data = PHISHING if stream == "phishing" else list(synth.Agrawal(classification_function=2, seed=1).take(3000))
    # Without a detector the window never grows: the one with a detector keeps its size too, for the same forest.
    model = ForestClassifier(seed=1, window_growth=1.0)
    still = ForestClassifier(seed=1, drift_detector=drift.NoDrift())
    tempered = 0
    for x, y in data:
        p, q = model.predict_proba_one(x), still.predict_proba_one(x)
        # The same forest: the same class; only the tempering (a burst of errors) makes the detector's less sure.
        assert p.keys() == q.keys()
        if q:
            assert max(p, key=p.get) == max(q, key=q.get) and max(p.values()) <= max(q.values()) + 1e-12
        tempered += p != q
        model.learn_one(x, y)
        still.learn_one(x, y)
    assert model.n_drifts_detected == 0
    assert tempered < 0.05 * len(data)


def test_through_a_change_the_classifier_tempers_its_confident_errors(monkeypatch):
    # While the error rises over a gradual change (STAGGER rule 0 -> 2 over 100 samples), the forest grown on the
    # old rule is as sure as before: tempered by the excess of its recent error, its probabilities rank the
    # samples better (progressive ROCAUC), and it predicts the same classes.
    from scenarios.benchmarks.river import drift_stream, progressive

    def run(z: float) -> tuple[list[float], list[np.ndarray]]:
        monkeypatch.setattr(driver, "TEMPER_Z", z)
        streams = [drift_stream("stagger", position, width=100, n=position + 300, seed=seed)
                   for seed, position in [(5, 600), (6, 700)]]
        out = [progressive(ForestClassifier(seed=0), stream) for stream in streams]
        return [auc for auc, _, _ in out], [right for _, _, right in out]

    aucs, rights = run(driver.TEMPER_Z)
    plain_aucs, plain_rights = run(math.inf)
    assert all(np.array_equal(r, q) for r, q in zip(rights, plain_rights, strict=True))
    assert all(a > b for a, b in zip(aucs, plain_aucs, strict=True))


def test_before_the_cut_the_rise_the_scan_finds_tempers_the_probabilities(monkeypatch):
    # SEA's shift of threshold (variant 0 -> 3) raises the error from a few percent to a tenth: the scan's evidence
    # grows for a hundred samples before the cut, while the error of the last 25 samples flickers around the
    # threshold of the tempering. Tempered by the scan's excess from TEMPER_LLR on, the probabilities rank the
    # samples better, and the predicted classes stay.
    from scenarios.benchmarks.river import drift_stream, progressive

    streams = [drift_stream("sea", position, width=1, n=position + 500, seed=seed)
               for seed, position in [(6, 800), (7, 900)]]

    def run(threshold: float) -> list[tuple[float, float, np.ndarray]]:
        monkeypatch.setattr(driver, "TEMPER_LLR", threshold)
        return [progressive(ForestClassifier(seed=0), stream) for stream in streams]

    tempered, plain = run(driver.TEMPER_LLR), run(math.inf)
    for (auc, _, right), (plain_auc, _, plain_right) in zip(tempered, plain, strict=True):
        assert np.array_equal(right, plain_right) and auc > plain_auc


# ----------------------------------------------------------------------------- bounds


def test_memory_stays_bounded_over_a_long_stream():
    rng = np.random.default_rng(0)
    model = ForestClassifier(window_size=300, grace_period=50, refresh_every=50, trees_per_generation=4,
                             max_depth=6, max_generations=6, seed=0)
    sizes, trees = [], []
    for i in range(6000):
        a, b, c = rng.normal(size=3)
        x = {"a": float(a), "b": float(b), "c": float(c)}
        model.learn_one(x, bool(a + (b if i < 3000 else -b) > 0))  # with a drift halfway
        if i % 1000 == 999:
            sizes.append(model._raw_memory_usage)
            trees.append(model.forest.n_trees_)
    f = model.forest
    # The window grows on a stationary concept (window_growth) up to twice window_size, never past it.
    assert f.n_samples_ == len(model._driver.window) <= 600 and model._driver.window.size == 600
    assert len(f.generations_) <= 6 and max(trees) <= 6 * 4
    assert max(sizes[1:]) < 1.5 * sizes[1]  # no growth with the number of samples seen
    assert model.predict_proba_one({"a": 0.1, "b": -1.0, "c": 0.0})[True] > 0.5  # the new concept


def test_window_ring_buffer():
    w = SampleWindow(size=4)
    for i in range(10):
        w.add({"x": float(i), **({"odd": "y"} if i % 2 else {})}, i % 3)
    assert w.column(0).tolist() == [6.0, 7.0, 8.0, 9.0]
    assert w.column(1).tolist() == [None, "y", None, "y"]
    assert w.count.tolist() == [4, 2] and w.labels().tolist() == [0, 1, 2, 0]


def test_a_window_below_its_size_holds_its_limit_and_grows_when_told():
    w, plain = SampleWindow(size=8, limit=4), SampleWindow(size=4)
    for i in range(10):
        x = {"x": float(i), **({"odd": "y"} if i % 2 else {})}
        w.add(x, i % 3)
        plain.add(x, i % 3)
        assert len(w) == len(plain)
        assert w.column(0).tolist() == plain.column(0).tolist() and w.count.tolist() == plain.count.tolist()
    w.hold(8)  # the older samples stay from now on
    for i in range(10, 13):
        w.add({"x": float(i)}, 0)
    assert len(w) == 7 and w.column(0).tolist() == [6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
    assert w.count.tolist() == [7, 2]
    w.hold(3)  # back down: the oldest are forgotten at once
    assert w.column(0).tolist() == [10.0, 11.0, 12.0] and w.count.tolist() == [3, 0] and w.limit == 3
    w.add({"x": 13.0}, 1)
    assert w.column(0).tolist() == [11.0, 12.0, 13.0] and w.labels().tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match="limit"):
        SampleWindow(size=4, limit=5)


# ----------------------------------------------------------------------------- the encoder


def test_encoder_in_a_pipeline_learns_and_encodes_through_the_forest():
    encoder = ForestEncoder(**SMALL, seed=0)
    model = compose.Pipeline(encoder, linear_model.LogisticRegression(optimizer=optim.SGD(0.1)))
    metric = metrics.ROCAUC()
    for x, y in PHISHING:
        metric.update(y, model.predict_proba_one(x))
        model.learn_one(x, y)
    assert encoder.forest is not None and metric.get() > 0.9
    x = PHISHING[0][0]
    E = encoder.forest.encode({name: x[name] for name in encoder.forest.feature_names_in_}, n_components=2**20,
                              values="weighted")
    assert encoder.transform_one(x) == pytest.approx(dict(zip(E.indices.tolist(), E.data.tolist(), strict=True)))


def test_regressor_predicts_the_mean_then_learns():
    model = ForestRegressor(**SMALL, seed=0)
    assert model.predict_one({"a": 1.0}) == 0.0
    rng = np.random.default_rng(3)
    ys = []
    for i in range(400):
        a = float(rng.normal())
        ys.append(3 * a + 10)
        if i == 10:
            assert model.predict_one({"a": 0.0}) == pytest.approx(np.mean(ys[:10]))
        model.learn_one({"a": a}, ys[-1])
    assert model.forest.task == "regression"
    assert model.predict_one({"a": 1.0}) == pytest.approx(13, abs=0.7)
    with pytest.raises(ValueError, match="finite"):
        model.learn_one({"a": 1.0}, math.nan)


def test_encoder_decides_the_task_from_the_first_label():
    enc = ForestEncoder(**SMALL, seed=0)
    for x, y in datasets.TrumpApproval().take(100):
        enc.learn_one(x, y)
    assert enc.forest.task == "regression" and enc.transform_one(x)
    enc = ForestEncoder(**SMALL, seed=0)
    for x, y in PHISHING[:100]:
        enc.learn_one(x, y)
    assert enc.forest.task == "classification"


# ----------------------------------------------------------------------------- the feed from the engine


def test_feed_turns_real_engine_output_into_pairs_a_river_model_learns_from(tmp_path):
    from streamforest.datasets import bundled_dir

    msgs, test, data = produce_messages(bundled_dir() / "banknote-authentication_1462.csv", "target", "bank", seed=0)
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in msgs))
    config = EngineConfig(forest={"trees_per_generation": 4, "max_depth": 4, "random_state": 0},
                          encoding="leaves", n_components=2**12)
    run(str(source), str(tmp_path / "out"), config)

    records = list(read_records(tmp_path / "out"))
    versions = sorted({r["model_version"] for r in records})
    assert len(versions) == data.d  # republished after every feature arrival
    hidden = {str(i): int(data.y[i]) for i in test.tolist()}
    pairs = list(iter_encodings(records, hidden))
    assert len(pairs) == len(test)
    last = {r["id"]: r for r in records if r["model_version"] == versions[-1]}
    for (x, y), sid in zip(pairs, last, strict=True):
        assert x == dict(zip(last[sid]["indices"], last[sid]["values"], strict=True)) and y == hidden[sid]
    # Every record of every version, as they come; the training labels from the input messages join none of them.
    assert len(list(iter_encodings(records, hidden, latest=False))) == len(test) * len(versions)
    train = labels_from_messages(source.read_bytes().splitlines())
    assert len(train) == data.n - len(test) and not list(iter_encodings(records, train))
    with pytest.raises(KeyError, match="no label"):
        next(iter_encodings(records, train, unlabelled="raise"))
    # A River model learns from the pairs (in a random order: the file is sorted by class).
    order = np.random.default_rng(0).permutation(len(pairs))
    model, metric = linear_model.LogisticRegression(optimizer=optim.SGD(0.1)), metrics.ROCAUC()
    for x, y in (pairs[k] for k in order):
        metric.update(y, model.predict_proba_one(x))
        model.learn_one(x, y)
    assert metric.get() > 0.9
    assert next(itertools.islice(iter_encodings(records, hidden, stream="other"), 1), None) is None


def test_after_a_drift_the_new_forest_waits_for_twice_grace_period_samples():
    # Until then the refilling window's generations replace one another on the current forest (its bins); the new
    # forest (bins and keys of the new concept) is grown on 2 * grace_period samples, not grace_period.
    model = ForestClassifier(seed=3)
    stream = iter(STAGGER)
    for x, y in stream:
        model.learn_one(x, y)
        if model.n_drifts_detected:
            break
    assert model.n_drifts_detected == 1
    cut = model.forest
    for x, y in stream:
        model.learn_one(x, y)
        if model.forest is not cut:
            break
    assert len(model._driver.window) == 2 * model.grace_period == 2 * 50
    assert model.forest.n_samples_ == 100


def test_the_forest_takes_new_bins_as_the_window_doubles():
    # Before any drift, the forest from grace_period samples is grown again once, on bins of the window, when it
    # holds twice as many. After a drift the new forest takes its bins from 2 * grace_period samples; at the first
    # growth once the window holds twice the samples the bins came from (while those were fewer than REBIN_BELOW), a
    # new forest of REBIN_GENERATIONS generations is grown on it. A re-binned forest keeps the detector and the
    # errors it followed: no drift is counted, nothing is forgotten.
    model = ForestClassifier(seed=3)
    state = model._driver
    starts = []  # (drifts so far, samples the new forest was grown on, its generations, whether a re-binning)
    forest = detector = None
    for x, y in STAGGER:
        model.learn_one(x, y)
        if model.forest is not forest and not state._provisional:
            forest = model.forest
            rebinned = state._detector is detector
            starts.append((model.n_drifts_detected, forest.n_samples_, len(forest.generations_), rebinned))
            if rebinned:
                assert len(state.window) == forest.n_samples_
            detector = state._detector
    grace = model.grace_period
    assert starts[0] == (0, grace, 1, False) and starts[2] == (1, 2 * grace, 1, False) and len(starts) == 5
    assert starts[1][::2] == (0, driver.REBIN_GENERATIONS) and starts[1][3]
    assert 2 * grace <= starts[1][1] < 2 * grace + model.refresh_every
    sizes = [n for _, n, _, _ in starts[2:]]
    assert all(2 * a <= b < 2 * a + model.refresh_every for a, b in itertools.pairwise(sizes))
    assert sizes[-2] < driver.REBIN_BELOW <= sizes[-1]
    assert all(d == 1 and g == driver.REBIN_GENERATIONS and r for d, _, g, r in starts[3:])


def test_through_a_transition_refreshes_learn_the_old_forests_errors_thrice_and_replace_while_it_errs(monkeypatch):
    # STAGGER rule 0 -> 2 over 200 samples at 1,400: the window kept after the drift mixes both rules, the new one's
    # share growing along it. A refresh through the transition takes the samples the old rule's forest got wrong (the
    # new rule's where the two disagree) three times, and while that forest errs on a quarter of them its generation
    # replaces the older ones (grown on fewer of the new rule's samples): ours errs less from the middle of the change
    # on than with neither.
    from scenarios.benchmarks.river import drift_stream, progressive

    stream = drift_stream("stagger", 1400, width=200, n=1700, seed=409)
    refresh, training_order = driver.ForestDriver._refresh, driver.ForestDriver._training_order
    notes: list[tuple[bool, int]] = []
    orders: list[tuple[int, int, int]] = []

    def noting(self):
        often = self._old is not None and self._old_errs_often()
        refresh(self)
        if self._old is not None:
            notes.append((often, len(self.forest.generations_)))

    def ordering(self):
        order = training_order(self)
        if self._old is not None:
            held = self.window.order()
            wrong = int(np.sum(self._old_errors[held] > 0))
            orders.append((order.size, np.unique(order).size, len(self.window), wrong))
        return order

    monkeypatch.setattr(driver.ForestDriver, "_refresh", noting)
    monkeypatch.setattr(driver.ForestDriver, "_training_order", ordering)
    right = progressive(ForestClassifier(seed=1), stream)[2]
    assert any(often for often, _ in notes) and all(n == 1 for often, n in notes if often)
    assert any(n > 1 for often, n in notes if not often)
    whole = [(size, unique, wrong) for size, unique, n, wrong in orders if unique == n]
    assert whole and all(size == unique + driver.TRANSITION_WRONG * wrong for size, unique, wrong in whole)
    assert any(wrong for _, _, wrong in whole)
    monkeypatch.setattr(driver, "REPLACE_OLD_ERROR", 2.0)
    monkeypatch.setattr(driver, "TRANSITION_WRONG", 0)
    right_without = progressive(ForestClassifier(seed=1), stream)[2]
    assert right[1400:].sum() > right_without[1400:].sum()


def test_the_regression_benchmark_scores_both_models_and_the_error_after_each_change(tmp_path):
    # ``scenarios.benchmarks.river_regression``: ours and River's scaled ARFRegressor on the same samples, each
    # row's ratio from the same run; a drift stream's recovery is the MAE of the samples after each change.
    import json

    from scenarios.benchmarks import river_regression as bench

    assert bench.after_changes(np.arange(10.0), (2, 6), after=3) == [3.0, 7.0]
    out = tmp_path / "rr.json"
    assert bench.main(["--only", "trump", "--reps", "1", "--out", str(out), "--check"]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["n_samples"] == 1001 and row["changes"] == []
    assert row["mae_ratio"] == pytest.approx(row["mae_ours"] / row["mae_arf"])
    assert 0 < row["mae_ours"] < row["mae_arf"]
    with pytest.raises(SystemExit):
        bench.main(["--only", "nope", "--out", str(out)])


def test_the_families_benchmark_scores_both_models_on_streams_of_the_families_it_names(tmp_path):
    # ``scenarios.benchmarks.river_families``: generators the drift handling was never tuned on; a row's means are
    # its runs', a binary row also holds the exact AUC and log loss of the same predictions.
    import json

    from scenarios.benchmarks import river_families as bench

    three = bench.STREAMS["stagger_three"][1](5)
    assert len(three) == bench.N and three[:1000] == list(itertools.islice(synth.STAGGER(0, seed=5), 1000))
    assert three[3000:3100] == list(itertools.islice(synth.STAGGER(0, seed=8), 100))
    assert bench.log_loss([({}, True), ({}, False)], [{True: 1.0}, {}]) == pytest.approx(math.log(2) / 2)
    out = tmp_path / "rf.json"
    assert bench.main(["--only", "stagger10_early,led03", "--reps", "1", "--out", str(out), "--check"]) == 0
    binary, multi = json.loads(out.read_text())["rows"]
    assert binary["binary"] and not multi["binary"] and binary["n_samples"] == multi["n_samples"] == bench.N
    assert binary["rocauc_ours"] == binary["runs_ours"][0]["rocauc"] and "kappa_arf" in multi
    assert 0.9 < binary["exact_auc_ours"] <= 1 and 0 < binary["log_loss_ours"] < binary["log_loss_arf"]
    assert multi["accuracy_ours"] >= multi["accuracy_arf"] > 0.5
    assert binary["speed_ratio"] == pytest.approx(binary["sps_ours"] / binary["sps_arf"])
    with pytest.raises(SystemExit):
        bench.main(["--only", "nope", "--out", str(out)])


def test_the_families_benchmarks_changes_swap_a_concept_for_another_draw_of_its_generator(tmp_path):
    # ``--changes``: changes of other shapes than the families'; a swapped generator draws its second concept from
    # ``data_seed + 100``, and label noise stays through the change.
    import json

    from scenarios.benchmarks import river_families as bench

    assert not set(bench.CHANGES) & set(bench.STREAMS)
    noisy = bench.CHANGES["sea12_noise"][1](5)
    assert len(noisy) == bench.N and noisy[:2500] == list(itertools.islice(synth.SEA(1, noise=0.1, seed=5), 2500))
    swap = bench.CHANGES["randomrbf_swap"][1](5)
    second = synth.RandomRBF(seed_model=105, seed_sample=7, n_classes=2, n_features=10, n_centroids=20)
    assert swap[2500:2600] == list(itertools.islice(second, 100))
    out = tmp_path / "changes.json"
    assert bench.main(["--changes", "--only", "randomrbf4_swap", "--reps", "1", "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["stream"] == "randomrbf4_swap" and not row["binary"] and row["n_samples"] == bench.N
    assert row["accuracy_ours"] > 0.5 and "kappa_arf" in row


def test_the_river_benchmarks_multiclass_table_scores_both_models_on_the_same_samples():
    # Accuracy and Cohen's kappa of ours and ARF per multiclass stream, medians over the model seeds, speed ratio of
    # the same run; a row's figures are its runs'.
    from scenarios.benchmarks.river import multiclass_datasets, multiclass_table

    assert set(multiclass_datasets(quick=True)) == {"waveform", "led_drift", "led_abrupt", "randomrbf4_drift"}
    (row,) = multiclass_table(["waveform"], quick=True, reps=1)
    assert row["n_samples"] == 2000 and len({y for _, y in multiclass_datasets(True)["waveform"][1]()}) == 3
    assert row["accuracy_ours"] == row["runs_ours"][0][0] and row["kappa_arf"] == row["runs_arf"][0][1]
    assert 0.6 < row["accuracy_ours"] <= 1 and 0.6 < row["accuracy_arf"] <= 1 and 0 < row["kappa_ours"] < 1
    assert row["speed_ratio"] == pytest.approx(row["sps_ours"] / row["sps_arf"])
