"""Input messages, version 1: decoding and validation with reasons a producer can act on.

Every message is one JSON object with ``"v": 1``, a ``"type"`` and a ``"stream"``. :func:`decode` turns raw bytes
into a typed message or raises :class:`Refused` with the reason; it never raises anything else (the engine turns a
refusal into a dead-letter ``error`` record). The schemas are documented in ``docs/messages.md``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from streamforest.inputs import is_int

VERSION = 1
KINDS = ("numeric", "nominal")
CONTROL_OPS = ("snapshot", "drop", "start")
MAX_ID_LENGTH = 256
MAX_NAME_LENGTH = 256
#: Longest string label (a class name) and string feature value (a category), in characters.
MAX_LABEL_LENGTH = 256
MAX_CATEGORY_LENGTH = 1024
#: The types of a feature value that a numeric column holds as it is (null: missing).
NUMBER_TYPES = frozenset({int, float, type(None)})


class Refused(ValueError):
    """A message that cannot be accepted; ``str(exc)`` is the reason."""


@dataclass(frozen=True)
class Sample:
    id: str
    label: Any  # None = unlabelled
    x: dict[str, Any]


@dataclass(frozen=True)
class SamplesMessage:
    stream: str
    samples: tuple[Sample, ...]


@dataclass(frozen=True)
class FeatureMessage:
    stream: str
    name: str
    ids: tuple[str, ...]
    values: tuple[Any, ...]
    kind: str | None
    part: int = 0
    parts: int = 1
    paired_null: bool = False


@dataclass(frozen=True)
class LabelMessage:
    stream: str
    id: str
    label: Any


@dataclass(frozen=True)
class ControlMessage:
    stream: str
    op: str
    args: dict[str, Any] = field(default_factory=dict)


Message = SamplesMessage | FeatureMessage | LabelMessage | ControlMessage


def _require(obj: dict, key: str, where: str = "") -> Any:
    if key not in obj:
        raise Refused(f"{where}missing field {key!r}")
    return obj[key]


def _string(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value:
        raise Refused(f"{what} must be a non-empty string, got {type(value).__name__}")
    if len(value) > limit:
        raise Refused(f"{what} is longer than {limit} characters")
    return value


def _sample_id(value: Any, what: str = "id") -> str:
    """Sample ids are strings; integers are accepted and read as their decimal string."""
    if not (isinstance(value, str) or is_int(value, numpy=False)):
        raise Refused(f"{what} must be a string (or an integer), got {type(value).__name__}")
    return _string(str(value), what, MAX_ID_LENGTH)


def _label(value: Any, what: str = "label") -> Any:
    if value is None:
        return None
    if isinstance(value, str) and len(value) > MAX_LABEL_LENGTH:
        raise Refused(f"{what} is longer than {MAX_LABEL_LENGTH} characters")
    if isinstance(value, bool) or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Refused(f"{what} must be finite")
        return int(value) if value.is_integer() else value
    raise Refused(f"{what} must be a number, a string or null, got {type(value).__name__}")


def _value(value: Any, what: str) -> Any:
    """A feature value: a finite number, a string (a category), a boolean, or null (missing)."""
    # The common cases first: a samples message carries a value per sample and feature.
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Refused(f"{what} must be finite")
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > sys.float_info.max:  # a column of numbers is float64
            raise Refused(f"{what} is beyond the range of a float")
        return value
    if isinstance(value, str):
        if len(value) > MAX_CATEGORY_LENGTH:
            raise Refused(f"{what} (a category) is longer than {MAX_CATEGORY_LENGTH} characters")
        return value
    raise Refused(f"{what} must be a number, a string, a boolean or null, got {type(value).__name__}")


def _samples(obj: dict, stream: str) -> SamplesMessage:
    raw = _require(obj, "samples")
    if not isinstance(raw, list) or not raw:
        raise Refused("samples must be a non-empty list")
    out = []
    seen: set[str] = set()
    for i, s in enumerate(raw):
        where = f"samples[{i}]: "
        if not isinstance(s, dict):
            raise Refused(f"{where}a sample must be an object")
        sid = _sample_id(_require(s, "id", where), f"samples[{i}].id")
        if sid in seen:
            raise Refused(f"{where}duplicate id {sid!r} in one message")
        seen.add(sid)
        x = s.get("x", {})
        if not isinstance(x, dict):
            raise Refused(f"{where}x must be an object (feature -> value)")
        values = {_string(k, f"samples[{i}].x key", MAX_NAME_LENGTH): _value(v, f"samples[{i}].x[{k!r}]")
                  for k, v in x.items()}
        out.append(Sample(sid, _label(s.get("label"), f"samples[{i}].label"), values))
    return SamplesMessage(stream, tuple(out))


def _finite_numbers(values: list, types: set[type]) -> bool:
    """Whether every one of ``values`` (whose types are ``types``) is null, an int or a finite float."""
    if not types <= NUMBER_TYPES:
        return False
    try:
        column = np.array(values, dtype=np.float64)  # a null becomes NaN
    except OverflowError:  # an int beyond a float's range: the values are checked one by one
        return False
    return int(np.count_nonzero(~np.isfinite(column))) == values.count(None)


def _feature(obj: dict, stream: str) -> FeatureMessage:
    name = _string(_require(obj, "name"), "name", MAX_NAME_LENGTH)
    ids = _require(obj, "ids")
    values = _require(obj, "values")
    if not isinstance(ids, list) or not isinstance(values, list):
        raise Refused("ids and values must be lists")
    if len(ids) != len(values):
        raise Refused(f"ids and values differ in length ({len(ids)} ids, {len(values)} values)")
    if not ids:
        raise Refused("a feature part must carry at least one value")
    # The common cases (string ids; numbers and nulls) are checked in bulk, by C-level passes over the lists (a
    # feature carries a value per sample); otherwise one by one, for the error.
    if set(map(type, ids)) == {str} and min(map(len, ids)) > 0 and max(map(len, ids)) <= MAX_ID_LENGTH:
        id_list = tuple(ids)
    else:
        id_list = tuple(_sample_id(v, "ids[]") for v in ids)
    if len(set(id_list)) != len(id_list):
        raise Refused("ids repeat within the feature message")
    types = set(map(type, values))
    if _finite_numbers(values, types):
        vals = tuple(values)
    else:
        vals = tuple(_value(v, f"values[{k}]") for k, v in enumerate(values))
    kind = obj.get("kind")
    if kind is not None and kind not in KINDS:
        raise Refused(f"kind must be one of {KINDS}, got {kind!r}")
    # _value returns every value it accepts as it is: the values' types are those of the message
    if kind == "numeric" and any(issubclass(t, (str, bool)) for t in types):
        raise Refused("a numeric feature has non-numeric values")
    part, parts = obj.get("part", 0), obj.get("parts", 1)
    for what, v in (("part", part), ("parts", parts)):
        if not is_int(v, numpy=False):
            raise Refused(f"{what} must be an integer")
    if parts < 1 or not 0 <= part < parts:
        raise Refused(f"part must be in 0..parts-1, got part={part}, parts={parts}")
    if parts > 100_000:
        raise Refused("parts must be at most 100000")
    paired_null = obj.get("paired_null", False)
    if not isinstance(paired_null, bool):
        raise Refused(f"paired_null must be true or false, got {paired_null!r}")
    return FeatureMessage(stream, name, id_list, vals, kind, part, parts, paired_null)


def _label_message(obj: dict, stream: str) -> LabelMessage:
    label = _label(_require(obj, "label"))
    if label is None:
        raise Refused("label must not be null in a label message")
    return LabelMessage(stream, _sample_id(_require(obj, "id")), label)


def _control(obj: dict, stream: str) -> ControlMessage:
    op = _require(obj, "op")
    if op not in CONTROL_OPS:
        raise Refused(f"op must be one of {CONTROL_OPS}, got {op!r}")
    args = obj.get("args", {})
    if not isinstance(args, dict):
        raise Refused("args must be an object")
    return ControlMessage(stream, op, args)


_PARSERS = {"samples": _samples, "feature": _feature, "label": _label_message, "control": _control}


def parse(obj: Any) -> Message:
    """Validate an already decoded JSON value."""
    if not isinstance(obj, dict):
        raise Refused(f"a message must be a JSON object, got {type(obj).__name__}")
    v = obj.get("v")
    if v != VERSION or isinstance(v, bool):
        raise Refused(f"unsupported or missing version: v={v!r} (this engine reads v={VERSION})")
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in _PARSERS:
        raise Refused(f"unknown message type {kind!r} (expected one of {sorted(_PARSERS)})")
    stream = _string(_require(obj, "stream"), "stream", MAX_NAME_LENGTH)
    return _PARSERS[kind](obj, stream)


def decode(raw: bytes | str) -> Message:
    """Decode one message from its bytes; :class:`Refused` with the reason if it cannot be accepted."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Refused(f"not valid JSON: {exc}") from None
    return parse(obj)
