"""The engine's pure ``process`` API: handlers, replays, outputs, and fuzzing of everything a producer can send.

No broker and no mocks: raw message bytes go in, output records come out, and the stream state is compared with
what the same good messages alone produce.
"""

from __future__ import annotations

import functools
import itertools
import random

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamforest import FeatureStreamForest
from streamforest.engine.core import Engine, EngineConfig

from .support import (
    TINY,
    control,
    dumps,
    engine,
    feature,
    feed,
    label,
    of_type,
    samples,
    snapshot,
    task,
    task_messages,
    untimed,
)

FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def toy():
    return task()


def started(t, publish="unlabelled", encoding="none", **forest) -> tuple[Engine, list[dict]]:
    e = engine(publish=publish, encoding=encoding, **forest)
    return e, feed(e, task_messages(t))


def one_error(out: list[dict], reason: str = "") -> dict:
    assert len(out) == 1 and out[0]["type"] == "error", out
    assert reason in out[0]["reason"], out[0]["reason"]
    return out[0]


def scoring_ids(t) -> list[str]:
    return [i for i, lab in zip(t["ids"], t["labels"], strict=True) if lab is None]


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize("kwargs", [{"publish": "some"}, {"encoding": "trees"}, {"n_components": 0},
                                    {"forest": {"trees_per_generation": 0}}, {"forest": {"bogus": 1}},
                                    {"start": "fit"}])
def test_bad_configuration_is_refused_when_the_engine_is_made(kwargs):
    with pytest.raises((ValueError, TypeError)):
        EngineConfig(**kwargs)


# ----------------------------------------------------------------------------- feedback


def test_one_feedback_per_arrived_feature_with_the_fields_of_the_issue(toy):
    e, out = started(toy)
    fb = of_type(out, "feedback")
    assert [r["feature"] for r in fb] == list(toy["columns"])
    forest = e.streams["s"].forest
    for k, r in enumerate(fb):
        assert r["v"] == 1 and r["key"] == "s" and r["stream"] == "s"
        assert r["generation"] == k and r["model_version"] == k + 1
        assert 0 < r["weight_share"] <= 1 and r["n_trees"] == 3
        assert 0 <= r["importance"] <= 1
        assert r["oob_metric"] == "auc" and 0 <= r["oob_after"] <= 1
        assert r["oob_before"] == (None if k == 0 else fb[k - 1]["oob_after"])
        assert all(g < k for g in r["pruned"]) and r["merged"] == []  # a narrow stream's oldest fade fast
        assert isinstance(r["seconds"], float) and r["seconds"] >= 0
    assert fb[-1]["model_version"] == forest.model_version_
    shares = {g["id"]: g["weight_share"] for g in forest.generations_}
    assert fb[-1]["weight_share"] == pytest.approx(shares[fb[-1]["generation"]])
    cat = list(forest.feature_names_in_).index("cat")
    assert fb[-1]["importance"] == pytest.approx(forest.feature_importances_[cat])


def test_a_feature_sent_with_paired_null_reports_its_twin_and_grows_the_same_forest(toy):
    plain, _ = started(toy)
    e = engine()
    msgs = task_messages(toy)
    feed(e, msgs[:-1])
    last = {**msgs[-1], "paired_null": True}
    fb = of_type(feed(e, [last]), "feedback")[-1]
    same = of_type(feed(engine(), msgs), "feedback")[-1]
    assert {k: v for k, v in fb.items() if k not in ("seconds", "oob_null", "oob_paired_se")} == \
        {k: v for k, v in same.items() if k != "seconds"}
    assert 0 <= fb["oob_null"] <= 1 and fb["oob_paired_se"] >= 0 and "oob_null" not in same
    assert snapshot(e) == snapshot(plain)


def test_feedback_names_the_generations_that_pruning_dropped(toy):
    e, out = started(toy, prune_threshold=0.3)
    fb = of_type(out, "feedback")
    pruned = [g for r in fb for g in r["pruned"]]
    assert pruned, "a high prune threshold must drop old generations"
    alive = {g["id"] for g in e.streams["s"].forest.generations_}
    assert not alive & set(pruned)
    assert all(g < r["generation"] for r in fb for g in r["pruned"])


def test_features_before_labels_start_the_forest_when_two_classes_are_known(toy):
    e = engine()
    unlabelled = samples("s", [(i, None) for i in toy["ids"]])
    out = feed(e, [unlabelled, *task_messages(toy)[1:]])
    assert e.streams["s"].forest is None
    # Each arriving feature is told why it waits (the stream is not silent).
    assert [(r["type"], r["status"], r["features"][-1]) for r in out] == [
        ("feedback", "waiting", name) for name in toy["columns"]]
    assert all("no labelled sample yet" in r["reason"] for r in out)
    out = feed(e, [samples("s", [(i, lab) for i, lab in zip(toy["ids"], toy["labels"], strict=True)
                                 if lab == 0])])
    assert e.streams["s"].forest is None  # one class only: said so
    assert [r["status"] for r in out] == ["waiting"] and "have the label 0" in out[0]["reason"]
    assert feed(e, [samples("s", [("new", None)])]) == []  # unlabelled samples change nothing about it
    out = feed(e, [samples("s", list(zip(toy["ids"], toy["labels"], strict=True)))])
    fb = of_type(out, "feedback")
    assert [r["feature"] for r in fb] == list(toy["columns"])  # one feedback per feature, in arrival order
    assert {r["id"] for r in of_type(out, "prediction")} == {*scoring_ids(toy), "new"}


