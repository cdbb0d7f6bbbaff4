"""Thin wrappers around kafka-python: the worker's consumer and producers, and topic administration."""

from __future__ import annotations

import functools
import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import MemberToRemove, NewTopic
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.errors import (
    DuplicateSequenceNumberError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    for_code,
)
from kafka.partitioner.default import murmur2
from kafka.producer.transaction_manager import TransactionState
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer.group import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from streamforest.connectors.kafka import blocks
from streamforest.connectors.kafka.config import COMPACTED, OUTPUTS, WorkerConfig
from streamforest.connectors.kafka.outputs import RecordBlock

log = logging.getLogger("streamforest.kafka")

#: Longest wait for offsets or a single record (an idle worker's lag check, a restore's check of the input).
OFFSETS_TIMEOUT_MS = 5_000


def _compression(config: WorkerConfig) -> str | None:
    if config.compression_type == "lz4":
        try:
            import lz4  # noqa: F401  (the codec kafka-python needs for lz4)
        except ImportError:
            log.warning("lz4 is not installed: producing uncompressed (pip install 'streamforest[kafka]')")
            return None
    return config.compression_type


def consumer(config: WorkerConfig, **overrides: Any) -> KafkaConsumer:
    """The group consumer of the input topic: manual commits, cooperative-sticky, committed reads only."""
    settings = dict(
        bootstrap_servers=config.bootstrap_servers, group_id=config.group_id, enable_auto_commit=False,
        auto_offset_reset="earliest", isolation_level="read_committed",
        partition_assignment_strategy=[CooperativeStickyAssignor], max_poll_records=config.max_poll_records,
        session_timeout_ms=config.session_timeout_ms, heartbeat_interval_ms=max(500, config.session_timeout_ms // 5),
        max_poll_interval_ms=config.max_poll_interval_ms, group_instance_id=config.instance_id, **config.client)
    settings.update(overrides)
    c = KafkaConsumer(**settings)
    _tolerate_empty_assignment(c)
    _remember_join_leader(c)
    _heartbeat_on_join(c)
    return c


def _heartbeat_on_join(consumer: KafkaConsumer) -> None:
    """Make ``consumer`` send a heartbeat as soon as a JoinGroup answer gives it its member id and generation.

    Tansu counts only heartbeats as a member's contact, and kafka-python heartbeats only once the member is
    stable; a static member's JoinGroup and SyncGroup take 3 s each there (Tansu holds them), so a member that has
    just joined sends its first heartbeat more than 6 s after the coordinator took it in, and another member's
    heartbeat expires it (a session timeout of 6 s) before it is in the group: it joins again under a new id, and
    again, as long as the timing repeats. The heartbeat's answer is not waited for (a rebalance in progress is
    the expected one); a coordinator that counts joins as contact is not affected."""
    coordinator = getattr(consumer, "_coordinator", None)
    join = getattr(coordinator, "_process_join_group_response", None)
    if join is None or not hasattr(coordinator, "_manager"):
        return

    def joined(response: Any, send_time: float) -> Any:
        result = join(response, send_time)
        coordinator._manager.send(HeartbeatRequest(
            group_id=coordinator.group_id, generation_id=response.generation_id, member_id=response.member_id,
            group_instance_id=coordinator.group_instance_id), node_id=coordinator.coordinator_id)
        return result

    coordinator._process_join_group_response = joined


def _remember_join_leader(consumer: KafkaConsumer) -> None:
    """Keep the leader named by the consumer's last successful JoinGroup answer, and since when its SyncGroup has
    waited (:func:`awaited_leader`)."""
    coordinator = getattr(consumer, "_coordinator", None)
    join = getattr(coordinator, "_process_join_group_response", None)
    sync = getattr(coordinator, "_process_sync_group_response", None)
    if join is None or sync is None:
        return

    def joined(response: Any, send_time: float) -> Any:
        result = join(response, send_time)
        coordinator._streamforest_leader = (response.leader, response.member_id, time.monotonic())
        coordinator._streamforest_syncing = True
        return result

    def synced(response: Any, send_time: float) -> Any:
        coordinator._streamforest_syncing = False
        return sync(response, send_time)

    coordinator._process_join_group_response = joined
    coordinator._process_sync_group_response = synced


def join_leader(consumer: KafkaConsumer) -> tuple[str, float] | None:
    """The member id the consumer's last successful JoinGroup answer named as the group's leader, and the time
    (``time.monotonic()``) of that answer (``None``: no answer yet, or this kafka-python does not let it be read)."""
    found = getattr(getattr(consumer, "_coordinator", None), "_streamforest_leader", None)
    return None if found is None or not found[0] else (found[0], found[2])


def rejoin_requested(consumer: KafkaConsumer) -> bool:
    """Whether the consumer has learnt that its group is rebalancing (a heartbeat's answer, a failed commit) and
    has not joined again yet: its state still reads stable until its next poll sends the JoinGroup."""
    coordinator = getattr(consumer, "_coordinator", None)
    return bool(coordinator is not None and coordinator.need_rejoin())


def awaited_leader(consumer: KafkaConsumer) -> tuple[str, float] | None:
    """The leader another member's SyncGroup waits for, as the consumer's last JoinGroup answer named it, and
    the time (``time.monotonic()``) of that answer; ``None`` when no SyncGroup is in flight or the consumer is
    the leader itself (its own SyncGroup waits on nobody)."""
    coordinator = getattr(consumer, "_coordinator", None)
    found = getattr(coordinator, "_streamforest_leader", None)
    if found is None or not getattr(coordinator, "_streamforest_syncing", False) or not found[0] or \
            found[0] == found[1]:
        return None
    return found[0], found[2]


#: The bytes of an assignment of no partitions (what a SyncGroup answer should carry for a member given nothing).
EMPTY_ASSIGNMENT = ConsumerProtocolAssignment(version=0, assigned_partitions=[], user_data=b"").encode()


def _tolerate_empty_assignment(consumer: KafkaConsumer) -> None:
    """Make ``consumer`` take a SyncGroup answer with no assignment bytes as an assignment of nothing, and join
    again at once. noida-db answers so when a static member restarts into a generation whose leader assigned its
    predecessor's member id; kafka-python would fail to decode the empty bytes and leave its join half done. The
    rejoin (a JoinGroup under the member id just given) makes the coordinator rebalance with this member in it."""
    coordinator = getattr(consumer, "_coordinator", None)
    complete = getattr(coordinator, "_on_join_complete_async", None)
    if complete is None or not hasattr(coordinator, "request_rejoin"):
        return

    async def on_join_complete(generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        if assignment:
            return await complete(generation, member_id, protocol, assignment)
        log.warning("generation %s of group %s gave member %s no assignment at all: joining again", generation,
                    coordinator.group_id, member_id)
        await complete(generation, member_id, protocol, EMPTY_ASSIGNMENT)
        coordinator.request_rejoin()

    coordinator._on_join_complete_async = on_join_complete


class QuietPoller:
    """Polls a consumer without fetching in a loop while nothing comes.

    ``consumer.poll(timeout_ms=T)`` sends a fetch again as soon as one comes back empty. A broker that holds an
    empty fetch for ``fetch_max_wait_ms`` (Apache Kafka) makes that cheap; one that answers at once (noida-db)
    makes it a busy loop, a core spent on an idle partition (measured: 0.9 of a core for an idle worker). Here each
    poll takes what the fetcher has (``timeout_ms=0``) and the caller's thread sleeps between empty ones, the pause
    doubling from ``pauses[0]`` to ``pauses[1]`` seconds while nothing comes: at most that much latency is added when
    records arrive after a quiet spell.
    """

    def __init__(self, consumer: KafkaConsumer, pauses: tuple[float, float] = (0.005, 0.05)) -> None:
        self.consumer = consumer
        self.pauses = pauses
        self.pause = pauses[0]

    def poll(self, timeout: float) -> dict:
        """The records fetched within ``timeout`` seconds, as ``consumer.poll`` returns them (empty: none)."""
        deadline = time.monotonic() + timeout
        while True:
            batch = self.consumer.poll(timeout_ms=0)
            if batch:
                self.pause = self.pauses[0]
                return batch
            left = deadline - time.monotonic()
            if left <= 0:
                return batch
            time.sleep(min(self.pause, left))
            self.pause = min(2 * self.pause, self.pauses[1])


def reader(config: WorkerConfig, **overrides: Any) -> KafkaConsumer:
    """A group-less consumer for assigned partitions (changelog restore, ``tail``), committed reads only."""
    settings = dict(bootstrap_servers=config.bootstrap_servers, group_id=None, enable_auto_commit=False,
                    auto_offset_reset="earliest", isolation_level="read_committed", **config.client)
    settings.update(overrides)
    return KafkaConsumer(**settings)


#: How the worker's producers batch records. ``python -m scenarios.benchmarks.kafka --sweep`` measures the CPU of
#: other choices on the same messages (docs/kafka.md, "Measured").
BATCHING: dict[str, Any] = {"linger_ms": 5, "batch_size": 256 * 1024}


def producer(config: WorkerConfig, transactional_id: str | None = None) -> KafkaProducer:
    """An idempotent producer; transactional when ``transactional_id`` is given."""
    settings: dict[str, Any] = dict(
        bootstrap_servers=config.bootstrap_servers, enable_idempotence=True, acks="all",
        compression_type=_compression(config), **BATCHING,
        max_request_size=config.state_chunk_bytes + 64 * 1024, **config.client)
    if transactional_id is not None:
        settings.update(transactional_id=transactional_id, transaction_timeout_ms=60_000)
    return KafkaProducer(**settings)


#: Longest wait for the broker in a flush, a commit or an abort before the partition is restarted.
BROKER_WAIT_S = 60.0


def bounded(call: Callable[[], Any], what: str, seconds: float = BROKER_WAIT_S) -> Any:
    """``call()`` in a helper thread, given up after ``seconds`` (KafkaTimeoutError). kafka-python's
    ``commit_transaction``/``abort_transaction`` wait without a deadline, forever if its I/O thread died."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    t = threading.Thread(target=run, name=f"streamforest-{what}", daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise KafkaTimeoutError(f"{what}: no answer from the broker in {seconds:.0f} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


class DeliveryFailed(KafkaError):
    """A record sent through a :class:`TrackedProducer` was not delivered (its batch failed)."""


def needs_replacing(producer: KafkaProducer, error: BaseException) -> bool:
    """Whether an idempotent ``producer`` should give way to a new one (a new producer id, sequence numbers from 0)
    after ``error``: one of its records was not delivered, or kafka-python holds it in its fatal state, in which it
    aborts every batch from then on. A broker that restarted may have forgotten the producer's sequence numbers
    (``OutOfOrderSequenceNumber``), and kafka-python's answer, an epoch bump of the same producer id, can fail for
    good: Tansu answered it with ``UnknownError``, after which the producer delivered nothing."""
    if isinstance(error, DeliveryFailed):
        return True
    tm = getattr(producer, "_transaction_manager", None)
    return tm is not None and tm.has_fatal_error()


@functools.lru_cache(maxsize=2**18)
def _key_hash(key: bytes) -> int:
    return murmur2(key) & 0x7FFFFFFF


def key_partition(key: bytes, partitions: list[int]) -> int:
    """The partition of a keyed record among a topic's sorted ``partitions``, as kafka-python's default partitioner
    (and the Java client's) picks it: murmur2 of the key. The hash is remembered per key (the last 2^18 keys):
    republication sends the same keys after every feature, and the pure-Python hash was a third of a send.

    Examples
    --------
    >>> from kafka.partitioner import DefaultPartitioner
    >>> from types import SimpleNamespace
    >>> cluster = SimpleNamespace(topics=lambda: {"t"}, partitions_for_topic=lambda t: {0, 1, 2, 3},
    ...                           available_partitions_for_topic=lambda t: {0, 1, 2, 3})
    >>> keys = [f"s/{i}".encode() for i in range(100)]
    >>> [key_partition(k, [0, 1, 2, 3]) for k in keys] == [
    ...     DefaultPartitioner().partition("t", None, k, None, None, cluster) for k in keys]
    True
    """
    return partitions[_key_hash(key) % len(partitions)]


#: The states of a transactional producer in which batches of an open transaction may be on their way.
OPEN_TRANSACTION = (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION,
                    TransactionState.ABORTABLE_ERROR, TransactionState.ABORTING_TRANSACTION)


#: Per kafka-python producer: the batches a broker answered with DUPLICATE_SEQUENCE_NUMBER, as (topic-partition,
#: records, attempts) (:func:`_watch_duplicates`).
_DUPLICATES: weakref.WeakKeyDictionary[KafkaProducer, list[tuple[Any, int, int]]] = weakref.WeakKeyDictionary()


def _watch_duplicates(producer: KafkaProducer) -> list[tuple[Any, int, int]]:
    """The list of ``producer``'s batches answered with DUPLICATE_SEQUENCE_NUMBER, watched from the first call on.

    kafka-python (like the Java client) completes such a batch as delivered: on Apache Kafka the answer means an
    earlier attempt of the batch was written. A broker can give it to a batch it never wrote: Tansu 0.6 counts a
    batch's sequence numbers before it stores the batch, and a store that fails or is retried after that count
    answers the batch (or its retry) as a duplicate, and the records are nowhere. A record is delivered when the broker
    says it wrote it, so :meth:`TrackedProducer.check_delivered` fails after such an answer, and the partitions
    publish again from their committed state (a duplicate, where the broker had written it, is what at-least-once
    allows; exactly-once aborts the transaction)."""
    found = _DUPLICATES.get(producer)
    if found is not None:
        return found
    found = _DUPLICATES[producer] = []
    try:
        sender = producer._sender
        complete = sender._complete_batch
    except AttributeError:
        log.warning("this kafka-python's producer internals are not those TrackedProducer watches: a batch a broker "
                    "answers as a duplicate counts as delivered")
        return found

    def complete_batch(batch: Any, response: Any) -> Any:
        if response.error_code == DuplicateSequenceNumberError.errno:
            found.append((batch.topic_partition, batch.record_count, batch.attempts))
            log.warning("the broker answered a batch of %d records to %s (attempt %d) with DUPLICATE_SEQUENCE_NUMBER: "
                        "not counted as delivered", batch.record_count, batch.topic_partition, batch.attempts + 1)
        return complete(batch, response)

    sender._complete_batch = complete_batch
    return found


class TrackedProducer:
    """A producer that keeps the delivery futures of what it sent since the last :meth:`check_delivered` (one per
    record sent with :meth:`send` or :meth:`send_records`, one per record batch filled by :meth:`send_block`), so
    that a transaction (or an at-least-once commit) goes ahead only when every one of its records was delivered:
    kafka-python can otherwise commit a transaction after one of its batches failed (e.g. a broker restart that
    forgot the producer's sequence numbers), or count as delivered a batch the broker answered as a duplicate
    (:func:`_watch_duplicates`)."""

    def __init__(self, producer: KafkaProducer) -> None:
        self.producer = producer
        self.futures: list[Any] = []
        #: Broker connections of this producer lost so far (a transaction that saw one is not trusted).
        self.disconnects = 0
        self.duplicates = _watch_duplicates(producer)
        self.bulk = blocks.supported(producer)
        if not self.bulk:
            log.warning("this kafka-python's producer internals are not those blocks.append_block writes to: "
                        "sending record by record")
        if producer.config.get("transactional_id"):
            self._watch_connections()

    def _watch_connections(self) -> None:
        """Count every lost connection of the producer to a broker or its transaction coordinator, and fail an open
        transaction the moment one is lost, in the I/O thread, before a batch of it can go out on a new connection. A
        broker that restarted may have forgotten the transaction (noida-db does, and aborts what it wrote before):
        records sent in it afterwards are never ended by a marker, and hide every later record of their partitions
        from committed readers. The transaction is then aborted, and its partition restarted from its committed
        state.

        Failing the transaction is not enough: the batches in flight on the lost connection are queued again for
        a retry by the time the connection reports its loss (it fails its requests first), and kafka-python resends
        them on the new connection, even while the transaction is aborted (it resends a retried batch until its
        fate is known). So every batch not yet acknowledged is aborted as well, and this producer retries no batch
        from then on: its next transaction is a new producer's (:meth:`PartitionTask._begin`)."""
        try:
            manager = self.producer._sender._client._manager
            sender, accumulator = self.producer._sender, self.producer._accumulator
            tm = self.producer._transaction_manager
            get_connection, conns, can_retry = manager.get_connection, manager._conns, sender._can_retry
            is_bootstrap = manager.cluster.is_bootstrap
        except AttributeError:
            log.warning("this kafka-python's producer internals are not those TrackedProducer watches: a "
                        "transaction open across a broker restart is not detected")
            return
        watched: dict[Any, Any] = {}  # node id -> its connection being watched
        lost_mid_transaction: list[KafkaConnectionError] = []

        def lost(node_id: Any, _: Any) -> None:
            self.disconnects += 1
            with tm._lock:
                state = tm._current_state
                if state not in OPEN_TRANSACTION:
                    return
                error = KafkaConnectionError(f"connection to broker {node_id} lost mid-transaction")
                lost_mid_transaction.append(error)
                # Committing too: the commit flushes the transaction's last batches before its EndTxn, and those
                # would go out on the new connection. A transaction already failing or aborting keeps its state.
                if state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION):
                    log.warning("producer %s: connection to broker %s lost mid-transaction: the transaction is "
                                "aborted", tm.transactional_id, node_id)
                    tm.transition_to_abortable_error(error)
            accumulator.abort_batches(error)

        def retry_unless_lost(batch: Any, error_cls: Any) -> bool:
            # A batch failing after the loss (its send failed at once, say) is not queued for a retry either.
            return not lost_mid_transaction and can_retry(batch, error_cls)

        def watch(node_id: Any, conn: Any) -> Any:
            # Brokers and transaction coordinators (kafka-python's own connection, ``coordinator-<id>``): a
            # transaction's partitions may be added before the restart and its first batch, on a broker connection
            # opened afterwards, sent after it. Not the bootstrap connection: it is closed once the cluster's
            # metadata is known.
            if not is_bootstrap(node_id) and watched.get(node_id) is not conn:
                watched[node_id] = conn
                conn.close_future.add_both(functools.partial(lost, node_id))
            return conn

        def watching(node_id: Any, *args: Any, **kwargs: Any) -> Any:
            return watch(node_id, get_connection(node_id, *args, **kwargs))

        for node_id, conn in list(conns.items()):
            watch(node_id, conn)
        manager.get_connection = watching
        sender._can_retry = retry_unless_lost

    def send(self, *args: Any, **kwargs: Any) -> Any:
        future = self.producer.send(*args, **kwargs)
        self.futures.append(future)
        return future

    def send_records(self, records: Iterable[tuple[str, bytes | None, bytes | None, list]], *,
                     keyless_partition: int) -> Counter[str]:
        """Send ``(topic, key, value, headers)`` records; returns how many went to each topic. A keyed record goes
        to the partition kafka-python's default partitioner picks (:func:`key_partition`), a keyless one (a dead
        letter of an unkeyed message) to ``keyless_partition`` modulo the topic's partitions: both given
        explicitly. The sticky partitioner can leave a partition in a transaction with no record, which noida-db
        half-commits after a crash (docs/kafka.md)."""
        send, futures = self.producer.send, self.futures
        partitions: dict[str, list[int]] = {}  # per call: a topic's partitions can grow between calls
        per_topic: Counter[str] = Counter()
        for topic, key, value, headers in records:
            parts = partitions.get(topic)
            if parts is None:
                parts = partitions[topic] = sorted(self.producer.partitions_for(topic))
            partition = parts[keyless_partition % len(parts)] if key is None else key_partition(key, parts)
            futures.append(send(topic, key=key, value=value, headers=headers, partition=partition))
            per_topic[topic] += 1
        return per_topic

    def send_block(self, block: RecordBlock) -> int:
        """Send a block's records (keyed: each to its :func:`key_partition`) with
        :func:`~streamforest.connectors.kafka.blocks.append_block`, a call per partition; returns how many."""
        if not self.bulk:
            return sum(self.send_records(block.records(), keyless_partition=0).values())
        parts = np.array(sorted(self.producer.partitions_for(block.topic)), dtype=np.int64)
        n = len(block.keys)
        of_record = np.fromiter(map(_key_hash, block.keys), dtype=np.int64, count=n) % len(parts)
        kends = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, block.keys), dtype=np.int64, count=n), out=kends[1:])
        kblob = np.frombuffer(b"".join(block.keys), dtype=np.uint8)
        vblob = np.frombuffer(block.lines.blob, dtype=np.uint8)
        headers = blocks.header_bytes(block.headers)
        for i in np.unique(of_record).tolist():
            order = np.flatnonzero(of_record == i)
            self.futures += blocks.append_block(self.producer, block.topic, int(parts[i]), order, vblob,
                                                block.lines.ends, kblob, kends, headers)
        return n

    def flush(self, timeout: float = BROKER_WAIT_S) -> None:
        self.producer.flush(timeout=timeout)

    def check_delivered(self) -> None:
        """Flush, then raise a KafkaError if a record sent since the last check was not acknowledged
        (:class:`DeliveryFailed` if it failed, or if the broker ever answered one of the producer's batches as a
        duplicate: the producer is not trusted from then on)."""
        self.flush()
        for future in self.futures:
            if not future.is_done:
                raise KafkaTimeoutError("a record was not acknowledged after the flush")
            if future.failed():
                raise DeliveryFailed(f"a record was not delivered: {future.exception!r}")
        if self.duplicates:
            tp, n, attempts = self.duplicates[0]
            raise DeliveryFailed(f"the broker answered a batch of {n} records to {tp} (attempt {attempts + 1}) with "
                                 "DUPLICATE_SEQUENCE_NUMBER: whether it wrote them is unknown")
        self.futures.clear()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.producer, name)


