"""The JSON Schemas of the messages (``docs/schemas``) agree with the docs and with the engine, both ways.

* every schema is a valid draft 2020-12 schema, and every field it names is documented in ``docs/messages.md``;
* the examples of ``docs/messages.md`` validate (and the input examples are accepted by the decoder), its refused
  examples are refused by the decoder and rejected by the schemas;
* what ``streamforest produce`` emits validates against the input schemas, and what a real engine run emits
  (leaves and paths encodings, classification and regression, dead letters, the embedded runtime's files)
  validates against the output schemas;
* decoder and schemas agree on hand-picked and on generated messages, except for the documented cross-field
  rules a schema cannot express.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from streamforest.engine.core import Engine, EngineConfig
from streamforest.engine.messages import Refused, decode, parse
from streamforest.engine.produce import produce_messages
from streamforest.engine.runtime import OUTPUT_FILES, run

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = ROOT / "docs" / "schemas"
DOC = ROOT / "docs" / "messages.md"
DATA = ROOT / "streamforest" / "data"
INPUT_KINDS = ("samples", "feature", "label", "control")
OUTPUT_KINDS = ("prediction", "encoding", "feedback", "error")
KINDS = INPUT_KINDS + OUTPUT_KINDS
SMALL_FOREST = {"trees_per_generation": 4, "max_depth": 4, "random_state": 0}


def _load_schemas() -> dict[str, dict[str, Any]]:
    return {kind: json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text()) for kind in KINDS}


SCHEMAS = _load_schemas()
VALIDATORS = {kind: Draft202012Validator(schema) for kind, schema in SCHEMAS.items()}


def schema_errors(msg: Any, kind: str | None = None) -> list[str]:
    """Why ``msg`` does not validate against the schema of ``kind`` (its own ``type`` by default)."""
    kind = kind or msg["type"]
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATORS[kind].iter_errors(msg)]


def assert_valid(msg: dict[str, Any]) -> None:
    errors = schema_errors(msg)
    assert not errors, f"{msg['type']} record does not validate: {errors[:3]}\n{str(msg)[:500]}"


def refused(msg: Any) -> str | None:
    """The decoder's reason for refusing ``msg``, or ``None`` if it accepts it."""
    try:
        decode(orjson.dumps(msg))
    except Refused as exc:
        return str(exc)
    return None


# ------------------------------------------------------------------------------------------------ the schemas


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_valid_draft_2020_12(kind: str) -> None:
    schema = SCHEMAS[kind]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["type"] == {"const": kind}
    assert schema["properties"]["v"]["const"] == 1
    assert {"v", "type"} <= set(schema["required"])
    assert schema["title"] and schema["description"]