def test_under_start_control_the_forest_starts_on_control_start_as_the_offline_forest(toy):
    config = EngineConfig(forest={**TINY, "trees_per_generation": 12}, encoding="none", start="control")
    assert config.to_json()["start"] == "control" and "start" not in EngineConfig().to_json()  # old checkpoints hold
    e = Engine(config)
    out = feed(e, task_messages(toy))  # labels and features gather: nothing grows
    assert e.streams["s"].forest is None
    assert {(r["status"], "control start" in r["reason"]) for r in out} == {("waiting", True)}
    out = feed(e, [control("s", "start")])
    (fb,) = of_type(out, "feedback")  # one generation, one feedback, no feature of its own
    assert (fb["feature"], fb["generation"], fb["n_trees"], fb["weight_share"], fb["model_version"]) == ("", 0, 12,
                                                                                                      1.0, 1)
    assert fb["oob_metric"] == "auc" and fb["oob_before"] is None and 0.5 < fb["oob_after"] <= 1.0
    # The forest FeatureStreamForest.fit grows on the labelled rows: the same predictions of the scoring set.
    lab = [k for k, v in enumerate(toy["labels"]) if v is not None]
    X = {name: np.array(col, dtype=object) if toy["kinds"][name] == "nominal"
         else np.array([np.nan if v is None else v for v in col]) for name, col in toy["columns"].items()}
    offline = FeatureStreamForest(**{**TINY, "trees_per_generation": 12}).fit(
        {name: col[lab] for name, col in X.items()}, np.array([toy["labels"][k] for k in lab]), kinds=toy["kinds"])
    scored = [k for k, v in enumerate(toy["labels"]) if v is None]
    expected = offline.predict_proba({name: col[scored] for name, col in X.items()})
    got = {r["id"]: r["proba"] for r in of_type(out, "prediction")}
    assert np.allclose([[got[toy["ids"][k]]["0"], got[toy["ids"][k]]["1"]] for k in scored], expected)
    # Started: control start republishes (as snapshot), and a later feature grows its own generation.
    again = feed(e, [control("s", "start")])
    assert not of_type(again, "feedback") and len(of_type(again, "prediction")) == len(scored)
    out = feed(e, [feature("s", "late", toy["ids"], [float(k % 3) for k in range(len(toy["ids"]))])])
    assert [(r["feature"], r["generation"]) for r in of_type(out, "feedback")] == [("late", 1)]


def test_control_start_starts_a_stream_of_the_default_engine_that_waits_only_with_two_classes(toy):
    e = engine()
    unlabelled = samples("s", [(i, None) for i in toy["ids"]])
    feed(e, [unlabelled, *task_messages(toy)[1:]])
    out = feed(e, [control("s", "start")])  # no label: it says why it waits
    assert e.streams["s"].forest is None and [r["status"] for r in out] == ["waiting"]
    feed(e, [samples("s", list(zip(toy["ids"], toy["labels"], strict=True)))])  # starts on arrival, as ever
    assert len(e.streams["s"].forest.generations_) >= 1


# ----------------------------------------------------------------------------- predictions and encodings


@pytest.mark.parametrize("publish", ["unlabelled", "all"])
def test_predictions_of_the_scoring_set_under_each_new_model_version(toy, publish):
    e = engine(publish=publish)
    expected_ids = toy["ids"] if publish == "all" else scoring_ids(toy)
    for k, msg in enumerate(task_messages(toy)):
        out = e.process(dumps(msg))
        if k == 0:
            assert out == []
            continue
        st_ = e.streams["s"]
        preds = of_type(out, "prediction")
        assert [r["id"] for r in preds] == expected_ids
        assert {r["model_version"] for r in preds} == {st_.forest.model_version_} == {k}
        rows = np.array([st_.index[i] for i in expected_ids])
        proba = st_.forest.predict_proba(st_.rows_matrix(rows))
        assert [[r["proba"]["0"], r["proba"]["1"]] for r in preds] == proba.tolist()
        for r in preds:
            assert r["v"] == 1 and r["key"] == f"s/{r['id']}" and r["stream"] == "s"
            assert sum(r["proba"].values()) == pytest.approx(1.0)


def test_publish_none_gives_feedback_only(toy):
    e, out = started(toy, publish="none", encoding="leaves")
    assert {r["type"] for r in out} == {"feedback"}
    assert feed(e, [label("s", scoring_ids(toy)[0], 1), control("s", "snapshot")]) == []


