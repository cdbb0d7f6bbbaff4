"""Engine state on a compacted changelog topic: per input partition, snapshots of its streams and a manifest.

Partition ``p`` of the input has its state on partition ``p`` of ``<prefix>.state``. A state checkpoint writes
each stream changed since the last one as npz bytes (arrays + a JSON header, ``allow_pickle=False`` on read; no
pickle) cut into chunks under the broker's message size limit, keyed ``<stream hash>/<seq>/<chunk>``; then one
``manifest`` record that names, for every stream of the partition, the changelog offsets of its current chunks and
the input offset the whole snapshot covers; then tombstones for the chunks it supersedes, so that compaction keeps
only the latest snapshot. Under exactly-once all of it is in the transaction that commits the input offsets.

Every commit also writes a small ``position`` record: the input offset up to which outputs are published. It is in
the same transaction as those outputs, so a committed reader sees it exactly when it sees them; a restart trusts it
as much as the group's committed offset (the later of the two wins), and the replay never republishes what a
reader has already seen, whatever the broker did with the group offsets around a crash or a restart.

Restoring reads the latest manifest near the end of the partition (a backward search in growing windows) and then
only the chunks it names: the cost follows the state's size, not the length of the history.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import time
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from streamforest.engine.checkpoint import restore_stream, stream_arrays
from streamforest.engine.state import StreamState

log = logging.getLogger("streamforest.kafka")

FORMAT = "streamforest.kafka.state"
VERSION = 1
MANIFEST_KEY = b"manifest"
POSITION_KEY = b"position"
#: Bytes of an input message's value that its mark checksums (enough to tell two messages apart, cheap per message).
MARK_PREFIX = 4096
READ_TIMEOUT_S = 60.0


def snapshot_bytes(st: StreamState) -> bytes:
    """One stream's state as npz bytes: its arrays plus the JSON header as a ``uint8`` array.

    Examples
    --------
    >>> st = StreamState("s")
    >>> st.add_rows(["a", "b"])
    >>> read_snapshot(snapshot_bytes(st)).ids
    ['a', 'b']
    """
    arrays, header = stream_arrays(st)
    payload = dict(arrays)
    payload["__header__"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **payload)
    return buf.getvalue()


def read_snapshot(data: bytes) -> StreamState:
    """The stream a :func:`snapshot_bytes` payload holds (arrays read with ``allow_pickle=False``)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        if "__header__" not in z.files:
            raise ValueError("state snapshot without a streamforest header")
        arrays = {k: z[k] for k in z.files if k != "__header__"}
        header = json.loads(bytes(z["__header__"]).decode("utf-8"))
    return restore_stream(arrays, header)


def input_mark(offset: int, timestamp: int | None, value: bytes | None) -> dict[str, Any]:
    """What identifies the last input message a snapshot covers: offset, timestamp, size and the CRC-32 of the
    value's first :data:`MARK_PREFIX` bytes. A restore compares it with the message now at that offset: another
    message there means the input topic was deleted and created again (its offsets started over)."""
    value = value or b""
    return {"offset": int(offset), "timestamp": -1 if timestamp is None else int(timestamp), "bytes": len(value),
            "crc32": zlib.crc32(value[:MARK_PREFIX])}


def stream_key(stream: str) -> str:
    return hashlib.blake2b(stream.encode("utf-8"), digest_size=10).hexdigest()


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    """``data`` cut into pieces of at most ``size`` bytes (one empty piece for empty data).

    Examples
    --------
    >>> [len(c) for c in chunks(b"x" * 10, 4)]
    [4, 4, 2]
    """
    if not data:
        yield b""
    for i in range(0, len(data), size):
        yield data[i:i + size]