def admin(config: WorkerConfig) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=config.bootstrap_servers, **config.client)


class _GroupAdmin(KafkaAdminClient):
    """An admin client whose DescribeGroups does not ask for the caller's authorized operations: Tansu answers
    operation codes kafka-python has no name for (a ValueError in the response's decoding), and the worker needs
    the members only."""

    def _describe_groups_request(self, group_ids: Any) -> Any:
        return DescribeGroupsRequest(groups=list(group_ids), include_authorized_operations=False)

    def _process_acl_operations(self, obj: dict) -> dict:
        obj["authorized_operations"] = None
        return obj


def group_admin(config: WorkerConfig) -> KafkaAdminClient:
    """The admin client of :func:`group_members` and :func:`remove_members`."""
    return _GroupAdmin(bootstrap_servers=config.bootstrap_servers, request_timeout_ms=OFFSETS_TIMEOUT_MS,
                       **config.client)


@dataclass(frozen=True)
class Member:
    """A member of a consumer group as its coordinator describes it.

    Parameters
    ----------
    member_id
        The id the coordinator gave the member.
    instance_id
        Its ``group.instance.id`` (static membership); ``None`` for a dynamic member or when not reported.
    partitions
        The partitions of the topic asked about that the coordinator assigned to it; ``None`` when the coordinator
        does not report assignments (Tansu reports members only).
    """

    member_id: str
    instance_id: str | None = None
    partitions: frozenset[int] | None = None