@pytest.mark.parametrize("encoding", ["leaves", "paths"])
def test_encodings_equal_the_forests_own_encode_on_the_same_rows(toy, encoding):
    e = engine(encoding=encoding, n_components=2**12)
    ids = scoring_ids(toy)
    for msg in task_messages(toy):
        out = e.process(dumps(msg))
        enc = of_type(out, "encoding")
        if not of_type(out, "feedback"):
            continue
        st_ = e.streams["s"]
        rows = np.array([st_.index[i] for i in ids])
        E = st_.forest.encode(st_.rows_matrix(rows), n_components=2**12, leaves_only=encoding == "leaves")
        assert [r["id"] for r in enc] == ids
        for k, r in enumerate(enc):
            assert r["v"] == 1 and r["key"] == f"s/{r['id']}" and r["dim"] == 2**12
            assert r["model_version"] == st_.forest.model_version_
            lo, hi = E.indptr[k], E.indptr[k + 1]
            assert r["indices"] == E.indices[lo:hi].tolist()
            assert r["values"] == E.data[lo:hi].tolist()
        n_trees = st_.forest.n_trees_
        sizes = [sum(r["values"]) for r in enc]
        if encoding == "leaves":
            assert sizes == [n_trees] * len(enc)  # one leaf per tree (collisions summed)
        else:
            assert min(sizes) > n_trees  # roots, inner nodes and leaves


def test_weighted_encoding_values_are_published_as_configured(toy):
    e = Engine(EngineConfig(forest={"trees_per_generation": 3, "max_depth": 4, "random_state": 0},
                            encoding="leaves", n_components=2**10, encoding_values="weighted"))
    out = feed(e, task_messages(toy))
    last = of_type(out, "encoding")[-len(scoring_ids(toy)):]
    st_ = e.streams["s"]
    rows = np.array([st_.index[r["id"]] for r in last])
    E = st_.forest.encode(st_.rows_matrix(rows), n_components=2**10, values="weighted", leaves_only=True)
    assert [r["values"] for r in last] == [E.data[E.indptr[k]:E.indptr[k + 1]].tolist() for k in range(len(last))]
    assert any(v != 1.0 for r in last for v in r["values"])


def test_every_record_carries_version_and_key(toy):
    e, out = started(toy, encoding="paths")
    out += feed(e, [label("s", scoring_ids(toy)[0], 0), control("s", "snapshot"), b"{", label("s", "nope", 1)])
    assert {r["type"] for r in out} == {"feedback", "prediction", "encoding", "error"}
    for r in out:
        assert r["v"] == 1 and isinstance(r["key"], str)
        orjson.dumps(r)
        if r["type"] in ("prediction", "encoding"):
            assert r["key"] == f"{r['stream']}/{r['id']}"
        elif r["type"] == "feedback":
            assert r["key"] == r["stream"]


def test_regression_streams_publish_predicted_values():
    t = task()
    rng = np.random.default_rng(1)
    targets = [None if lab is None else round(float(a + rng.normal(0, 0.1)), 3)
               for a, lab in zip(t["columns"]["a"], t["labels"], strict=True)]
    e = engine(task="regression")
    out = feed(e, [samples("r", list(zip(t["ids"], targets, strict=True))),
                   feature("r", "a", t["ids"], t["columns"]["a"])])
    preds = of_type(out, "prediction")
    st_ = e.streams["r"]
    rows = np.array([st_.index[r["id"]] for r in preds])
    assert [r["value"] for r in preds] == st_.forest.predict(st_.rows_matrix(rows)).tolist()
    assert of_type(out, "feedback")[0]["oob_metric"] != "auc"


def test_streams_are_independent(toy):
    e = engine()
    flipped = [None if lab is None else 1 - lab for lab in toy["labels"]]
    feed(e, task_messages(toy, "s"))
    feed(e, [samples("t", list(zip(toy["ids"], flipped, strict=True))),
             feature("t", "a", toy["ids"], toy["columns"]["a"])])
    s, t = e.streams["s"], e.streams["t"]
    assert s.features == list(toy["columns"]) and t.features == ["a"]
    assert s.forest.model_version_ == 4 and t.forest.model_version_ == 1
    assert t.labels == flipped and s.labels == toy["labels"]
    feed(e, [control("t", "drop")])
    assert list(e.streams) == ["s"] and s.forest.model_version_ == 4


# ----------------------------------------------------------------------------- replays of features


def test_the_same_feature_again_is_ignored(toy):
    e, _ = started(toy, encoding="leaves")
    before = snapshot(e)
    msg = task_messages(toy)[2]
    assert e.process(dumps(msg)) == []
    shuffled = list(zip(msg["ids"], msg["values"], strict=True))
    random.Random(0).shuffle(shuffled)
    assert e.process(dumps(feature("s", msg["name"], [i for i, _ in shuffled], [v for _, v in shuffled],
                                   msg.get("kind")))) == []
    assert snapshot(e) == before


