"""Output records, version 1: ``prediction``, ``encoding``, ``feedback`` and ``error`` (dead letters).

Records are plain dicts ready for JSON; each carries ``"v": 1``, its ``type`` and a ``key`` (the Kafka message key:
the stream for feedback, ``stream/sample`` for per-sample records, so that a compacted topic keeps the latest).

The per-sample records of a republication come in a :class:`RecordBatch`: a sequence of those same dicts, held as
the forest's arrays until a sink asks; iterating gives the dicts. Every sink serializes records with
:func:`json_lines` (a batch's lines written in bulk from its arrays, other records with :func:`dumps`), once per
record: the bytes are the same either way.
"""

from __future__ import annotations

import base64
import gc
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, overload

import numpy as np
import orjson
import scipy.sparse as sp

from streamforest.engine import render
from streamforest.forest import FeatureReport

VERSION = 1
#: A dead letter keeps at most this many bytes of the refused message (and its length in ``original_bytes``).
MAX_ORIGINAL_BYTES = 4096


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while records are built: they hold no cycles, and the collector
    would otherwise walk every list built so far, again and again (it tripled the cost of 30k encoding records)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def raw_text(raw: bytes | str, limit: int | None = None) -> str:
    """The original message for a dead letter: its text when it is UTF-8, base64 otherwise; at most ``limit``
    bytes of it (cut at a character boundary)."""
    if isinstance(raw, str):
        # A str may hold lone surrogates that no JSON encoder accepts: keep their bytes instead.
        raw = raw.encode("utf-8", "surrogatepass")
    cut = limit is not None and len(raw) > limit
    if cut:
        raw = raw[:limit]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if cut and exc.reason == "unexpected end of data":  # the cut split the last character: drop its bytes
            return raw[: exc.start].decode("utf-8")
        return _b64(raw)


def _b64(raw: bytes) -> str:
    return "base64:" + base64.b64encode(raw).decode("ascii")


def error(raw: bytes | str, source: str, reason: str, stream: str = "", size: int | None = None) -> dict[str, Any]:
    """A dead letter: the original message (its first :data:`MAX_ORIGINAL_BYTES` bytes), its length in bytes
    (``size`` when ``raw`` is already only its beginning), where it came from, why it was refused (keyed by its
    stream)."""
    n = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    size = n if size is None else size
    return {"v": VERSION, "type": "error", "key": stream, "source": source, "reason": reason,
            "original": raw_text(raw, MAX_ORIGINAL_BYTES), "original_bytes": size,
            "truncated": size > MAX_ORIGINAL_BYTES}


def class_key(c: Any) -> str:
    """The canonical key of a class in ``proba``: the label as JSON writes it (``1`` for ``1`` and ``1.0``,
    ``0.5``, ``true``/``false``, strings as they are).

    Examples
    --------
    >>> [class_key(c) for c in (1, 1.0, np.float64(2.0), 0.5, True, np.bool_(False), "yes")]
    ['1', '1', '2', '0.5', 'true', 'false', 'yes']
    """
    if isinstance(c, (bool, np.bool_)):
        return "true" if c else "false"
    if isinstance(c, (int, np.integer)):
        return str(int(c))
    if isinstance(c, (float, np.floating)):
        f = float(c)
        return str(int(f)) if f.is_integer() else repr(f)
    return str(c)


def waiting(stream: str, features: list[str], reason: str) -> dict[str, Any]:
    """Feedback of a stream whose forest cannot start yet: which features wait, and why."""
    return {"v": VERSION, "type": "feedback", "key": stream, "stream": stream, "status": "waiting",
            "model_version": 0, "features": list(features), "reason": reason}


def feedback(stream: str, report: FeatureReport, model_version: int) -> dict[str, Any]:
    paired = ({"oob_null": _finite(report.oob_null), "oob_paired_se": _finite(report.oob_paired_se)}
              if report.oob_null is not None else {})
    return {
        "v": VERSION, "type": "feedback", "key": stream, "stream": stream, "status": "grown",
        "feature": report.feature,
        "model_version": model_version, "generation": report.generation, "weight_share": report.weight_share,
        "log_weight": report.log_weight, "n_trees": report.n_trees, "importance": report.importance,
        "oob_metric": report.oob_metric, "oob_before": _finite(report.oob_before),
        "oob_after": _finite(report.oob_after), "pruned": report.pruned, "merged": report.merged,
        "seconds": report.seconds, **paired,
    }


def predictions(stream: str, ids: list[str], model_version: int, classes: np.ndarray,
                proba: np.ndarray) -> list[dict[str, Any]]:
    names = [class_key(c) for c in classes.tolist()]
    rows = proba.tolist()
    with _collector_paused():
        return [
            {"v": VERSION, "type": "prediction", "key": f"{stream}/{sid}", "stream": stream, "id": sid,
             "model_version": model_version, "proba": dict(zip(names, row, strict=True))}
            for sid, row in zip(ids, rows, strict=True)
        ]


