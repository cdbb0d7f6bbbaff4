"""Decoding and validation of input messages (version 1): what is accepted, what is refused and why.

``decode`` must turn any bytes into a message or a :class:`Refused` with a reason, never anything else.
"""

from __future__ import annotations

import base64
import math
import re

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamforest.engine import records
from streamforest.engine.messages import (
    ControlMessage,
    FeatureMessage,
    LabelMessage,
    Refused,
    Sample,
    SamplesMessage,
    decode,
    parse,
)

from .support import control, dumps, engine, feature, label, samples

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GOOD = [
    samples("s", [{"id": "0", "label": 1, "x": {"a": 1.5, "c": "red", "m": None}}, {"id": 7, "label": None}]),
    feature("s", "a", ["0", "1", "2"], [1.5, None, -3], "numeric"),
    feature("s", "c", ["0", "1"], ["red", True], "nominal", part=1, parts=3),
    feature("s", "n", [5, "6"], [1, 2]),
    label("s", "0", "yes"),
    label("s", 3, 1.0),
    control("s", "snapshot"),
    {"v": 1, "type": "control", "stream": "s", "op": "drop", "args": {"why": "test"}},
]


# ----------------------------------------------------------------------------- accepted messages


def test_samples_message_decodes_to_typed_samples():
    m = decode(dumps(GOOD[0]))
    assert m == SamplesMessage("s", (Sample("0", 1, {"a": 1.5, "c": "red", "m": None}), Sample("7", None, {})))


def test_feature_message_decodes_with_ids_as_strings_and_default_parts():
    m = decode(dumps(GOOD[1]))
    assert m == FeatureMessage("s", "a", ("0", "1", "2"), (1.5, None, -3), "numeric", 0, 1)
    m = decode(dumps(GOOD[3]))
    assert m.ids == ("5", "6") and m.kind is None and (m.part, m.parts) == (0, 1)
    m = decode(dumps(GOOD[2]))
    assert (m.part, m.parts, m.kind, m.values) == (1, 3, "nominal", ("red", True))


def test_an_integer_beyond_a_float_is_refused_where_python_objects_come_in():
    # JSON text cannot carry one (orjson refuses it), a decoded object handed to parse() can; a numeric column is
    # float64, so it would fail only when the column is made.
    for values in ([10**400, 1.0], [10**400, None], [2.5, -(10**309)]):
        with pytest.raises(Refused, match=r"values\[\d\] is beyond the range of a float"):
            parse({**GOOD[1], "ids": ["0", "1"], "values": values})
    with pytest.raises(Refused, match=r"x\['f'\] is beyond the range of a float"):
        parse({"v": 1, "type": "samples", "stream": "s", "samples": [{"id": "a", "x": {"f": 10**400}}]})
    assert parse({**GOOD[1], "ids": ["0", "1"], "values": [2**80, None]}).values == (2**80, None)


def test_label_and_control_messages_decode():
    assert decode(dumps(GOOD[4])) == LabelMessage("s", "0", "yes")
    m = decode(dumps(GOOD[5]))
    assert m == LabelMessage("s", "3", 1) and type(m.label) is int  # 1.0 is the class 1
    assert decode(dumps(GOOD[6])) == ControlMessage("s", "snapshot", {})
    assert decode(dumps(GOOD[7])) == ControlMessage("s", "drop", {"why": "test"})


def test_decode_accepts_str_and_bytes_alike():
    for m in GOOD:
        assert decode(dumps(m)) == decode(dumps(m).decode())


# ----------------------------------------------------------------------------- refused messages, one per field

BASE = {
    "samples": samples("s", [("0", 1)]),
    "feature": feature("s", "a", ["0", "1"], [1.0, 2.0]),
    "label": label("s", "0", 1),
    "control": control("s", "snapshot"),
}


def _with(base: str, /, **changes) -> dict:
    msg = dict(BASE[base])
    for k, v in changes.items():
        if v is _DROP:
            msg.pop(k)
        else:
            msg[k] = v
    return msg


_DROP = object()

