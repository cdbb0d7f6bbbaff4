"""Many records to one partition appended to a kafka-python producer in one call, their bytes written by a numba
kernel straight into the producer's record batches.

``KafkaProducer.send`` costs about 25 µs of Python per record (type checks, partitioner, a varint at a time, a
future per record, locks): a republication of 10,000 encodings spends a quarter of a second there, as much as the
forest takes to compute them. :func:`append_block` writes the same Kafka records (v2 record format: length,
attributes, timestamp and offset deltas, key, value, headers) for a whole block at once into the accumulator's
batches, under the same per-partition lock and batch-size limit, and hands the batches to kafka-python's own sender,
which compresses, numbers (idempotence, transactions) and delivers them as it does any batch. A reader of the topic
sees the records :meth:`KafkaProducer.send` would have written, except that the records of one call share their
timestamp. Delivery is followed per batch (a batch is delivered or fails as a whole) rather than per record.

It reaches into kafka-python's producer internals (the accumulator and the v2 batch builder); :func:`supported`
says whether the installed kafka-python has them, and the worker sends record by record where it does not.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from numba import njit

log = logging.getLogger("streamforest.kafka")


@njit(cache=True)
def _varint_size(v: int) -> int:
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


@njit(cache=True)
def _put_varint(out: np.ndarray, p: int, v: int) -> int:
    while v > 0x7F:
        out[p] = (v & 0x7F) | 0x80
        v >>= 7
        p += 1
    out[p] = v
    return p + 1


@njit(cache=True)
def _pack(order, vblob, vends, kblob, kends, hblob, ts_delta, offset0, used0, batch_size, header_size, out,
          marks):  # pragma: no cover - compiled
    """Write records ``order[i]`` (value ``vblob[vends[k]:vends[k + 1] - 1]``, key ``kblob[kends[k]:kends[k + 1]]``,
    headers ``hblob``) in the v2 record format into ``out``, cutting batches as kafka-python's builder does: a record
    goes into the current batch when it fits in ``batch_size`` or the batch is empty. The current batch holds
    ``used0`` bytes and ``offset0`` records, its records' timestamps are ``ts_delta`` after its first; new batches
    start at ``header_size`` bytes. ``marks[b]`` = (end in ``out``, records, largest record) of batch ``b``; returns
    the number of batches (the first may hold no record)."""
    used, offset, count, b, p, largest = used0, offset0, 0, 0, 0, 0
    zz_ts = 2 * ts_delta  # zigzag of a non-negative delta
    h = hblob.shape[0]
    for i in range(order.shape[0]):
        k = order[i]
        vlen = vends[k + 1] - 1 - vends[k]
        klen = kends[k + 1] - kends[k]
        if offset == 0:  # a new batch: timestamps from its first record
            zz_ts = 0
        body = (1 + _varint_size(zz_ts) + _varint_size(2 * offset) + _varint_size(2 * klen) + klen
                + _varint_size(2 * vlen) + vlen + h)
        required = body + _varint_size(2 * body)
        if used + required > batch_size and offset > 0:
            marks[b, 0] = p
            marks[b, 1] = count
            marks[b, 2] = largest
            b += 1
            used, offset, count, zz_ts, largest = header_size, 0, 0, 0, 0
            body = 1 + 1 + 1 + _varint_size(2 * klen) + klen + _varint_size(2 * vlen) + vlen + h
            required = body + _varint_size(2 * body)
        p = _put_varint(out, p, 2 * body)
        out[p] = 0  # attributes
        p = _put_varint(out, p + 1, zz_ts)
        p = _put_varint(out, p, 2 * offset)
        p = _put_varint(out, p, 2 * klen)
        out[p:p + klen] = kblob[kends[k]:kends[k + 1]]
        p += klen
        p = _put_varint(out, p, 2 * vlen)
        out[p:p + vlen] = vblob[vends[k]:vends[k] + vlen]
        p += vlen
        out[p:p + h] = hblob
        p += h
        used += required
        offset += 1
        count += 1
        largest = max(largest, required)
    marks[b, 0] = p
    marks[b, 1] = count
    marks[b, 2] = largest
    return b + 1


def header_bytes(headers: list[tuple[str, bytes]]) -> bytes:
    """The headers' part of a v2 record: their count, then each key and value with its length.

    Examples
    --------
    >>> header_bytes([("t", b"ab")])
    b'\\x02\\x02t\\x04ab'
    """
    from kafka.record.util import encode_varint

    out = bytearray()
    encode_varint(len(headers), out.append)
    for key, value in headers:
        k = key.encode("utf-8")
        encode_varint(len(k), out.append)
        out += k
        encode_varint(len(value), out.append)
        out += value
    return bytes(out)


def supported(producer: Any) -> bool:
    """Whether ``producer`` is a kafka-python producer whose internals :func:`append_block` knows: the v2 record
    format, its accumulator and batch builder as in kafka-python 3.0."""
    try:
        from kafka.producer.producer_batch import ProducerBatch  # noqa: F401
        from kafka.record.default_records import DefaultRecordBatchBuilder
        from kafka.record.memory_records import MemoryRecordsBuilder

        acc = producer._accumulator
        return (acc.config["message_version"] == 2 and hasattr(acc, "_tp_lock") and hasattr(acc, "_incomplete")
                and {"_buffer", "_num_records", "_last_offset", "_first_timestamp", "_max_timestamp"}
                <= set(DefaultRecordBatchBuilder.__slots__)
                and {"_builder", "_next_offset", "_closed"} <= set(MemoryRecordsBuilder.__slots__))
    except (AttributeError, ImportError, KeyError):
        return False


def append_block(producer: Any, topic: str, partition: int, order: np.ndarray, vblob: np.ndarray,
                 vends: np.ndarray, kblob: np.ndarray, kends: np.ndarray, headers: bytes) -> list[Any]:
    """Append records ``order[i]`` to ``topic``/``partition`` of ``producer`` (values as in
    :class:`~streamforest.engine.records.Lines`: ``vblob[vends[k]:vends[k + 1] - 1]``, keys
    ``kblob[kends[k]:kends[k + 1]]``, every record with the :func:`header_bytes` ``headers``); returns the delivery
    futures of the batches they went into. The topic's metadata must be known (``producer.partitions_for``)."""
    from kafka.producer.producer_batch import ProducerBatch
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecordsBuilder
    from kafka.structs import TopicPartition

    if producer._closed:
        raise RuntimeError("the producer is closed")
    acc = producer._accumulator
    tp = TopicPartition(topic, partition)
    tm = producer._transaction_manager
    if tm is not None and tm.is_transactional():
        tm.maybe_add_partition_to_transaction(tp)
    n = len(order)
    bound = int(vends[-1] - vends[0]) + int(kends[-1] - kends[0]) + n * (len(headers) + 21)
    out = np.empty(bound, dtype=np.uint8)
    marks = np.zeros((n + 1, 3), dtype=np.int64)
    hblob = np.frombuffer(headers, dtype=np.uint8)
    header_size = DefaultRecordBatchBuilder.HEADER_STRUCT.size
    batch_size = acc.config["batch_size"]
    now_ms = int(time.time() * 1000)
    now = time.monotonic()
    futures = []
    acc._appends_in_progress.increment()
    try:
        with acc._tp_lock(tp):
            dq = acc._batches[tp]
            last = dq[-1] if dq and not dq[-1].records._closed else None
            if last is not None:
                builder = last.records._builder
                used0, offset0 = builder.size(), last.records._next_offset
                ts_delta = max(0, now_ms - builder._first_timestamp) if builder._first_timestamp is not None else 0
            else:
                used0, offset0, ts_delta = header_size, 0, 0
            count = _pack(order, vblob, vends, kblob, kends, hblob, ts_delta, offset0, used0, batch_size,
                          header_size, out, marks)
            start = 0
            for b in range(count):
                end, records = int(marks[b, 0]), int(marks[b, 1])
                if records == 0:
                    continue
                if b > 0 or last is None:
                    last = ProducerBatch(tp, MemoryRecordsBuilder(acc.config["message_version"],
                                                                  acc.config["compression_attrs"], batch_size),
                                         now=now)
                    dq.append(last)
                    acc._incomplete.add(last)
                memory = last.records
                builder = memory._builder
                builder._buffer += memoryview(out[start:end])
                if builder._first_timestamp is None:
                    builder._first_timestamp = builder._max_timestamp = now_ms
                builder._max_timestamp = max(builder._max_timestamp, now_ms)
                memory._next_offset += records
                builder._num_records += records
                builder._last_offset = memory._next_offset - 1
                last.last_append = now
                last.max_record_size = max(last.max_record_size, int(marks[b, 2]))
                futures.append(last.produce_future)
                start = end
    finally:
        acc._appends_in_progress.decrement()
    producer._sender.wakeup()
    return futures
