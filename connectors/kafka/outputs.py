"""Engine records as Kafka records: topic, key, value, headers; dead letters in the style of KIP-1034."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from streamforest.connectors.kafka.config import DEAD_LETTER_CAP, Topics
from streamforest.engine import records
from streamforest.engine.records import Lines, RecordBatch

#: Above this an output record is not sent: it becomes a dead letter saying so (the broker would refuse it).
MAX_RECORD_BYTES = 1_000_000


class KafkaRecord(tuple):
    """``(topic, key, value, headers)`` of one record to produce."""

    __slots__ = ()

    def __new__(cls, topic: str, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]):
        return super().__new__(cls, (topic, key, value, headers))


class RecordBlock(NamedTuple):
    """The records of one republication batch: one topic, one headers list, their values one
    :class:`~streamforest.engine.records.Lines` (``values()[k]`` is record ``k``'s), sent in bulk
    (:meth:`~streamforest.connectors.kafka.clients.TrackedProducer.send_block`)."""

    topic: str
    keys: list[bytes]
    lines: Lines
    headers: list[tuple[str, bytes]]

    def records(self) -> list[KafkaRecord]:
        """The block as one :class:`KafkaRecord` per record."""
        return [KafkaRecord(self.topic, key, value, self.headers)
                for key, value in zip(self.keys, self.lines.values(), strict=True)]


class Origin(NamedTuple):
    """Where an input message came from, and its bytes."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


def output(topics: Topics, record: dict[str, Any], origin: Origin, value: bytes | None = None) -> KafkaRecord:
    """The Kafka record of one engine record made from the input message at ``origin``; ``value`` is its JSON
    when already serialized (:func:`~streamforest.engine.records.json_lines`).

    Examples
    --------
    >>> r = output(Topics(), {"v": 1, "type": "feedback", "key": "s", "model_version": 3},
    ...            Origin("in", 0, 7, b"s", b"{}"))
    >>> r[0], r[1], r[3]
    ('streamforest.feedback', b's', [('streamforest.type', b'feedback'), ('streamforest.model_version', b'3')])
    """
    kind = record["type"]
    if kind == "error":
        return dead_letter(topics, origin.value, record["reason"], origin)
    if value is None:
        value = records.dumps(record)
    if len(value) > MAX_RECORD_BYTES:
        return dead_letter(topics, value, f"output {kind} record of {len(value)} bytes is over the "
                                          f"{MAX_RECORD_BYTES}-byte record limit", origin)
    headers = [("streamforest.type", kind.encode())]
    if "model_version" in record:
        headers.append(("streamforest.model_version", str(record["model_version"]).encode()))
    return KafkaRecord(topics.output(kind), record["key"].encode("utf-8"), value, headers)


def outputs(topics: Topics, batch: Sequence[dict[str, Any]], origin: Origin) -> list[KafkaRecord] | RecordBlock:
    """The Kafka records of one batch of engine records; a republication batch
    (:class:`~streamforest.engine.records.RecordBatch`) as one :class:`RecordBlock` of its bulk JSON lines, without a
    dict or a bytes per record (as records when one of them is over :data:`MAX_RECORD_BYTES`: a dead letter).

    Examples
    --------
    >>> import numpy as np
    >>> from streamforest.engine.records import RecordBatch
    >>> b = RecordBatch.of_predictions("s", ["a", "b"], 3, np.array([0, 1]), np.array([[0.25, 0.75], [1.0, 0.0]]))
    >>> rs = outputs(Topics(), b, Origin("in", 0, 7, b"s", b"{}")).records()
    >>> [(r[0], r[1]) for r in rs]
    [('streamforest.predictions', b's/a'), ('streamforest.predictions', b's/b')]
    >>> import orjson
    >>> [orjson.loads(r[2]) for r in rs] == list(b) and rs[0][3][1]
    ('streamforest.model_version', b'3')
    """
    if not isinstance(batch, RecordBatch):
        # Dead letters carry the refused message, not the error record: only the others are serialized.
        return [output(topics, r, origin) for r in batch]
    topic = topics.output(batch.type)
    # One headers list shared by the batch's records: kafka-python only reads it.
    headers = [("streamforest.type", batch.type.encode()),
               ("streamforest.model_version", str(batch.model_version).encode())]
    lines = records.json_lines(batch)
    keys = [k.encode("utf-8") for k in batch.keys()]
    sizes = np.diff(lines.ends)
    if int(sizes.max(initial=0)) <= MAX_RECORD_BYTES:
        return RecordBlock(topic, keys, lines, headers)
    out = []
    for key, value in zip(keys, lines.values(), strict=True):
        if len(value) > MAX_RECORD_BYTES:
            out.append(dead_letter(topics, value, f"output {batch.type} record of {len(value)} bytes is over the "
                                                  f"{MAX_RECORD_BYTES}-byte record limit", origin))
        else:
            out.append(KafkaRecord(topic, key, value, headers))
    return out


def dead_letter(topics: Topics, original: bytes, reason: str, origin: Origin) -> KafkaRecord:
    """The refused bytes (cut at :data:`~streamforest.connectors.kafka.config.DEAD_LETTER_CAP`) keyed like the
    input, with KIP-1034 headers: exception, message, and the topic/partition/offset it came from.

    Examples
    --------
    >>> r = dead_letter(Topics(), b"{oops", "not valid JSON", Origin("streamforest.input", 2, 41, b"s1", b"{oops"))
    >>> r[0], r[1], r[2]
    ('streamforest.errors', b's1', b'{oops')
    >>> dict(r[3])["__streams.errors.offset"]
    b'41'
    """
    topic, partition, offset, key, _ = origin
    internal = reason.startswith("internal error:")
    headers = [
        ("__streams.errors.exception", b"InternalError" if internal else b"Refused"),
        ("__streams.errors.message", reason.encode("utf-8")),
        ("__streams.errors.topic", topic.encode("utf-8")),
        ("__streams.errors.partition", str(partition).encode()),
        ("__streams.errors.offset", str(offset).encode()),
        ("streamforest.type", b"error"),
    ]
    if len(original) > DEAD_LETTER_CAP:
        headers.append(("streamforest.original_bytes", str(len(original)).encode()))
        original = original[:DEAD_LETTER_CAP]
    return KafkaRecord(topics.errors, key, original, headers)