def test_the_same_numbers_written_as_integers_or_floats_are_the_same_content():
    """JSON ``1`` and ``1.0`` are one number (producers differ in how they write them): a replay, not a conflict."""
    e = engine()
    feed(e, [samples("s", [("0", 0), ("1", 1), ("2", None)]), feature("s", "a", ["0", "1", "2"], [1, 2, 3])])
    before = snapshot(e)
    assert e.process(dumps(feature("s", "a", ["0", "1", "2"], [1.0, 2.0, 3.0]))) == []
    assert snapshot(e) == before


def test_the_same_feature_with_other_content_is_an_error(toy):
    e, _ = started(toy)
    before = snapshot(e)
    msg = task_messages(toy)[2]
    changed = dict(msg, values=[None if v is None else v + 1 for v in msg["values"]])
    one_error(e.process(dumps(changed)), "already arrived with other values")
    fewer = dict(msg, ids=msg["ids"][:10], values=msg["values"][:10])
    one_error(e.process(dumps(fewer)), "already arrived with other values")
    assert snapshot(e) == before


def test_a_part_of_an_arrived_feature_with_the_same_content_is_ignored(toy):
    e, _ = started(toy)
    before = snapshot(e)
    msg = task_messages(toy)[1]
    assert e.process(dumps(feature("s", "a", msg["ids"][:20], msg["values"][:20], "numeric", 0, 3))) == []
    assert snapshot(e) == before


def test_a_part_of_an_arrived_feature_with_other_content_is_an_error(toy):
    """A replay with different content is an error record (issue 4), whether it comes whole or in parts."""
    e, _ = started(toy)
    before = snapshot(e)
    msg = task_messages(toy)[1]
    other = [v + 100.0 for v in msg["values"][:20]]
    out = e.process(dumps(feature("s", "a", msg["ids"][:20], other, "numeric", 0, 3)))
    assert snapshot(e) == before
    one_error(out, "a")


def test_a_feature_that_came_in_parts_replayed_whole_is_ignored(toy):
    e = engine()
    msgs = task_messages(toy)
    col = msgs[1]
    feed(e, [msgs[0], feature("s", "a", col["ids"][30:], col["values"][30:], "numeric", 1, 2),
             feature("s", "a", col["ids"][:30], col["values"][:30], "numeric", 0, 2)])
    before = snapshot(e)
    assert e.process(dumps(col)) == []
    assert snapshot(e) == before


# ----------------------------------------------------------------------------- replays of samples, labels


def test_a_sample_seen_again_updates_and_never_duplicates(toy):
    e, _ = started(toy)
    sid = scoring_ids(toy)[0]
    out = feed(e, [samples("s", [{"id": sid, "label": None, "x": {"a": 42.0, "cat": "blue"}}])])
    st_ = e.streams["s"]
    row = st_.index[sid]
    assert st_.n_samples == len(toy["ids"]) and st_.ids.count(sid) == 1
    assert st_.columns["a"][row] == 42.0 and st_.columns["cat"][row] == "blue" and st_.labels[row] is None
    assert of_type(out, "prediction") == [] and out == []  # nothing to learn, no new model
    feed(e, [samples("s", [(sid, None), ("new", None)])])
    st_ = e.streams["s"]
    assert st_.n_samples == len(toy["ids"]) + 1 and st_.ids.count(sid) == 1 and st_.columns["a"][row] == 42.0
    assert np.isnan(st_.columns["a"][st_.index["new"]])


def test_a_training_sample_replayed_identically_is_ignored(toy):
    e, _ = started(toy)
    before = snapshot(e)
    x = {"a": toy["columns"]["a"][0], "b": toy["columns"]["b"][0]}
    assert feed(e, [samples("s", [{"id": "0", "label": toy["labels"][0], "x": x}])]) == []
    assert snapshot(e) == before


@pytest.mark.parametrize("change", ["label", "x"])
def test_a_training_sample_with_other_content_is_an_error(toy, change):
    e, _ = started(toy)
    before = snapshot(e)
    s = {"id": "0", "label": 1 - toy["labels"][0]} if change == "label" else \
        {"id": "0", "label": toy["labels"][0], "x": {"a": 1e6}}
    one_error(e.process(dumps(samples("s", [s]))), "already in the training set")
    assert snapshot(e) == before


def test_a_delayed_label_moves_a_scoring_row_into_training_and_republishes(toy):
    e, _ = started(toy, encoding="leaves")
    sid = scoring_ids(toy)[0]
    version, n_train = e.streams["s"].forest.model_version_, e.streams["s"].forest.n_samples_
    out = e.process(dumps(label("s", sid, 1)))
    st_ = e.streams["s"]
    forest = st_.forest
    assert forest.n_samples_ == n_train + 1 and forest.model_version_ == version + 1
    assert st_.index[sid] in st_.train_rows and st_.labels[st_.index[sid]] == 1
    rest = scoring_ids(toy)[1:]
    assert of_type(out, "feedback") == []
    for kind in ("prediction", "encoding"):
        recs = of_type(out, kind)
        assert [r["id"] for r in recs] == rest and {r["model_version"] for r in recs} == {version + 1}
    rows = np.array([st_.index[i] for i in rest])
    assert [list(r["proba"].values()) for r in of_type(out, "prediction")] == \
        forest.predict_proba(st_.rows_matrix(rows)).tolist()
    # The label's replay changes nothing; another label for the same sample is an error.
    before = snapshot(e)
    assert e.process(dumps(label("s", sid, 1))) == []
    one_error(e.process(dumps(label("s", sid, 0))), "already in the training set")
    assert snapshot(e) == before