def values(stream: str, ids: list[str], model_version: int, predicted: np.ndarray) -> list[dict[str, Any]]:
    with _collector_paused():
        return [
            {"v": VERSION, "type": "prediction", "key": f"{stream}/{sid}", "stream": stream, "id": sid,
             "model_version": model_version, "value": v}
            for sid, v in zip(ids, predicted.tolist(), strict=True)
        ]


def encodings(stream: str, ids: list[str], model_version: int, E: sp.csr_matrix) -> list[dict[str, Any]]:
    indptr = E.indptr.tolist()
    indices = E.indices.tolist()
    # Binary encodings are mostly ones: one shared float then, instead of a Python float per entry.
    unit = bool((E.data == 1).all())
    data = None if unit else E.data.tolist()
    one = [1.0]
    with _collector_paused():
        return [
            {"v": VERSION, "type": "encoding", "key": f"{stream}/{sid}", "stream": stream, "id": sid,
             "model_version": model_version, "dim": E.shape[1], "indices": indices[indptr[k]:indptr[k + 1]],
             "values": one * (indptr[k + 1] - indptr[k]) if unit else data[indptr[k]:indptr[k + 1]]}
            for k, sid in enumerate(ids)
        ]


class Lines(NamedTuple):
    """Serialized records: ``blob`` holds every record's JSON followed by a newline, in order; record ``k`` is
    ``blob[ends[k]:ends[k + 1] - 1]`` (``ends`` has one offset more than there are records, from 0)."""

    blob: bytes
    ends: np.ndarray

    def values(self) -> list[bytes]:
        """Every record's JSON without its newline: e.g. the values of Kafka messages."""
        e, blob = self.ends.tolist(), self.blob
        return [blob[e[k]:e[k + 1] - 1] for k in range(len(e) - 1)]

    def lines(self) -> list[bytes]:
        """Every record's JSON with its newline: the lines of a JSONL file."""
        e, blob = self.ends.tolist(), self.blob
        return [blob[e[k]:e[k + 1]] for k in range(len(e) - 1)]


def dumps(record: dict[str, Any]) -> bytes:
    """The JSON of one record built as a dict (``orjson.dumps``: non-finite numbers become ``null``)."""
    return orjson.dumps(record)


def json_lines(batch: Sequence[dict[str, Any]]) -> Lines:
    """The serializer of output records, for every sink (files, stdout, Kafka): a :class:`RecordBatch` is written
    from its arrays (:meth:`RecordBatch.lines`), any other sequence of records record by record with
    :func:`dumps`. Either way the bytes are those of :func:`dumps` of each record's dict form.

    Examples
    --------
    >>> lines = json_lines([waiting("s", ["f"], "no labels yet")])
    >>> lines.blob == dumps(waiting("s", ["f"], "no labels yet")) + b"\\n", lines.ends.tolist()
    (True, [0, 128])
    """
    if isinstance(batch, RecordBatch):
        return batch.lines()
    parts = [dumps(r) + b"\n" for r in batch]
    ends = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=ends[1:])
    return Lines(b"".join(parts), ends)


class _Layout(NamedTuple):
    """How one kind of per-sample record is made from a batch's arrays: as dicts, and as JSON lines."""

    records: Callable[..., list[dict[str, Any]]]
    lines: Callable[..., Lines]


def _head(type: str, stream: str, model_version: int) -> list[bytes]:
    """The first three segments of a per-sample line (:func:`render.render`): up to the id, between the key's id
    and the ``id`` field's, and from the id's closing quote to the model version."""
    s = render.escaped(stream)
    return [b'{"v":%d,"type":"%s","key":"%s/' % (VERSION, type.encode(), s), b'","stream":"' + s + b'","id":"',
            b'","model_version":%d' % int(model_version)]


def _number_lines(stream: str, ids: list[str], model_version: int, field: bytes, offsets: np.ndarray,
                  names: list[bytes], numbers: np.ndarray) -> Lines:
    """Prediction lines whose ``field`` holds numbers: record ``k`` writes ``numbers[offsets[k]:offsets[k + 1]]``,
    each after its name (an object of class probabilities, or one bare value)."""
    no_ints = np.zeros(len(ids) + 1, dtype=np.int64)
    head = _head("prediction", stream, model_version)
    opens, closes = (b"{", b"}}\n") if names[0] else (b"", b"}\n")
    segments = [*head[:2], head[2] + b',"' + field + b'":' + opens, b"", closes]
    return Lines(*render.render(segments, ids, no_ints, no_ints[:1], offsets, names,
                                np.asarray(numbers, dtype=np.float64)))