def group_members(client: KafkaAdminClient, group_id: str, topic: str) -> list[Member]:
    """The members of ``group_id`` (DescribeGroups), with their assigned partitions of ``topic`` where reported."""
    group = client.describe_groups([group_id])[group_id]
    if group.get("error"):
        raise KafkaError(f"describing group {group_id} failed: {group['error']}")
    members = []
    for m in group["members"]:
        assignment = m.get("member_assignment")
        partitions = None
        if isinstance(assignment, dict):
            partitions = frozenset(p for t in assignment.get("assigned_partitions") or [] if t["topic"] == topic
                                   for p in t["partitions"])
        members.append(Member(m["member_id"], m.get("group_instance_id"), partitions))
    return members


def remove_members(client: KafkaAdminClient, group_id: str, members: Iterable[Member]) -> dict[str, str]:
    """Remove ``members`` from ``group_id`` in one LeaveGroup v3+ request (KIP-345's batch leave, what
    ``kafka-consumer-groups --delete`` and the Java AdminClient's ``removeMembersFromConsumerGroup`` send): the
    coordinator rebalances at once instead of waiting for a dead static member. Returns each member id's error
    name (``NoError``: removed)."""
    leaving = [MemberToRemove(member_id=m.member_id, group_instance_id=m.instance_id) for m in members]
    if not leaving:
        return {}
    result = client.remove_group_members(group_id, leaving)
    return {str(k): v.__name__ for k, v in result.items()}