def test_labels_in_a_samples_message_also_move_rows_into_training(toy):
    e, _ = started(toy)
    ids = scoring_ids(toy)[:3]
    n_train = e.streams["s"].forest.n_samples_
    out = e.process(dumps(samples("s", [(i, 0) for i in ids])))
    assert e.streams["s"].forest.n_samples_ == n_train + 3
    assert [r["id"] for r in of_type(out, "prediction")] == scoring_ids(toy)[3:]


def test_a_label_of_an_unknown_id_or_stream_is_an_error(toy):
    e, _ = started(toy)
    before = snapshot(e)
    one_error(e.process(dumps(label("s", "ghost", 1))), "unknown sample id 'ghost'")
    one_error(e.process(dumps(label("elsewhere", "0", 1))), "unknown stream 'elsewhere'")
    assert snapshot(e) == before


def test_a_label_of_an_unknown_class_is_an_error(toy):
    e, _ = started(toy)
    before = snapshot(e)
    one_error(e.process(dumps(label("s", scoring_ids(toy)[0], 7))), "not among the stream's classes")
    one_error(e.process(dumps(samples("s", [(scoring_ids(toy)[0], "yes")]))), "")
    assert snapshot(e) == before


def test_labels_mixing_strings_and_numbers_are_an_error():
    e = engine()
    feed(e, [samples("s", [("0", 1), ("1", None)])])
    before = snapshot(e)
    one_error(e.process(dumps(samples("s", [("1", "one")]))), "labels mix")
    one_error(e.process(dumps(label("s", "1", "one"))), "labels mix")
    assert snapshot(e) == before


def test_a_boolean_label_next_to_an_integer_one_is_refused_without_changing_anything():
    """``true`` and ``1`` count as two classes for the engine but one for the forest: the refusal must not keep
    the message's data (here the feature column and then the label) half applied."""
    e = engine()
    feed(e, [samples("s", [("0", 1), ("1", True), ("2", None)])])
    before = snapshot(e)
    out = e.process(dumps(feature("s", "a", ["0", "1", "2"], [1.0, 2.0, 3.0])))
    if of_type(out, "error"):
        assert snapshot(e) == before, f"refused ({out[0]['reason']}) but the feature was kept"
    else:
        assert "a" in e.streams["s"].columns
    e = engine()
    feed(e, [samples("s", [("0", 1), ("1", None), ("2", None)]), feature("s", "a", ["0", "1", "2"], [1.0, 2.0, 3.0])])
    before = snapshot(e)
    out = e.process(dumps(label("s", "1", True)))
    if of_type(out, "error"):
        assert snapshot(e) == before, f"refused ({out[0]['reason']}) but the label was kept"
    else:
        assert e.streams["s"].labels[1] is not None


# ----------------------------------------------------------------------------- control, unknown streams, ids


def test_snapshot_republishes_the_current_predictions(toy):
    e, out = started(toy, encoding="leaves")
    last_version = e.streams["s"].forest.model_version_
    last = [r for r in out if r["type"] in ("prediction", "encoding") and r["model_version"] == last_version]
    again = e.process(dumps(control("s", "snapshot")))
    assert again == last and len(again) == 2 * len(scoring_ids(toy))
    assert e.streams["s"].forest.model_version_ == last_version


def test_snapshot_before_the_forest_starts_publishes_nothing():
    e = engine()
    feed(e, [samples("s", [("0", None)])])
    assert e.process(dumps(control("s", "snapshot"))) == []


def test_drop_removes_the_stream(toy):
    e, _ = started(toy)
    assert e.process(dumps(control("s", "drop"))) == []
    assert "s" not in e.streams
    one_error(e.process(dumps(task_messages(toy)[1])), "unknown stream 's'")
    one_error(e.process(dumps(control("s", "snapshot"))), "unknown stream")
    one_error(e.process(dumps(control("s", "drop"))), "unknown stream")
    feed(e, [samples("s", [("0", 1)])])
    assert e.streams["s"].features == [] and e.streams["s"].n_samples == 1


def test_a_feature_for_an_unknown_stream_or_unknown_ids_is_an_error(toy):
    e = engine()
    one_error(e.process(dumps(task_messages(toy)[1])), "unknown stream 's'")
    assert e.streams == {}
    feed(e, task_messages(toy)[:1])
    before = snapshot(e)
    one_error(e.process(dumps(feature("s", "a", ["0", "ghost"], [1.0, 2.0]))), "unknown sample ids ['ghost']")
    assert snapshot(e) == before


def test_samples_naming_features_not_received_are_an_error(toy):
    e, _ = started(toy)
    before = snapshot(e)
    one_error(e.process(dumps(samples("s", [{"id": "new", "x": {"later": 1.0}}]))), "not received")
    assert snapshot(e) == before