def _prediction_lines(stream: str, ids: list[str], model_version: int, classes: np.ndarray,
                      proba: np.ndarray) -> Lines:
    names = [orjson.dumps(class_key(c)) + b":" for c in classes.tolist()]
    c = len(names)
    return _number_lines(stream, ids, model_version, b"proba", np.arange(0, len(ids) * c + 1, c, dtype=np.int64),
                         names, proba)


def _value_lines(stream: str, ids: list[str], model_version: int, predicted: np.ndarray) -> Lines:
    return _number_lines(stream, ids, model_version, b"value", np.arange(len(ids) + 1), [b""], predicted)


def _encoding_lines(stream: str, ids: list[str], model_version: int, E: sp.csr_matrix) -> Lines:
    unit = bool((E.data == 1).all())
    head = _head("encoding", stream, model_version)
    segments = [*head[:2], head[2] + b',"dim":%d,"indices":[' % E.shape[1], b'],"values":[', b"]}\n"]
    return Lines(*render.render(segments, ids, E.indptr, E.indices, E.indptr, [b""], None if unit else E.data,
                                distinct=True))


_PREDICTIONS = _Layout(predictions, _prediction_lines)
_VALUES = _Layout(values, _value_lines)
_ENCODINGS = _Layout(encodings, _encoding_lines)


class RecordBatch(Sequence[dict[str, Any]]):
    """The per-sample records of one kind (``prediction`` or ``encoding``) for a chunk of one stream's samples.

    A sequence of the dicts :func:`predictions`, :func:`values` or :func:`encodings` build (made when read, so
    iterating a batch costs what building those lists costs), plus the form sinks use, :meth:`lines` (through
    :func:`json_lines`): the bytes of :func:`dumps` of every record and a newline, in order, written from the
    arrays without a Python object per number. Make one with :meth:`of_predictions`, :meth:`of_values` or
    :meth:`of_encodings`.

    Examples
    --------
    >>> import numpy as np
    >>> b = RecordBatch.of_predictions("s", ["a", "b"], 3, np.array([0, 1]), np.array([[0.25, 0.75], [1.0, 0.0]]))
    >>> len(b), b.type, b.keys()
    (2, 'prediction', ['s/a', 's/b'])
    >>> b[1]["proba"]
    {'0': 1.0, '1': 0.0}
    >>> b.lines().blob == b"".join(dumps(r) + b"\\n" for r in b)
    True
    """

    __slots__ = ("_arrays", "_layout", "ids", "model_version", "stream", "type")

    def __init__(self, type: str, stream: str, ids: list[str], model_version: int, layout: _Layout,
                 arrays: tuple) -> None:
        self.type = type
        self.stream = stream
        self.ids = ids
        self.model_version = model_version
        self._layout = layout
        self._arrays = arrays

    @classmethod
    def of_predictions(cls, stream: str, ids: list[str], model_version: int, classes: np.ndarray,
                       proba: np.ndarray) -> RecordBatch:
        """Class probabilities ``proba`` (one row per id, one column per class)."""
        return cls("prediction", stream, ids, model_version, _PREDICTIONS, (classes, proba))

    @classmethod
    def of_values(cls, stream: str, ids: list[str], model_version: int, predicted: np.ndarray) -> RecordBatch:
        """Predicted values of a regression stream."""
        return cls("prediction", stream, ids, model_version, _VALUES, (predicted,))

    @classmethod
    def of_encodings(cls, stream: str, ids: list[str], model_version: int, E: sp.csr_matrix) -> RecordBatch:
        """Encodings: row ``k`` of ``E`` is the encoding of ``ids[k]``."""
        return cls("encoding", stream, ids, model_version, _ENCODINGS, (E,))

    def __len__(self) -> int:
        return len(self.ids)

    def records(self) -> list[dict[str, Any]]:
        """The records as dicts."""
        return self._layout.records(self.stream, self.ids, self.model_version, *self._arrays)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records())

    @overload
    def __getitem__(self, k: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, k: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, k: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self.records()[k]

    def __repr__(self) -> str:
        return f"RecordBatch({self.type!r}, stream={self.stream!r}, {len(self)} records, v{self.model_version})"

    def keys(self) -> list[str]:
        """Every record's key (``stream/id``)."""
        return [f"{self.stream}/{sid}" for sid in self.ids]

    def jsonl(self) -> bytes:
        """Every record's JSON and a newline, in order, as one bytes (``lines().blob``)."""
        return self.lines().blob

    def lines(self) -> Lines:
        """Every record's JSON line, written from the arrays in bulk (:mod:`streamforest.engine.render`)."""
        return self._layout.lines(self.stream, self.ids, self.model_version, *self._arrays)