def clear_departed_leader(client: KafkaAdminClient, group_id: str, topic: str, leader: str,
                          session_timeout_ms: int) -> str:
    """Make a coordinator forget a leader ``leader`` that is no longer a member of ``group_id`` (Tansu 0.6).

    Tansu keeps a departed member's id as the leader of a forming group (expired while the group was formed and
    the group changed afterwards, or removed by a LeaveGroup while it formed): no member is elected, and every
    SyncGroup is answered "rebalance in progress", for ever (``python -m scenarios.kafka_dead_leader``). A formed
    group forgets a leader that a LeaveGroup leaves outside its members, and only a leader's SyncGroup forms a
    group. So this joins the group once as ``leader`` (a dynamic JoinGroup under that member id: the coordinator
    takes it back as a member and answers it as the leader), sends the leader's SyncGroup, giving every member an
    assignment of nothing (the group forms), and a LeaveGroup for it: the formed group loses its leader, starts
    forming again with none, and elects the next member that joins. Each member's next heartbeat or join finds the
    new generation and joins it; the empty assignments are never used by a member that has joined since. A
    coordinator that refuses the JoinGroup or answers it with another leader gets the LeaveGroup at once. When
    the SyncGroup is refused (a member joined in between), the member stays silent for the session timeout
    before its LeaveGroup: Tansu expires a silent leader, and clears it with the expiry. The JoinGroup offers the
    workers' protocol (cooperative-sticky) and kafka-python's default (range): a coordinator refuses a member that
    shares none with the group. Returns what happened, for the log.
    """
    async def join_as_leader() -> tuple[Any, Any]:
        node = await client._find_coordinator_id(group_id)
        timeout_ms = 2 * session_timeout_ms + 5000
        joined = await client._manager.send(JoinGroupRequest(
            group_id=group_id, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=session_timeout_ms,
            member_id=leader, group_instance_id=None, protocol_type="consumer",
            protocols=[(a.name, a().metadata({topic})) for a in (CooperativeStickyAssignor, RangePartitionAssignor)],
            max_version=7), node_id=node, request_timeout_ms=timeout_ms)
        if joined.error_code != 0 or joined.leader != leader:
            return joined, None
        synced = await client._manager.send(SyncGroupRequest(
            group_id=group_id, generation_id=joined.generation_id, member_id=leader, group_instance_id=None,
            protocol_type="consumer", protocol_name=joined.protocol_name,
            assignments=[(m.member_id, EMPTY_ASSIGNMENT) for m in joined.members], max_version=5),
            node_id=node, request_timeout_ms=timeout_ms)
        return joined, synced

    joined, synced = client._manager.run(join_as_leader)
    elected = joined.error_code == 0 and joined.leader == leader
    formed = synced is not None and synced.error_code == 0
    if elected and not formed:
        time.sleep(session_timeout_ms / 1000 + 1.0)
    try:
        left = remove_members(client, group_id, [Member(leader)]).get(leader, "no answer")
    except KafkaError as exc:  # a top-level UnknownMemberId: nothing left to remove
        left = type(exc).__name__
    what = f"JoinGroup as {leader}: {for_code(joined.error_code).__name__}, "
    if not elected:
        what += f"leader {joined.leader!r}; "
    elif formed:
        what += "elected; SyncGroup: NoError (formed); "
    else:
        what += f"elected; SyncGroup: {for_code(synced.error_code).__name__}; after the session timeout, "
    return what + f"LeaveGroup: {left}"


def ensure_topics(config: WorkerConfig) -> None:
    """Check that every topic exists; with ``create_topics``, create the missing ones (compaction where it
    belongs, the input's partition count for outputs and changelog). Raises ValueError naming what is missing."""
    t = config.topics
    wanted = [t.input, *t.all_outputs(), t.state]
    client = admin(config)
    try:
        existing = set(client.list_topics())
        missing = [name for name in wanted if name not in existing]
        if missing and not config.create_topics:
            raise ValueError(f"topics {missing} do not exist: create them (compacted: "
                             f"{[f'{t.prefix}.{c}' for c in COMPACTED]}) or pass --create-topics")
        if missing:
            n = config.partitions
            if t.input in existing:
                n = len(client.describe_topics([t.input])[0]["partitions"])
            new = []
            for name in missing:
                suffix = name.removeprefix(f"{t.prefix}.") if name != t.input else "input"
                policy = "compact" if suffix in COMPACTED else "delete"
                assert suffix in (*OUTPUTS, "state", "input")
                new.append(NewTopic(name, n, 1, topic_configs={"cleanup.policy": policy}))
            client.create_topics(new)
            log.info("created topics %s with %d partitions", missing, n)
    finally:
        client.close()