def test_a_text_value_for_a_numeric_feature_is_refused_without_changing_anything(toy):
    """The message is bad (a string where the stream's column is numeric): one error record with a reason, and
    the new sample id that came in the same message is not added."""
    e, _ = started(toy)
    before = snapshot(e)
    out = e.process(dumps(samples("s", [("new", None), {"id": scoring_ids(toy)[0], "x": {"a": "zzz"}}])))
    err = one_error(out)
    assert not err["reason"].startswith("internal error"), err["reason"]
    assert snapshot(e) == before


def test_huge_and_empty_arrays():
    n = 50_000
    ids = [str(i) for i in range(n)]
    e = engine()
    out = feed(e, [samples("big", [(i, k % 2 if k % 3 else None) for k, i in enumerate(ids)])])
    assert out == [] and e.streams["big"].n_samples == n
    out = e.process(dumps(feature("big", "x", ids, [float(k % 7) for k in range(n)])))
    assert len(of_type(out, "feedback")) == 1 and len(of_type(out, "prediction")) == len(range(0, n, 3))
    before = snapshot(e)
    ghosts = [f"g{k}" for k in range(n)]
    err = one_error(e.process(dumps(feature("big", "y", ghosts, [1.0] * n))), "unknown sample ids")
    assert len(err["reason"]) < 500  # the reason names a few ids, not all of them
    one_error(e.process(dumps(feature("big", "y", ids, [1.0] * (n - 1)))), "differ in length")
    one_error(e.process(dumps(feature("big", "y", [], []))), "at least one value")
    one_error(e.process(dumps({"v": 1, "type": "samples", "stream": "big", "samples": []})), "non-empty")
    assert snapshot(e) == before


# ----------------------------------------------------------------------------- features in parts


@FUZZ
@given(data=st.data())
def test_a_feature_in_parts_in_any_order_equals_the_feature_in_one_message(data):
    t = task(n=40, n_test=10, seed=data.draw(st.integers(0, 3), label="task seed"))
    name = data.draw(st.sampled_from(["a", "b", "cat"]), label="feature")
    kind = t["kinds"][name]
    pairs = list(zip(t["ids"], t["columns"][name], strict=True))
    pairs = data.draw(st.permutations(pairs), label="id order")
    k = data.draw(st.integers(1, 6), label="parts")
    cuts = sorted(data.draw(st.lists(st.integers(1, len(pairs) - 1), min_size=k - 1, max_size=k - 1, unique=True),
                            label="cuts"))
    bounds = [0, *cuts, len(pairs)]
    parts = [feature("s", name, [i for i, _ in pairs[lo:hi]], [v for _, v in pairs[lo:hi]], kind, p, k)
             for p, (lo, hi) in enumerate(itertools.pairwise(bounds))]
    order = data.draw(st.permutations(parts), label="part order")
    sequence = list(order)
    if k > 1:  # replayed parts (not the last one to come) go anywhere before the last part arrives
        for r in data.draw(st.lists(st.sampled_from(order[:-1]), max_size=3), label="replayed parts"):
            sequence.insert(data.draw(st.integers(0, len(sequence) - 1)), r)
    prefix = task_messages(t)[:2] if name != "a" else [task_messages(t)[0], task_messages(t)[2]]

    whole = engine(encoding="leaves")
    feed(whole, prefix)
    expected = whole.process(dumps(feature("s", name, t["ids"], t["columns"][name], kind)))

    split = engine(encoding="leaves")
    feed(split, prefix)
    outs = [split.process(dumps(m)) for m in sequence]
    assert all(o == [] for o in outs[:-1])
    assert untimed(outs[-1]) == untimed(expected)
    assert snapshot(split) == snapshot(whole)
    assert split.process(dumps(data.draw(st.sampled_from(parts), label="late replay"))) == []
    assert snapshot(split) == snapshot(whole)


def test_a_feature_with_a_missing_part_has_not_arrived(toy):
    e = engine()
    col = task_messages(toy)[1]
    feed(e, [task_messages(toy)[0], task_messages(toy)[2]])
    version = e.streams["s"].forest.model_version_
    out = feed(e, [feature("s", "a", col["ids"][:20], col["values"][:20], "numeric", 0, 3),
                   feature("s", "a", col["ids"][40:], col["values"][40:], "numeric", 2, 3)])
    st_ = e.streams["s"]
    assert out == [] and "a" not in st_.columns and sorted(st_.pending["a"]) == [0, 2]
    assert st_.forest.model_version_ == version
    out = e.process(dumps(feature("s", "a", col["ids"][20:40], col["values"][20:40], "numeric", 1, 3)))
    assert [r["feature"] for r in of_type(out, "feedback")] == ["a"] and "a" not in e.streams["s"].pending