REFUSED = [
    # envelope
    ("v missing", _with("label", v=_DROP), "version"),
    ("v 2", _with("label", v=2), "version"),
    ("v string", _with("label", v="1"), "version"),
    ("v true", _with("label", v=True), "version"),
    ("v null", _with("label", v=None), "version"),
    ("type missing", _with("label", type=_DROP), "unknown message type"),
    ("type unknown", _with("label", type="teleport"), "unknown message type 'teleport'"),
    ("type number", _with("label", type=3), "unknown message type"),
    ("stream missing", _with("label", stream=_DROP), "missing field 'stream'"),
    ("stream empty", _with("label", stream=""), "stream must be a non-empty string"),
    ("stream number", _with("feature", stream=5), "stream must be a non-empty string"),
    ("stream list", _with("samples", stream=["s"]), "stream must be a non-empty string"),
    ("stream too long", _with("control", stream="s" * 300), "longer than"),
    # samples
    ("samples missing", _with("samples", samples=_DROP), "missing field 'samples'"),
    ("samples empty", _with("samples", samples=[]), "non-empty list"),
    ("samples object", _with("samples", samples={"id": "0"}), "non-empty list"),
    ("sample not object", _with("samples", samples=[1]), "samples[0]"),
    ("sample id missing", _with("samples", samples=[{"label": 1}]), "missing field 'id'"),
    ("sample id float", _with("samples", samples=[{"id": 1.5}]), "samples[0].id must be a string"),
    ("sample id bool", _with("samples", samples=[{"id": True}]), "samples[0].id must be a string"),
    ("sample id null", _with("samples", samples=[{"id": None}]), "samples[0].id must be a string"),
    ("sample id empty", _with("samples", samples=[{"id": ""}]), "non-empty string"),
    ("sample id too long", _with("samples", samples=[{"id": "i" * 300}]), "longer than"),
    ("sample id twice", _with("samples", samples=[{"id": "a"}, {"id": "a"}]), "duplicate id 'a'"),
    ("sample id twice int/str", _with("samples", samples=[{"id": 1}, {"id": "1"}]), "duplicate id '1'"),
    ("sample label list", _with("samples", samples=[{"id": "a", "label": [1]}]), "samples[0].label"),
    ("sample label object", _with("samples", samples=[{"id": "a", "label": {}}]), "samples[0].label"),
    ("sample x list", _with("samples", samples=[{"id": "a", "x": [1]}]), "x must be an object"),
    ("sample x value list", _with("samples", samples=[{"id": "a", "x": {"f": [1]}}]), "samples[0].x['f']"),
    ("sample x value object", _with("samples", samples=[{"id": "a", "x": {"f": {}}}]), "samples[0].x['f']"),
    ("sample x empty key", _with("samples", samples=[{"id": "a", "x": {"": 1}}]), "x key"),
    # feature
    ("name missing", _with("feature", name=_DROP), "missing field 'name'"),
    ("name number", _with("feature", name=5), "name must be a non-empty string"),
    ("name empty", _with("feature", name=""), "name must be a non-empty string"),
    ("ids missing", _with("feature", ids=_DROP), "missing field 'ids'"),
    ("values missing", _with("feature", values=_DROP), "missing field 'values'"),
    ("ids string", _with("feature", ids="0,1"), "ids and values must be lists"),
    ("values object", _with("feature", values={"0": 1}), "ids and values must be lists"),
    ("lengths differ", _with("feature", values=[1.0]), "differ in length (2 ids, 1 values)"),
    ("empty column", _with("feature", ids=[], values=[]), "at least one value"),
    ("ids repeat", _with("feature", ids=["0", "0"]), "ids repeat"),
    ("ids repeat int/str", _with("feature", ids=[0, "0"]), "ids repeat"),
    ("id null", _with("feature", ids=["0", None]), "ids[] must be a string"),
    ("id float", _with("feature", ids=["0", 1.5]), "ids[] must be a string"),
    ("id list", _with("feature", ids=["0", ["1"]]), "ids[] must be a string"),
    ("value list", _with("feature", values=[1.0, [2.0]]), "values[1]"),
    ("value object", _with("feature", values=[{}, 2.0]), "values[0]"),
    ("kind unknown", _with("feature", kind="ordinal"), "kind must be one of"),
    ("kind number", _with("feature", kind=1), "kind must be one of"),
    ("paired_null not a boolean", _with("feature", paired_null=1), "paired_null must be true or false"),
    ("numeric with text", _with("feature", kind="numeric", values=[1.0, "x"]), "non-numeric"),
    ("numeric with bool", _with("feature", kind="numeric", values=[1.0, True]), "non-numeric"),
    ("part string", _with("feature", part="0", parts=2), "part must be an integer"),
    ("part float", _with("feature", part=0.0, parts=2), "part must be an integer"),
    ("part bool", _with("feature", part=False, parts=2), "part must be an integer"),
    ("parts null", _with("feature", part=0, parts=None), "parts must be an integer"),
    ("part beyond parts", _with("feature", part=2, parts=2), "part must be in 0..parts-1"),
    ("part negative", _with("feature", part=-1, parts=2), "part must be in 0..parts-1"),
    ("parts zero", _with("feature", part=0, parts=0), "part must be in 0..parts-1"),
    ("parts too many", _with("feature", part=0, parts=100_001), "at most 100000"),
    # label
    ("label id missing", _with("label", id=_DROP), "missing field 'id'"),
    ("label missing", _with("label", label=_DROP), "missing field 'label'"),
    ("label null", _with("label", label=None), "must not be null"),
    ("label list", _with("label", label=[1]), "label must be a number"),
    ("label object", _with("label", label={"c": 1}), "label must be a number"),
    ("label id bool", _with("label", id=False), "id must be a string"),
    ("label id object", _with("label", id={}), "id must be a string"),
    # control
    ("op missing", _with("control", op=_DROP), "missing field 'op'"),
    ("op unknown", _with("control", op="reboot"), "op must be one of"),
    ("op number", _with("control", op=1), "op must be one of"),
    ("args list", _with("control", args=[]), "args must be an object"),
]


