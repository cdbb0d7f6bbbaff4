"""One input partition: its own pure engine, its producer, its changelog, and the checkpoint routine.

A partition's streams live in one :class:`~streamforest.engine.core.Engine` so that its state can be checkpointed
and handed to whichever worker gets the partition next. Starting a task restores the latest snapshot from the
changelog (covering input offset ``S``) and the group's committed offset ``C``, seeks to ``S`` and replays: messages
before ``C`` rebuild the state without republishing (their outputs were committed already), so the model after the
replay is the one an uninterrupted run has, and no output is duplicated.

Under exactly-once each partition has a transactional producer whose id is derived from the partition: the next
owner's ``init_transactions`` fences the previous one and aborts whatever it left open.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import IllegalStateError, KafkaConnectionError

from streamforest.connectors.kafka import clients
from streamforest.connectors.kafka.changelog import Changelog, input_mark, log_end
from streamforest.connectors.kafka.config import WorkerConfig
from streamforest.connectors.kafka.metrics import KindEngineMetrics, WorkerMetrics
from streamforest.connectors.kafka.outputs import KafkaRecord, Origin, RecordBlock, outputs
from streamforest.engine.core import Engine, EngineConfig
from streamforest.engine.state import StreamState

log = logging.getLogger("streamforest.kafka")


class PartitionTask:
    """The engine, producer and changelog of one assigned input partition."""

    def __init__(self, config: WorkerConfig, engine_config: EngineConfig, partition: int,
                 engine_metrics: KindEngineMetrics, metrics: WorkerMetrics,
                 shared_producer: KafkaProducer | None = None) -> None:
        self.config = config
        self.partition = partition
        self.tp = TopicPartition(config.topics.input, partition)
        self.engine = Engine(engine_config, metrics=engine_metrics)
        self.engine_metrics = engine_metrics
        self.metrics = metrics
        self.changelog = Changelog(config.topics.state, partition, config.state_chunk_bytes)
        self.producer = clients.TrackedProducer(shared_producer) if shared_producer is not None else None
        self.owns_producer = shared_producer is None
        self.in_transaction = False
        #: Next input offset to consume (what a commit records, or ``replay_until`` while replaying); ``None`` before
        #: the task has started.
        self.position: int | None = None
        self.committed_position: int | None = None
        #: Messages before this offset are replayed into the state without republishing.
        self.replay_until = 0
        #: Engine seconds spent since the last state snapshot: what a restart would replay.
        self.work_since_state = 0.0
        self._streams: dict[str, StreamState] = {}
        #: The :func:`input_mark` of the last message the state holds (what the next snapshot's manifest records),
        #: and the last message processed since (its mark is computed only when a snapshot is written).
        self.mark: dict[str, Any] | None = None
        self._last: Any = None

    # ------------------------------------------------------------------ start

    def start(self, consumer: KafkaConsumer) -> None:
        """Fence the previous owner, restore the state, seek to the offset it covers."""
        begun = time.perf_counter()
        if self.owns_producer:
            self._open_producer()
        begin = consumer.beginning_offsets([self.tp])[self.tp]
        # A short fetch wait: log_end's fetch from the end finds nothing on a broker that reports its end right.
        reader = clients.reader(self.config, fetch_max_wait_ms=50)
        try:
            end = log_end(reader, self.tp, consumer.end_offsets([self.tp])[self.tp])
            self.engine.streams = self.changelog.restore(reader)
            manifest = self.changelog.manifest
            self.mark = manifest.get("last") if manifest else None
            recreated = self.mark is not None and begin <= self.mark["offset"] < end and not self._same_message(
                reader, self.mark)
        finally:
            reader.close()
        committed = consumer.committed(self.tp)
        published = self.changelog.published
        if committed is not None and (published is not None or manifest is None) and (
                published is None or published < committed):
            # Every commit writes the position in the transaction that moves the group's offset: an offset beyond
            # it was committed without that transaction's records. noida-db does that when it stops during a
            # commit: the offsets stay, the records are aborted when it starts again. Those outputs are published
            # again. (A changelog with a snapshot but no position at all predates position records: trusted.)
            log.warning("partition %d: the group's committed offset %d is beyond the outputs the changelog shows "
                        "published (%s): republishing from there", self.partition, committed, published)
            committed = published
        if published is not None and (committed is None or published > committed):
            if committed is not None:
                log.warning("partition %d: the changelog shows outputs published up to offset %d, the group's "
                            "committed offset is %d: replaying without republishing up to %d", self.partition,
                            published, committed, published)
            committed = published
        start = manifest["offset"] if manifest else begin
        if start < begin:
            log.warning("partition %d: the state covers offset %d but the input starts at %d (retention?): "
                        "messages in between are lost to the state", self.partition, start, begin)
            start = begin
        if start > end:
            log.warning("partition %d: the state covers offset %d beyond the input's end %d (topic recreated?): "
                        "keeping the state and reading the input from its beginning", self.partition, start, end)
            start, committed = begin, None
        elif recreated:
            log.warning("partition %d: the input message at offset %d is not the one the state last saw (topic "
                        "recreated?): keeping the state and reading the input from its beginning", self.partition,
                        self.mark["offset"])
            start, committed = begin, None
        if committed is not None and committed > end:
            log.warning("partition %d: committed offset %d is beyond the input's end %d: ignored",
                        self.partition, committed, end)
            committed = None
        self.replay_until = committed if committed is not None else start
        self.position = start
        self.committed_position = committed
        consumer.seek(self.tp, start)
        self._streams = dict(self.engine.streams)
        self.engine.dirty.clear()
        self.work_since_state = 0.0
        seconds = time.perf_counter() - begun
        self.metrics.restore_seconds.observe(seconds)
        log.info("partition %d: restored %d streams covering offset %d in %.2f s; replaying %d messages up to "
                 "committed offset %s", self.partition, len(self.engine.streams), start, seconds,
                 max(0, self.replay_until - start), committed)

    def _same_message(self, reader: KafkaConsumer, mark: dict[str, Any]) -> bool:
        """Whether the input message at ``mark``'s offset is the one it was made from (``True`` when it cannot be
        read in time: the other checks of :meth:`start` still apply)."""
        reader.assign([self.tp])
        reader.seek(self.tp, mark["offset"])
        deadline = time.monotonic() + clients.OFFSETS_TIMEOUT_MS / 1000
        while time.monotonic() < deadline:
            for rec in reader.poll(timeout_ms=500).get(self.tp, []):
                # another offset first: the marked message is gone (an aborted transaction's now)
                return rec.offset == mark["offset"] and input_mark(rec.offset, rec.timestamp, rec.value) == mark
        log.warning("partition %d: could not read input offset %d to check it is the message the state last saw",
                    self.partition, mark["offset"])
        return True

    # ------------------------------------------------------------------ process

    def process(self, msg: Any) -> int:
        """Apply one input message and produce its records (none while replaying). Returns records produced."""
        if self.config.exactly_once and not self.in_transaction:
            self._begin()
        raw = msg.value if msg.value is not None else b""
        origin = Origin(msg.topic, msg.partition, msg.offset, msg.key, raw)
        replaying = msg.offset < self.replay_until
        started = time.perf_counter()
        n = 0
        for batch in self.engine.process_batches(raw, f"{msg.topic}:{msg.partition}:{msg.offset}"):
            if not replaying:
                n += self._send(outputs(self.config.topics, batch, origin))
        elapsed = time.perf_counter() - started
        self.work_since_state += elapsed
        self.metrics.process_seconds.labels(self.engine_metrics.last_kind).observe(elapsed)
        if len(self.engine.streams) != len(self._streams):
            dropped = [st for name, st in self._streams.items() if name not in self.engine.streams]
            if dropped and not replaying:
                n += self._send(self._tombstones(dropped))
            self._streams = dict(self.engine.streams)
        self.position = msg.offset + 1
        self._last = msg
        if replaying and self.position == self.replay_until:
            log.info("partition %d: replay caught up at offset %d", self.partition, self.position)
        return n

    def _tombstones(self, dropped: list[StreamState]) -> list[KafkaRecord]:
        """A dropped stream's per-sample keys are deleted from the compacted outputs."""
        topics = []
        if self.engine.config.publish != "none":
            topics.append(self.config.topics.output("prediction"))
            if self.engine.config.encoding != "none":
                topics.append(self.config.topics.output("encoding"))
        return [KafkaRecord(t, f"{st.name}/{sid}".encode(), None, [("streamforest.type", b"tombstone")])
                for st in dropped for t in topics for sid in st.ids]

    def _send(self, records: list[KafkaRecord] | RecordBlock) -> int:
        if isinstance(records, RecordBlock):
            n = self.producer.send_block(records)
            self.metrics.records_out.labels(records.topic).inc(n)
            return n
        per_topic = self.producer.send_records(records, keyless_partition=self.partition)
        # Metrics once per topic and batch: a labelled counter costs about 3 µs per call, per record it adds up.
        for topic, n in per_topic.items():
            self.metrics.records_out.labels(topic).inc(n)
        if per_topic[self.config.topics.errors]:
            self.metrics.dead_letters.inc(per_topic[self.config.topics.errors])
        return len(records)

    # ------------------------------------------------------------------ checkpoint

    def _due(self, consumer: KafkaConsumer, force_state: bool) -> tuple[int, bool] | None:
        """What a checkpoint would commit now: (the offset, whether the state is written too); None: nothing."""
        if self.position is None:
            return None
        # While replaying, the outputs up to replay_until are published already: that is what is committed. A
        # commit of the replay's own position would move the offsets back, and a crash would republish them.
        upto = max(self.position, self.replay_until)
        # A partition that consumed nothing for a whole commit interval and has read all its input snapshots its
        # changed state: the worker has nothing else to do, and a crash while quiet then replays nothing. (Also
        # when only the covered offset is behind: messages that changed nothing, such as dead letters.)
        covered = self.changelog.manifest["offset"] if self.changelog.manifest else 0
        quiet = upto == self.committed_position and self._drained(consumer)
        dirty = bool(self.engine.dirty)
        state_due = (dirty and (force_state or self.work_since_state >= self.config.state_interval)) or (
            quiet and (dirty or covered < self.position))
        if upto == self.committed_position and not state_due and not self.in_transaction:
            return None
        return upto, state_due

    def checkpoint(self, consumer: KafkaConsumer, force_state: bool = False) -> bool:
        """Flush outputs, then the changed state (when due or forced), then the offsets; exactly-once: all in this
        partition's transaction. Returns whether anything was committed."""
        due = self._due(consumer, force_state)
        if due is None:
            return False
        upto, state_due = due
        offsets = {self.tp: OffsetAndMetadata(upto, "", -1)}
        if self.config.exactly_once:
            if not self.in_transaction:
                self._begin()
            if state_due:
                self._write_state()
            self.changelog.write_position(self.producer, upto, self.config.topics.input)
            self.producer.check_delivered()
            group = consumer.group_metadata()
            clients.bounded(lambda: self._commit_transaction(offsets, group), "commit")
            self.in_transaction = False
            if self.producer.disconnects:
                # The broker may have restarted during the commit, and aborted the transaction's records although
                # the commit succeeded: the partition starts again from what is committed.
                raise KafkaConnectionError("the connection to the broker was lost during the transaction: its "
                                           "outcome is not trusted")
        else:
            self._publish(upto, state_due)
            consumer.commit(offsets)
        self.committed(offsets)
        return True

    def prepare_commit(self, consumer: KafkaConsumer, force_state: bool = False) -> dict | None:
        """At-least-once, what :meth:`checkpoint` does before it commits the offsets (every output delivered, the
        state when due or forced, the position record); the offsets to commit, or None when nothing is due. The
        caller commits them, then calls :meth:`committed`."""
        due = self._due(consumer, force_state)
        if due is None:
            return None
        upto, state_due = due
        self._publish(upto, state_due)
        return {self.tp: OffsetAndMetadata(upto, "", -1)}

    def committed(self, offsets: dict) -> None:
        """Record that ``offsets`` (this partition's) are committed."""
        self.committed_position = offsets[self.tp].offset
        self.metrics.commits.inc()

    def _publish(self, upto: int, state_due: bool) -> None:
        """At-least-once: the outputs delivered, then the state (when due) and the position record ``upto``."""
        self.producer.check_delivered()
        if state_due:
            self._write_state()
        self.changelog.write_position(self.producer, upto, self.config.topics.input)
        self.producer.check_delivered()

    def _commit_transaction(self, offsets: dict, group: Any) -> None:
        """The offsets into the transaction and its commit: one helper thread for both (:func:`clients.bounded`)."""
        self.producer.send_offsets_to_transaction(offsets, group)
        self.producer.commit_transaction()

    def _open_producer(self) -> None:
        """The partition's transactional producer: its ``init_transactions`` fences the previous one (another
        worker's, or this task's own) and aborts whatever that left open."""
        self.producer = clients.TrackedProducer(
            clients.producer(self.config, self.config.transactional_id(self.partition)))
        self.producer.init_transactions()

    def _begin(self) -> None:
        if self.producer.disconnects:
            # The broker may have restarted since the last transaction, forgetting the producer's sequence numbers
            # (its next batch would be refused as out of order): a new producer starts afresh.
            log.info("partition %d: the producer lost its connection to the broker: replacing it", self.partition)
            self._close_producer()
            self._open_producer()
        self.producer.begin_transaction()
        self.in_transaction = True

    def _drained(self, consumer: KafkaConsumer) -> bool:
        """Whether everything known to be in the partition has been processed (the last fetch's high watermark;
        an input written by transactions ends with a marker, so such a partition counts as drained one short)."""
        try:
            end = consumer.highwater(self.tp)
        except IllegalStateError:  # revoked: the consumer no longer follows the partition
            return False
        return end is not None and self.position + 1 >= end

    def _write_state(self) -> None:
        if self._last is not None:
            self.mark = input_mark(self._last.offset, self._last.timestamp, self._last.value)
            self._last = None
        written = self.changelog.write(self.producer, self.engine.streams, self.engine.dirty, self.position,
                                       self.config.topics.input, self.mark)
        self.engine.dirty.clear()
        self.work_since_state = 0.0
        self.metrics.state_bytes.labels(str(self.partition)).set(written)
        log.debug("partition %d: state snapshot of %d bytes covering offset %d", self.partition, written,
                  self.position)

    # ------------------------------------------------------------------ stop

    def close(self, abort: bool = False) -> None:
        """Release the producer; an open transaction is aborted (``abort``) or was committed before."""
        if self.producer is None or not self.owns_producer:
            return
        if self.in_transaction:
            try:
                clients.bounded(self.producer.abort_transaction, "abort", seconds=10.0)
                self.metrics.transactions_aborted.inc()
            except Exception as exc:  # fenced or broker gone: the next owner's init_transactions aborts it
                log.warning("partition %d: could not abort the open transaction: %s", self.partition, exc)
            self.in_transaction = False
        self._close_producer()

    def _close_producer(self) -> None:
        try:
            self.producer.close(timeout=5)
        except Exception as exc:
            log.warning("partition %d: producer close: %s", self.partition, exc)
        self.producer = None