@pytest.mark.parametrize(("second", "reason"), [
    (dict(parts=4), "disagrees with earlier parts"),
    (dict(kind="nominal"), "disagrees with earlier parts"),
    (dict(paired_null=True), "disagrees with earlier parts"),
    (dict(part=0, values=[9.0] * 20), "arrived twice with other values"),
    (dict(ids_from=0), "already came in another part"),
])
def test_parts_that_contradict_each_other_are_errors(toy, second, reason):
    e = engine()
    col = task_messages(toy)[1]
    feed(e, [task_messages(toy)[0], feature("s", "a", col["ids"][:20], col["values"][:20], "numeric", 0, 3)])
    before = snapshot(e)
    lo = second.pop("ids_from", 20)
    msg = feature("s", "a", col["ids"][lo:lo + 20], col["values"][lo:lo + 20], "numeric", 1, 3)
    msg.update(second)
    one_error(e.process(dumps(msg)), reason)
    assert snapshot(e) == before


# ----------------------------------------------------------------------------- fuzzing the handlers

IDS = [str(i) for i in range(16)]
FEATS = ["f0", "f1", "c0"]
num_value = st.one_of(st.none(), st.integers(-3, 3), st.floats(-5, 5, allow_nan=False, width=32))
odd_value = st.sampled_from(["u", True, False, 1e300])
label_value = st.sampled_from([0, 1, 0, 1, None, None, 2, "a", 1.0, True])
stream_name = st.sampled_from(["s"] * 10 + ["t", "nowhere"])


def value_for(name: str) -> st.SearchStrategy:
    if name.startswith("c"):
        return st.one_of(st.sampled_from(["a", "b", "c", None]), odd_value)
    return st.one_of(num_value, num_value, num_value, odd_value)


@st.composite
def sample_objects(draw):
    ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=6, unique=True))
    out = []
    for i in ids:
        s: dict = {"id": i}
        if draw(st.booleans()) or draw(st.booleans()):
            s["label"] = draw(label_value)
        if draw(st.integers(0, 2)) == 0:
            f = draw(st.sampled_from(["f0", "f0", "f0", *FEATS, "zz"]))
            s["x"] = {f: draw(value_for(f if f != "zz" else "f0"))}
        out.append(s)
    return out


@st.composite
def plausible_messages(draw):
    """Messages a confused producer could send: mostly well formed, often wrong for the state they meet; some
    truncated or with bytes that are not JSON spliced in."""
    k = draw(st.integers(0, 19))
    if k < 18:
        return draw(well_formed_messages(k))
    raw = dumps(draw(well_formed_messages(draw(st.integers(0, 17)))))
    if k < 19:
        return raw[: draw(st.integers(1, len(raw) - 1))]  # truncated
    at = draw(st.integers(0, len(raw)))
    return raw[:at] + draw(st.sampled_from([b"NaN", b"\xff", b"Infinity", b"}"])) + raw[at:]


@st.composite
def well_formed_messages(draw, k: int):
    stream = draw(stream_name)
    if k < 6:
        return samples(stream, draw(sample_objects()))
    if k < 13:
        name = draw(st.sampled_from(FEATS))
        pool = [*IDS, "ghost"] if draw(st.integers(0, 9)) == 0 else IDS
        ids = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=16, unique=True))
        values = [draw(value_for(name)) for _ in ids]
        kind = draw(st.sampled_from([None, "numeric", "nominal"]))
        if draw(st.booleans()):
            parts = draw(st.integers(1, 3))
            return feature(stream, name, ids, values, kind, draw(st.integers(0, parts - 1)), parts)
        return feature(stream, name, ids, values, kind)
    if k < 17:
        return label(stream, draw(st.sampled_from([*IDS, "ghost"])), draw(label_value))
    return control(stream, draw(st.sampled_from(["snapshot", "snapshot", "drop", "reboot"])))


def prelude() -> list[dict]:
    return [samples("s", [(i, int(i) % 2) for i in IDS[:12]] + [(i, None) for i in IDS[12:]]),
            feature("s", "f0", IDS, [float(int(i) % 3) for i in IDS])]


@FUZZ
@given(start=st.booleans(), msgs=st.lists(plausible_messages(), min_size=1, max_size=12))
def test_refused_messages_change_nothing_and_the_accepted_ones_alone_give_the_same_state(start, msgs):
    """Never an exception; a refused message gives exactly one error record with a reason and leaves the state as
    it was; replaying only the accepted messages into a fresh engine gives the same records and the same state."""
    msgs = (prelude() if start else []) + msgs
    e = engine(encoding="leaves")
    accepted = []
    for k, m in enumerate(msgs):
        raw = m if isinstance(m, bytes) else dumps(m)
        before = snapshot(e)
        out = e.process(raw, f"fuzz:{k}")
        for r in out:
            assert r["v"] == 1 and "key" in r
            orjson.dumps(r)
        errors = of_type(out, "error")
        if errors:
            err = one_error(out)
            assert err["reason"] and not err["reason"].startswith("internal error"), err["reason"]
            assert err["source"] == f"fuzz:{k}"
            assert snapshot(e) == before, f"refused ({err['reason']}) but the state changed"
        else:
            accepted.append((raw, out))
    again = engine(encoding="leaves")
    for raw, out in accepted:
        assert untimed(again.process(raw)) == untimed(out)
    assert snapshot(again) == snapshot(e)