@pytest.mark.parametrize(("case", "msg", "reason"), REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_with_a_reason_naming_the_problem(case, msg, reason):
    with pytest.raises(Refused) as info:
        decode(dumps(msg))
    assert reason in str(info.value), f"{case}: {info.value}"


NOT_JSON = [
    b"",
    b"{",
    b'{"v": 1, "type": "label", "stream": "s", "id": "0", "label": 1',  # truncated
    b'{"v": 1, "type": "label", "stream": "s", "id": "0", "label": NaN}',
    b'{"v": 1, "type": "label", "stream": "s", "id": "0", "label": Infinity}',
    b'{"v": 1, "type": "feature", "stream": "s", "name": "a", "ids": ["0"], "values": [-Infinity]}',
    b'{"v": 1, "type": "feature", "stream": "s", "name": "a", "ids": ["0"], "values": [1e999]}',
    b'{"v": 1, "type": "label", "stream": "s\xff", "id": "0", "label": 1}',  # invalid UTF-8
    b'{"v": 1, "type": "label", "stream": "s", "id": "0", "label": 1} trailing',
    b"{'v': 1}",
    b"[" * 5000 + b"]" * 5000,  # nesting beyond the parser's limit
]


@pytest.mark.parametrize("raw", NOT_JSON, ids=range(len(NOT_JSON)))
def test_text_that_is_not_json_is_refused(raw):
    with pytest.raises(Refused, match="not valid JSON"):
        decode(raw)


@pytest.mark.parametrize("value", [[], [1], 1, "s", None, True, 1.5])
def test_a_message_must_be_an_object(value):
    with pytest.raises(Refused, match="must be a JSON object"):
        decode(dumps(value))


# ----------------------------------------------------------------------------- fuzzing the decoder

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=5),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=12,
)
ids_like = st.one_of(st.text(min_size=0, max_size=3), st.integers(-3, 3), json_values)


def _message_like() -> st.SearchStrategy[dict]:
    """Objects shaped like messages whose every field may hold a value of the right or of a wrong type."""
    field = st.one_of(json_values, st.sampled_from([1, "s", "0", 0, 1.0, None, "numeric", "snapshot"]))
    listy = st.one_of(st.lists(ids_like, max_size=4), json_values)
    sample = st.one_of(
        st.fixed_dictionaries({"id": ids_like}, optional={"label": field, "x": st.one_of(
            st.dictionaries(st.text(max_size=3), field, max_size=3), json_values)}),
        json_values,
    )
    return st.fixed_dictionaries(
        {"v": st.one_of(st.just(1), json_values), "type": st.sampled_from(["samples", "feature", "label", "control"])},
        optional={
            "stream": st.one_of(st.just("s"), field), "samples": st.one_of(st.lists(sample, max_size=3), json_values),
            "name": field, "ids": listy, "values": listy, "kind": field, "part": field, "parts": field,
            "id": ids_like, "label": field, "op": field, "args": field,
        },
    )