def test_no_stray_schema_files() -> None:
    assert sorted(p.name for p in SCHEMA_DIR.glob("*.json")) == sorted(f"{k}.schema.json" for k in KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_every_schema_field_is_documented(kind: str) -> None:
    doc = DOC.read_text()
    assert f"### {kind}" in doc
    for name in SCHEMAS[kind]["properties"]:
        assert f"`{name}`" in doc, f"field {name!r} of {kind} is not documented in docs/messages.md"


# ------------------------------------------------------------------------------------------------ the doc's examples

_BLOCK = re.compile(r"^```(jsonl|json)([^\n]*)\n(.*?)^```", re.S | re.M)


def doc_examples() -> list[tuple[str, dict[str, Any]]]:
    """``(tag, message)`` for every message in a ``json``/``jsonl`` block of the doc (tag: the info after it)."""
    out = []
    for lang, tag, body in _BLOCK.findall(DOC.read_text()):
        texts = [line for line in body.splitlines() if line.strip()] if lang == "jsonl" else [body]
        out += [(tag.strip(), json.loads(text)) for text in texts]
    return out


EXAMPLES = doc_examples()
ACCEPTED = [m for tag, m in EXAMPLES if tag == ""]
REFUSED = [m for tag, m in EXAMPLES if tag == "refused"]


def test_doc_has_an_example_of_every_kind() -> None:
    assert {m["type"] for m in ACCEPTED} == set(KINDS)
    assert len(REFUSED) >= 3
    assert {tag for tag, _ in EXAMPLES} <= {"", "refused"}


@pytest.mark.parametrize("msg", ACCEPTED, ids=lambda m: m["type"])
def test_doc_examples_validate(msg: dict[str, Any]) -> None:
    assert_valid(msg)
    if msg["type"] in INPUT_KINDS:
        assert refused(msg) is None


@pytest.mark.parametrize("msg", REFUSED, ids=lambda m: m["type"])
def test_doc_refused_examples_are_refused_by_both(msg: dict[str, Any]) -> None:
    assert refused(msg) is not None
    assert schema_errors(msg)


def test_doc_examples_of_outputs_hold_the_unwritten_rules() -> None:
    for msg in ACCEPTED:
        if msg["type"] in ("prediction", "encoding"):
            check_record_invariants(msg)


# ------------------------------------------------------------------------------------------------ inputs we produce


@pytest.mark.parametrize(("csv", "chunk", "order"), [("diabetes_37.csv", 0, "random"), ("ilpd_1480.csv", 200, "file")])
def test_produced_messages_validate(csv: str, chunk: int, order: str) -> None:
    msgs, _, _ = produce_messages(DATA / csv, "target", "s1", order=order, chunk=chunk)
    assert msgs[0]["type"] == "samples" and len(msgs) > 1
    for m in msgs:
        assert_valid(m)
        assert refused(m) is None
    if chunk:
        assert any(m.get("parts", 1) > 1 for m in msgs)


# ------------------------------------------------------------------------------------------------ outputs we produce


def check_record_invariants(r: dict[str, Any]) -> None:
    """What the output schemas cannot express."""
    if r["type"] in ("prediction", "encoding"):
        assert r["key"] == f"{r['stream']}/{r['id']}"
    if r["type"] == "feedback":
        assert r["key"] == r["stream"]
    if r["type"] == "prediction" and "proba" in r:
        assert sum(r["proba"].values()) == pytest.approx(1.0)
    if r["type"] == "encoding":
        idx = r["indices"]
        assert len(idx) == len(r["values"])
        assert all(a < b for a, b in itertools.pairwise(idx))
        assert not idx or (0 <= idx[0] and idx[-1] < r["dim"])


def engine_records(encoding: str, publish: str = "all") -> tuple[Engine, list[dict[str, Any]]]:
    """A real run: diabetes through produce -> Engine, then a delayed label, x values, a snapshot, bad lines."""
    msgs, test, _ = produce_messages(DATA / "diabetes_37.csv", "target", "diabetes", order="file")
    engine = Engine(EngineConfig(forest=SMALL_FOREST, encoding=encoding, publish=publish))
    out: list[dict[str, Any]] = []
    for k, m in enumerate(msgs):
        out += engine.process(orjson.dumps(m), f"messages.jsonl:{k + 1}")
    late = [str(i) for i in test[:3].tolist()]
    extra = [
        {"v": 1, "type": "label", "stream": "diabetes", "id": late[0], "label": 1},
        {"v": 1, "type": "samples", "stream": "diabetes",
         "samples": [{"id": late[1], "label": 0}, {"id": "new", "x": {"plas": 120, "mass": None}}]},
        {"v": 1, "type": "control", "stream": "diabetes", "op": "snapshot"},
    ]
    for m in extra:
        out += engine.process(orjson.dumps(m), "extra")
    for raw in (b'{"v":1,"type":"label","stream":"diabetes","id":"nope","label":1}', b'{"v": 1, "type": "sampl',
                b"\xff\xfe not utf-8", b'{"v":1,"type":"feature","stream":"diabetes","name":"plas","ids":["0"],'
                b'"values":[1]}', b'[1, 2]'):
        out += engine.process(raw, "bad")
    return engine, out


@pytest.fixture(scope="module", params=[("leaves", "all"), ("paths", "unlabelled")], ids=lambda p: p[0])
def run_records(request: pytest.FixtureRequest) -> tuple[str, Engine, list[dict[str, Any]]]:
    encoding, publish = request.param
    engine, out = engine_records(encoding, publish)
    return encoding, engine, out


def test_engine_records_validate(run_records: tuple[str, Engine, list[dict[str, Any]]]) -> None:
    encoding, engine, out = run_records
    assert {r["type"] for r in out} == set(OUTPUT_KINDS)
    per_version: dict[tuple[str, int], int] = {}
    for r in out:
        check_record_invariants(r)
        # Validating is slow (about 1 ms a record): every feedback and error, 25 per-sample records per version.
        group = (r["type"], r.get("model_version", 0))
        per_version[group] = per_version.get(group, 0) + 1
        if r["type"] in ("feedback", "error") or per_version[group] <= 25:
            assert_valid(r)
    assert sum(r["type"] == "error" for r in out) == 5
    assert any(r["original"].startswith("base64:") for r in out if r["type"] == "error")
    n_trees = engine.streams["diabetes"].forest.n_trees_
    last = max(r["model_version"] for r in out if r["type"] == "encoding")
    sizes = [len(r["indices"]) for r in out if r["type"] == "encoding" and r["model_version"] == last]
    if encoding == "leaves":
        assert max(sizes) <= n_trees  # one entry per tree (fewer on collisions)
    else:
        assert min(sizes) > n_trees  # root and leaf at least, in every tree of depth >= 1


def test_encoding_and_prediction_schemas_reject_tampered_records(
        run_records: tuple[str, Engine, list[dict[str, Any]]]) -> None:
    _, _, out = run_records
    pred = next(r for r in out if r["type"] == "prediction")
    enc = next(r for r in out if r["type"] == "encoding")
    fb = next(r for r in out if r["type"] == "feedback")
    assert schema_errors({**pred, "value": 1.0})  # proba and value: never both
    assert schema_errors({k: v for k, v in pred.items() if k != "proba"})
    assert schema_errors({**enc, "indices": [3, 3]})
    assert schema_errors({**enc, "model_version": 0})
    assert schema_errors({**fb, "oob_metric": "accuracy"})
    assert schema_errors({**fb, "surprise": 1})  # outputs are closed: new fields need a schema change


def _synthetic_stream(task: str, n_classes: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    n = 200
    X = rng.normal(size=(n, 3))
    y = X[:, 0] * 2 + X[:, 1] if task == "regression" else np.digitize(X[:, 0], [-0.5, 0.5][: n_classes - 1])
    labels = [None if i >= 150 else (float(y[i]) if task == "regression" else f"c{int(y[i])}") for i in range(n)]
    ids = [str(i) for i in range(n)]
    msgs = [{"v": 1, "type": "samples", "stream": task, "samples": [{"id": i, "label": lab}
                                                                     for i, lab in zip(ids, labels, strict=True)]}]
    msgs += [{"v": 1, "type": "feature", "stream": task, "name": f"x{j}", "ids": ids, "values": X[:, j].tolist()}
             for j in range(3)]
    return msgs


@pytest.mark.parametrize("task", ["regression", "multiclass"])
def test_regression_and_multiclass_records_validate(task: str) -> None:
    forest = {**SMALL_FOREST, "task": "regression"} if task == "regression" else SMALL_FOREST
    engine = Engine(EngineConfig(forest=forest, encoding="leaves"))
    out = [r for m in _synthetic_stream(task) for r in engine.process(orjson.dumps(m))]
    for r in out:
        assert_valid(r)
        check_record_invariants(r)
    preds = [r for r in out if r["type"] == "prediction"]
    assert preds and all(("value" in r) == (task == "regression") for r in preds)
    metric = {r["oob_metric"] for r in out if r["type"] == "feedback"}
    assert metric == ({"r2"} if task == "regression" else {"log_loss"})
    if task == "multiclass":
        assert all(len(r["proba"]) == 3 for r in preds)


def test_embedded_runtime_files_validate(tmp_path: Path) -> None:
    msgs, _, _ = produce_messages(DATA / "blood-transfusion-service-center_1464.csv", "target", "blood", chunk=300)
    lines = [orjson.dumps(m) for m in msgs]
    lines.insert(2, b'{"v": 1, "type": "feature", "stream": "blood", "name": "x", "ids": [], "values": []}')
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    run(str(tmp_path / "in.jsonl"), str(tmp_path / "out"), EngineConfig(forest=SMALL_FOREST))
    seen = set()
    for kind, name in OUTPUT_FILES.items():
        for line in (tmp_path / "out" / name).read_bytes().splitlines():
            r = orjson.loads(line)
            assert r["type"] == kind
            assert_valid(r)
            seen.add(kind)
    assert seen == set(OUTPUT_KINDS)
    err = orjson.loads((tmp_path / "out" / "errors.jsonl").read_bytes().splitlines()[0])
    assert err["source"].endswith("in.jsonl:3")


# ------------------------------------------------------------------------------------------------ decoder vs schemas

BASE = {
    "samples": {"v": 1, "type": "samples", "stream": "s", "samples": [{"id": "a", "label": 1, "x": {"f": 1.5}}]},
    "feature": {"v": 1, "type": "feature", "stream": "s", "name": "f", "ids": ["a", "b"], "values": [1, None]},
    "label": {"v": 1, "type": "label", "stream": "s", "id": "a", "label": "yes"},
    "control": {"v": 1, "type": "control", "stream": "s", "op": "snapshot"},
}


def variant(message_type: str, /, **changes: Any) -> dict[str, Any]:
    """BASE[message_type] with fields changed; a value of ``...`` removes the field."""
    msg = json.loads(json.dumps(BASE[message_type]))
    for k, v in changes.items():
        if v is ...:
            msg.pop(k, None)
        else:
            msg[k] = v
    return msg


BOTH_REFUSE = [
    variant("label", v=2),
    variant("label", v=...),
    variant("label", v=True),
    variant("control", stream=...),
    variant("control", stream=""),
    variant("control", stream="s" * 257),
    variant("control", stream=5),
    variant("control", op="reset"),
    variant("control", op=...),
    variant("control", args=[]),
    variant("samples", samples=[]),
    variant("samples", samples={"id": "a"}),
    variant("samples", samples=["a"]),
    variant("samples", samples=[{"label": 1}]),
    variant("samples", samples=[{"id": True}]),
    variant("samples", samples=[{"id": ""}]),
    variant("samples", samples=[{"id": 1.5}]),
    variant("samples", samples=[{"id": "a", "x": None}]),
    variant("samples", samples=[{"id": "a", "x": {"f": [1]}}]),
    variant("samples", samples=[{"id": "a", "x": {"": 1}}]),
    variant("samples", samples=[{"id": "a", "label": {"c": 1}}]),
    variant("samples", samples=[{"id": "a", "label": [1]}]),
    variant("feature", name=""),
    variant("feature", name=None),
    variant("feature", ids=..., values=...),
    variant("feature", ids=[], values=[]),
    variant("feature", ids="a", values=1),
    variant("feature", ids=["a", "a"], values=[1, 2]),
    variant("feature", values=[1, {"x": 1}]),
    variant("feature", kind="text"),
    variant("feature", kind="numeric", values=["low", 2]),
    variant("feature", kind="numeric", values=[True, 2]),
    variant("feature", part=-1, parts=2),
    variant("feature", part=0, parts=0),
    variant("feature", part=0, parts=100_001),
    variant("feature", part="0", parts=2),
    variant("feature", part=0, parts=None),
    variant("label", label=None),
    variant("label", label=...),
    variant("label", id=...),
    variant("label", id=False),
    variant("label", id="x" * 257),
]

BOTH_ACCEPT = [
    BASE["samples"],
    BASE["feature"],
    BASE["label"],
    BASE["control"],
    variant("label", v=1.0),
    variant("label", id=7),
    variant("label", id=-7),
    variant("label", label=True),
    variant("label", label=2.5),
    variant("label", label=""),
    variant("label", extra={"anything": [1]}),  # unknown fields are ignored
    variant("control", op="drop", args={"force": True}),
    variant("samples", samples=[{"id": 1}, {"id": "2", "label": None}, {"id": "3", "x": {}}]),
    variant("samples", samples=[{"id": "a", "x": {"f": None, "g": "red", "h": True, "i": -3}}]),
    variant("feature", kind=None),
    variant("feature", kind="nominal", values=[1, "b"]),
    variant("feature", kind="numeric", values=[1, 2.5]),
    variant("feature", values=["x", True]),
    variant("feature", part=3, parts=4),
    variant("feature", part=0, parts=100_000),
    variant("feature", ids=[1, 2]),
    variant("feature", name="n" * 256),
]

# Cross-field rules the schemas cannot express (docs/messages.md, "What the schemas cannot say"): schema-valid,
# refused by the decoder.
SCHEMA_ONLY_ACCEPTS = [
    (variant("feature", ids=["a", "b", "c"]), "differ in length"),
    (variant("feature", part=2, parts=2), "part must be in 0..parts-1"),
    (variant("feature", ids=[1, "1"]), "ids repeat"),
    (variant("samples", samples=[{"id": "a"}, {"id": "a"}]), "duplicate id"),
    (variant("label", id=3.0), "must be a string (or an integer), got float"),
    (variant("feature", part=1.0, parts=2), "part must be an integer"),
]


@pytest.mark.parametrize("msg", BOTH_REFUSE, ids=lambda m: m.get("type", "?"))
def test_decoder_and_schema_both_refuse(msg: dict[str, Any]) -> None:
    assert refused(msg) is not None, "the decoder accepts it"
    assert schema_errors(msg, msg["type"]), f"the schema accepts what the decoder refuses ({refused(msg)})"


@pytest.mark.parametrize("msg", BOTH_ACCEPT, ids=lambda m: m["type"])
def test_decoder_and_schema_both_accept(msg: dict[str, Any]) -> None:
    assert refused(msg) is None
    assert not schema_errors(msg)


@pytest.mark.parametrize(("msg", "reason"), SCHEMA_ONLY_ACCEPTS, ids=lambda x: x if isinstance(x, str) else "")
def test_cross_field_rules_are_the_decoders(msg: dict[str, Any], reason: str) -> None:
    assert not schema_errors(msg)
    assert reason in (refused(msg) or "")


@pytest.mark.parametrize("msg", [{"v": 1, "type": "sample", "stream": "s", "samples": [{"id": "a"}]},
                                 {"v": 1, "type": "prediction", "stream": "s", "id": "a"}, [BASE["label"]], "label"])
def test_no_input_schema_takes_what_is_no_input(msg: Any) -> None:
    assert refused(msg) is not None
    assert all(schema_errors(msg, kind) for kind in INPUT_KINDS)


@pytest.mark.parametrize("msg", BOTH_ACCEPT, ids=lambda m: m["type"])
def test_an_input_matches_exactly_one_input_schema(msg: dict[str, Any]) -> None:
    assert [kind for kind in INPUT_KINDS if not schema_errors(msg, kind)] == [msg["type"]]


# Generated messages: mostly valid fields, sometimes junk or missing. Whatever the decoder accepts, the schema
# accepts; whatever the schema accepts, the decoder accepts unless a cross-field rule (above) refuses it.
_junk = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-3, 3), st.sampled_from(["", "x" * 300]),
                  st.lists(st.integers(0, 2), max_size=2), st.dictionaries(st.sampled_from(["a", ""]), st.integers(),
                                                                           max_size=1))