def log_end(consumer: KafkaConsumer, tp: TopicPartition, reported: int, timeout: float = 2.0) -> int:
    """The end offset of ``tp`` (``consumer``: a group-less reader): ``reported`` (what ListOffsets answered), or the
    high watermark of a fetch from there when that is larger. Tansu 0.6 answers ListOffsets with the base offset of
    the partition's last record batch plus one, so the records of that batch after its first lie beyond the
    reported end: a restore would miss the latest snapshot, and the input's end would look earlier than the state."""
    consumer.assign([tp])
    consumer.seek(tp, reported)
    deadline = time.monotonic() + timeout
    while consumer.highwater(tp) is None and time.monotonic() < deadline:
        consumer.poll(timeout_ms=100, max_records=1)
    return max(reported, consumer.highwater(tp) or 0)


class Changelog:
    """Writes and restores the state of one input partition on ``topic`` (partition ``partition``)."""

    def __init__(self, topic: str, partition: int, chunk_bytes: int) -> None:
        self.topic = topic
        self.partition = partition
        self.chunk_bytes = chunk_bytes
        self.tp = TopicPartition(topic, partition)
        #: The manifest last written or restored (``None``: no state yet).
        self.manifest: dict[str, Any] | None = None
        #: The input offset up to which outputs are published, as last restored (``None``: never written).
        self.published: int | None = None

    # ------------------------------------------------------------------ write

    def write(self, producer: KafkaProducer, streams: dict[str, StreamState], dirty: set[str], offset: int,
              input_topic: str, mark: dict[str, Any] | None = None) -> int:
        """Write the changed streams, then a manifest covering input ``offset`` (with ``mark``, the
        :func:`input_mark` of the last message it covers), then tombstones for what they supersede. Returns the
        bytes written. Blocks until the records are acknowledged (their offsets go in the manifest); under a
        transaction they stay invisible to committed readers until it commits."""
        previous = dict(self.manifest["streams"]) if self.manifest else {}
        seq = (self.manifest["seq"] if self.manifest else 0) + 1
        entries = dict(previous)
        sent: dict[str, tuple[dict[str, Any], list]] = {}
        stale: list[bytes] = []
        written = 0
        for name in sorted(dirty):
            old = entries.pop(name, None)
            if old is not None:
                stale += [f"{old['key']}/{old['seq']}/{i}".encode() for i in range(len(old["offsets"]))]
            st = streams.get(name)
            if st is None:
                continue  # dropped: its chunks become tombstones
            data = snapshot_bytes(st)
            key = stream_key(name)
            futures = [producer.send(self.topic, partition=self.partition, key=f"{key}/{seq}/{i}".encode(),
                                     value=piece, headers=[("streamforest.stream", name.encode("utf-8"))])
                       for i, piece in enumerate(chunks(data, self.chunk_bytes))]
            written += len(data)
            sent[name] = ({"key": key, "seq": seq, "bytes": len(data),
                           "blake2b": hashlib.blake2b(data, digest_size=16).hexdigest()}, futures)
        producer.flush()
        for name, (entry, futures) in sent.items():
            entry["offsets"] = [f.get(timeout=READ_TIMEOUT_S).offset for f in futures]
            entries[name] = entry
        manifest = {"format": FORMAT, "version": VERSION, "seq": seq, "input": input_topic,
                    "partition": self.partition, "offset": offset, "streams": entries}
        if mark is not None:
            manifest["last"] = mark
        producer.send(self.topic, partition=self.partition, key=MANIFEST_KEY, value=json.dumps(manifest).encode())
        for key in stale:
            producer.send(self.topic, partition=self.partition, key=key, value=None)
        self.manifest = manifest
        return written

    def write_position(self, producer: KafkaProducer, offset: int, input_topic: str) -> None:
        """Record that outputs are published up to input ``offset`` (in the transaction that publishes them)."""
        producer.send(self.topic, partition=self.partition, key=POSITION_KEY,
                      value=json.dumps({"input": input_topic, "partition": self.partition,
                                        "offset": offset}).encode())

    # ------------------------------------------------------------------ restore

    def restore(self, consumer: KafkaConsumer) -> dict[str, StreamState]:
        """Read the latest manifest and the chunks it names (``consumer``: a group-less read_committed reader).
        Returns the streams; sets :attr:`manifest` (``None`` when the partition has no state yet) and
        :attr:`published`."""
        manifest = self.read_manifest(consumer)
        if manifest is None:
            return {}
        streams = {}
        for name, entry in manifest["streams"].items():
            offsets = entry["offsets"]
            pieces = self._collect(consumer, offsets)
            if len(pieces) != len(offsets):
                raise ValueError(f"{self.topic}[{self.partition}]: stream {name!r} lost chunks "
                                 f"{sorted(set(offsets) - set(pieces))} of its snapshot")
            data = b"".join(pieces[o] for o in offsets)
            if hashlib.blake2b(data, digest_size=16).hexdigest() != entry["blake2b"]:
                raise ValueError(f"{self.topic}[{self.partition}]: stream {name!r}: snapshot checksum mismatch")
            streams[name] = read_snapshot(data)
        return streams

    def read_manifest(self, consumer: KafkaConsumer) -> dict[str, Any] | None:
        """The latest manifest only (what :meth:`restore` starts with, without reading the chunks); also sets
        :attr:`manifest` and :attr:`published`."""
        consumer.assign([self.tp])
        begin = consumer.beginning_offsets([self.tp])[self.tp]
        end = log_end(consumer, self.tp, consumer.end_offsets([self.tp])[self.tp])
        manifest = published = None
        hi, window = end, 64
        while manifest is None and hi > begin:
            lo = max(begin, hi - window)
            later = published is not None  # a later window already had the latest position
            for rec in self._read(consumer, lo, hi):
                if rec.key == MANIFEST_KEY and rec.value is not None:
                    manifest = json.loads(rec.value)
                elif rec.key == POSITION_KEY and rec.value is not None and not later:
                    published = int(json.loads(rec.value)["offset"])
            hi, window = lo, window * 4
        self.manifest = manifest
        self.published = published
        if manifest is not None and (manifest.get("format") != FORMAT or manifest.get("version") != VERSION):
            raise ValueError(f"{self.topic}[{self.partition}]: not a {FORMAT} manifest of version {VERSION}")
        return manifest

    def _collect(self, consumer: KafkaConsumer, offsets: list[int], attempts: int = 5) -> dict[int, bytes]:
        """The values at ``offsets``; a read cut short (a fetch issued before a seek can move the position past
        the range) is retried for what is still missing, from the partition's beginning: noida-db 0.2.3 reports an
        aborted transaction to a fetch that starts after the transaction's abort marker, and the reader then drops
        every later record of that producer (the same transactional id writes the next snapshot) until it reads
        the marker itself."""
        got: dict[int, bytes] = {}
        for attempt in range(attempts):
            missing = sorted(set(offsets) - set(got))
            if not missing:
                break
            wanted = set(missing)
            lo = missing[0] if attempt == 0 else consumer.beginning_offsets([self.tp])[self.tp]
            for rec in self._read(consumer, lo, missing[-1] + 1):
                if rec.offset in wanted:
                    got[rec.offset] = rec.value
        return got

    def _read(self, consumer: KafkaConsumer, lo: int, hi: int) -> Iterator[Any]:
        """Committed records of offsets [lo, hi) (aborted ones and transaction markers are skipped)."""
        consumer.seek(self.tp, lo)
        deadline = time.monotonic() + READ_TIMEOUT_S
        while consumer.position(self.tp) < hi:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic}[{self.partition}]: could not read offsets {lo}..{hi} "
                                   f"in {READ_TIMEOUT_S:.0f} s")
            for rec in consumer.poll(timeout_ms=500).get(self.tp, []):
                if rec.offset >= hi:
                    return
                if rec.offset >= lo:
                    yield rec