def _check_accepted(m) -> None:
    """What an accepted message promises its handlers."""
    assert isinstance(m.stream, str) and m.stream
    if isinstance(m, SamplesMessage):
        assert m.samples and len({s.id for s in m.samples}) == len(m.samples)
        for s in m.samples:
            assert isinstance(s.id, str) and s.id and isinstance(s.x, dict)
            assert s.label is None or isinstance(s.label, (bool, int, float, str))
            for v in s.x.values():
                assert v is None or isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v))
    elif isinstance(m, FeatureMessage):
        assert isinstance(m.name, str) and m.name
        assert len(m.ids) == len(m.values) > 0 and len(set(m.ids)) == len(m.ids)
        assert all(isinstance(i, str) and i for i in m.ids)
        assert all(v is None or isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v))
                   for v in m.values)
        assert m.kind in (None, "numeric", "nominal")
        assert type(m.part) is int and type(m.parts) is int and 0 <= m.part < m.parts
    elif isinstance(m, LabelMessage):
        assert isinstance(m.id, str) and m.id and m.label is not None
        assert not (isinstance(m.label, float) and not math.isfinite(m.label))
    else:
        assert m.op in ("snapshot", "drop") and isinstance(m.args, dict)


@FUZZ
@given(raw=st.binary(max_size=300))
def test_any_bytes_decode_or_are_refused(raw):
    try:
        m = decode(raw)
    except Refused as exc:
        assert str(exc)
    else:
        _check_accepted(m)


@FUZZ
@given(obj=json_values)
def test_any_json_value_decodes_or_is_refused(obj):
    try:
        m = parse(obj)
    except Refused as exc:
        assert str(exc)
    else:
        _check_accepted(m)


@FUZZ
@given(obj=_message_like())
def test_wrong_types_in_every_field_are_refused_never_crash(obj):
    raw = orjson.dumps(obj)
    try:
        m = decode(raw)
    except Refused as exc:
        assert str(exc)
    else:
        _check_accepted(m)


_NUMBER = re.compile(rb"(?<=[:\[,])-?\d+(\.\d+)?(?=[,\]}])")


@FUZZ
@given(msg=st.sampled_from(GOOD + list(BASE.values())), data=st.data())
def test_nan_and_infinity_literals_anywhere_are_refused(msg, data):
    raw = dumps(msg)
    spots = list(_NUMBER.finditer(raw))
    spot = data.draw(st.sampled_from(spots))
    literal = data.draw(st.sampled_from([b"NaN", b"-NaN", b"nan", b"Infinity", b"-Infinity", b"inf", b"1e400"]))
    bad = raw[: spot.start()] + literal + raw[spot.end():]
    with pytest.raises(Refused, match="not valid JSON"):
        decode(bad)


@FUZZ
@given(msg=st.sampled_from(GOOD), data=st.data())
def test_invalid_utf8_anywhere_is_refused_and_kept_as_base64(msg, data):
    raw = dumps(msg)
    at = data.draw(st.integers(0, len(raw)))
    junk = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xf8\x88\x80\x80\x80"]))
    bad = raw[:at] + junk + raw[at:]
    with pytest.raises(Refused):
        decode(bad)
    out = engine().process(bad, "here:1")
    assert len(out) == 1 and out[0]["type"] == "error"
    original = out[0]["original"]
    assert original.startswith("base64:") and base64.b64decode(original.removeprefix("base64:")) == bad
    orjson.dumps(out[0])  # still publishable


def test_dead_letter_keeps_the_original_text_and_where_it_came_from():
    raw = b'{"v": 1, "type": "teleport", "stream": "s"}'
    rec = records.error(raw, "input.jsonl:3", "why")
    assert rec == {"v": 1, "type": "error", "key": "", "source": "input.jsonl:3", "reason": "why",
                   "original": raw.decode(), "original_bytes": len(raw), "truncated": False}


def test_dead_letter_of_a_str_with_a_lone_surrogate_is_still_publishable():
    """``Engine.process`` takes ``str`` too; its dead letter must serialize like any other record."""
    out = engine().process('{"v": 1, "type": "label", "stream": "\ud800", "id": "0", "label": 1}', "api")
    assert len(out) == 1 and out[0]["type"] == "error"
    orjson.dumps(out[0])