BAD_FAMILIES = {
    "not json": lambda draw: draw(st.sampled_from([b"{", b"nul", b'{"v": 1,', b"\xff\xfe", b"[1, NaN]"])),
    "random json": lambda draw: dumps(draw(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=4),
                                                     st.lists(st.integers(-9, 9))))),
    "wrong version": lambda draw: dumps(dict(label("s", "0", 1), v=draw(st.sampled_from([0, 2, "1", None, True])))),
    "unknown type": lambda draw: dumps({"v": 1, "type": draw(st.sampled_from(["x", "Feature", "", "labels"])),
                                        "stream": "s"}),
    "unknown stream": lambda draw: dumps(draw(st.sampled_from([
        feature("nowhere", "f9", IDS[:2], [1.0, 2.0]), label("nowhere", "0", 1), control("nowhere", "snapshot")]))),
    "unknown id": lambda draw: dumps(draw(st.sampled_from([
        feature("s", "f9", ["0", "ghost"], [1.0, 2.0]), label("s", "ghost", 1)]))),
    "nan label": lambda draw: b'{"v":1,"type":"label","stream":"s","id":"12","label":' + draw(
        st.sampled_from([b"NaN", b"Infinity", b"-Infinity"])) + b"}",
    "mismatched ids and values": lambda draw: dumps(feature("s", "f9", IDS[: draw(st.integers(2, 16))], [1.0])),
    "other content for an arrived feature": lambda draw: dumps(feature("s", "f0", IDS, [7.0] * 16)),
    "other label for a training row": lambda draw: dumps(label("s", draw(st.sampled_from(IDS[:12])), 5)),
    "wrong types": lambda draw: dumps(draw(st.sampled_from([
        samples("s", [{"id": {"0": 1}}]), feature("s", 5, ["0"], [1.0]), dict(feature("s", "f9", [], []), ids="0"),
        feature("s", "f9", ["0"], [[1.0]]), label("s", ["0"], 1), control("s", 9),
        {"v": 1, "type": "samples", "stream": "s", "samples": "0,1"}]))),
}


@FUZZ
@given(data=st.data(), family=st.sampled_from(sorted(BAD_FAMILIES)),
       good=st.lists(st.sampled_from([0, 1, 2]), max_size=3))
def test_every_bad_message_gives_exactly_one_error_and_changes_nothing(data, family, good):
    e = engine(encoding="leaves")
    extra = [label("s", "12", 1), control("s", "snapshot"), samples("s", [("15", None), ("16", None)])]
    feed(e, prelude() + [extra[g] for g in good])
    before = snapshot(e)
    raw = BAD_FAMILIES[family](data.draw)
    out = e.process(raw, "bad:1")
    err = one_error(out)
    assert err["reason"] and err["source"] == "bad:1" and isinstance(err["key"], str)
    assert err["original"] == raw.decode("utf-8", errors="strict") if _utf8(raw) else err["original"].startswith(
        "base64:")
    assert snapshot(e) == before


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def good_sequence() -> list[dict]:
    """Valid messages only: samples, whole and split features, a delayed label, updates, a snapshot."""
    f1 = [float((int(i) * 7) % 5) for i in IDS]
    return [
        *prelude(),
        feature("s", "f1", IDS[8:], f1[8:], "numeric", 1, 2),
        samples("s", [{"id": "13", "x": {"f0": 2.5}}, ("16", None)]),
        feature("s", "f1", IDS[:8], f1[:8], "numeric", 0, 2),
        label("s", "12", 1),
        feature("s", "c0", IDS[:10], ["a", "b", None, "c", "a", "b", "a", "c", "b", "a"], "nominal"),
        control("s", "snapshot"),
        samples("t", [("x", 0), ("y", 1)]),
        feature("t", "f0", ["x", "y"], [0.0, 1.0]),
    ]


@functools.cache
def _good_alone() -> tuple[list, dict]:
    """The records and final state of the good sequence alone (the same for every example)."""
    clean = engine(encoding="leaves")
    return [untimed(clean.process(dumps(m))) for m in good_sequence()], snapshot(clean)


STATELESS_BAD = sorted(set(BAD_FAMILIES) - {"other content for an arrived feature", "other label for a training row"})


@FUZZ
@given(data=st.data())
def test_bad_messages_interleaved_anywhere_lose_no_accepted_data(data):
    good = [dumps(m) for m in good_sequence()]
    bad = [BAD_FAMILIES[data.draw(st.sampled_from(STATELESS_BAD))](data.draw)
           for _ in range(data.draw(st.integers(1, 8)))]
    mixed = list(good)
    for raw in bad:
        mixed.insert(data.draw(st.integers(0, len(mixed))), raw)

    expected, final = _good_alone()
    e = engine(encoding="leaves")
    got = []
    for raw in mixed:
        out = e.process(raw)
        if raw in bad:
            one_error(out)
        else:
            got.append(out)
    assert [untimed(o) for o in got] == expected
    assert snapshot(e) == final