_good_id = st.one_of(st.sampled_from(["a", "b", "c", "d"]), st.integers(-2, 5))
_id = st.one_of(_good_id, _good_id, _good_id, st.sampled_from(["", "x" * 257]), st.floats(0, 3), st.booleans())
_good_value = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False),
                        st.sampled_from(["", "red"]))
_value = st.one_of(_good_value, _good_value, _good_value, st.lists(st.integers(), max_size=1),
                   st.dictionaries(st.just("k"), st.integers(), max_size=1))
_label = st.one_of(st.none(), st.booleans(), st.integers(0, 2), st.floats(0, 2), st.sampled_from(["yes", ""]),
                   st.lists(st.integers(), max_size=1), st.dictionaries(st.just("k"), st.integers(), max_size=1))
_x = st.one_of(st.dictionaries(st.sampled_from(["f", "g"]), _value, max_size=2),
               st.dictionaries(st.sampled_from(["f", ""]), _value, max_size=2), _junk)
_sample = st.fixed_dictionaries({"id": _id}, optional={"label": _label, "x": _x})


def _coin(n: int) -> st.SearchStrategy[int]:
    """0 .. n-1 (hypothesis favours 0: make 0 the common case)."""
    return st.sampled_from(range(n))


@st.composite
def _column(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    n = draw(st.sampled_from([1, 2, 3, 4, 0]))
    ids = draw(st.lists(_id, min_size=n, max_size=n))
    values = draw(st.lists(_value, min_size=n, max_size=n))
    if draw(_coin(6)) == 5:  # sometimes of another length
        values = values[:-1] if values else [1]
    return ids, values


def _often(draw: st.DrawFn, good: st.SearchStrategy) -> Any:
    """A value of ``good`` 9 times out of 10, junk otherwise."""
    return draw(_junk) if draw(_coin(10)) == 9 else draw(good)


@st.composite
def near_messages(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(INPUT_KINDS))
    version = draw(_coin(10))
    msg: dict[str, Any] = {"v": draw(st.sampled_from([2, True, None, "1"])) if version == 9 else 1.0 if version == 8
                           else 1, "type": kind, "stream": _often(draw, st.sampled_from(["s", "t"]))}
    fields: dict[str, Any] = {}
    if kind == "samples":
        fields["samples"] = _often(draw, st.lists(_sample, min_size=int(draw(_coin(8)) < 7), max_size=3))
    elif kind == "feature":
        ids, values = draw(_column())
        fields = {"name": _often(draw, st.sampled_from(["f", "g"])), "ids": _often(draw, st.just(ids)),
                  "values": _often(draw, st.just(values)),
                  "kind": _often(draw, st.sampled_from(["numeric", "nominal", None]))}
        if draw(st.booleans()):
            parts = _often(draw, st.integers(0, 4))
            top = parts if type(parts) is int and parts >= 0 else 3
            fields.update(part=_often(draw, st.integers(-1, top)), parts=parts)
    elif kind == "label":
        fields = {"id": draw(_id), "label": draw(_label)}
    else:
        fields = {"op": _often(draw, st.sampled_from(["snapshot", "drop"])),
                  "args": _often(draw, st.dictionaries(st.just("n"), st.integers(), max_size=1))}
    for name, value in fields.items():
        if draw(_coin(20)) < 19:  # a field is sometimes missing
            msg[name] = value
    return msg


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_messages())
def test_decoder_and_schema_agree_on_generated_messages(msg: dict[str, Any]) -> None:
    try:
        parse(msg)
        reason = None
    except Refused as exc:
        reason = str(exc)
    errors = schema_errors(msg)
    if reason is None:
        assert not errors, f"the decoder accepts what the schema rejects: {errors}"
    elif not errors:
        cross_field = ("differ in length", "part must be in 0..parts-1", "ids repeat", "duplicate id",
                       "got float", "must be an integer")
        assert any(c in reason for c in cross_field), f"the schema accepts what the decoder refuses: {reason}"
