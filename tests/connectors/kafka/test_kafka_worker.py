"""The worker against a real broker: same records as the embedded runtime, crashes, scale-out, bad input."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import uuid

import orjson
import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError
from kafka_harness import (
    ROOT,
    WorkerProcess,
    assert_same_model,
    create_topics,
    embedded,
    final_streams,
    outputs_by_stream,
    produce,
    read_topic,
)

from streamforest.connectors.kafka import Worker, clients
from streamforest.connectors.kafka.config import DEAD_LETTER_CAP, Topics, WorkerConfig
from streamforest.connectors.kafka.testing import LocalBroker, wait_committed, wait_snapshots
from streamforest.engine.core import EngineConfig
from streamforest.engine.produce import produce_messages

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

POISON = [
    b'{"v": 1, "type": "samples", "stream": "a", "samples": [',       # not JSON
    b'{"v": 1, "type": "feature", "stream": "nobody", "name": "x", "ids": ["1"], "values": [1]}',  # unknown stream
    b"\xff\xfe not utf-8",
    b'{"v": 1, "type": "label", "stream": "b", "id": "' + b"9" * (DEAD_LETTER_CAP + 100) + b'", "label": 1}',
]


def _messages() -> list[bytes]:
    """Five streams of two bundled datasets, interleaved, with poison messages in the middle."""
    per_stream = []
    for stream, name in (("a", "banknote-authentication"), ("b", "banknote-authentication"),
                         ("c", "blood-transfusion-service-center"), ("d", "blood-transfusion-service-center"),
                         ("e", "banknote-authentication")):
        msgs, _, _ = produce_messages(name, "target", stream, seed=ord(stream))
        per_stream.append([orjson.dumps(m) for m in msgs])
    lines = []
    for k in range(max(map(len, per_stream))):
        lines += [s[k] for s in per_stream if k < len(s)]
        if k == 2:
            lines += POISON
    return lines


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The embedded runtime (``streamforest run``) on the same messages: outputs and final streams."""
    lines = _messages()
    return lines, *embedded(tmp_path_factory.mktemp("embedded"), lines)


def _wait_records(bootstrap: str, topic: str, n: int, worker: WorkerProcess, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while len(read_topic(bootstrap, topic)) < n:
        assert worker.proc.poll() is None, worker.log()
        assert time.monotonic() < deadline, f"fewer than {n} records on {topic} in {timeout:.0f} s"
        time.sleep(0.2)


def _wait_snapshot(bootstrap: str, prefix: str, worker: WorkerProcess, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not final_streams(bootstrap, prefix):
        assert worker.proc.poll() is None, worker.log()
        assert time.monotonic() < deadline, f"no state snapshot on {prefix}.state in {timeout:.0f} s"
        time.sleep(0.2)


def _run_to_end(bootstrap: str, prefix: str, *extra: str) -> WorkerProcess:
    w = WorkerProcess(bootstrap, prefix, "--exit-when-idle", "4", *extra)
    assert w.wait() == 0, w.log()
    return w


def test_outputs_equal_embedded_runtime(broker, reference):
    lines, (want, want_errors), want_streams = reference
    prefix = "eq"
    produce(broker.bootstrap, create_topics(broker.bootstrap, prefix), lines)
    _run_to_end(broker.bootstrap, prefix)
    got, got_errors = outputs_by_stream(broker.bootstrap, prefix)
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], key
    truncated = [(reason, raw[:DEAD_LETTER_CAP]) for reason, raw in want_errors]
    assert got_errors == sorted(truncated)
    assert len(got_errors) == len(POISON)
    assert_same_model(final_streams(broker.bootstrap, prefix), want_streams)


def test_dead_letters_carry_kip1034_headers(broker, reference):
    # Runs after the equality test in the same module: reads its errors topic.
    recs = read_topic(broker.bootstrap, "eq.errors")
    assert recs, "the equality test must have run first"
    for r in recs:
        h = dict(r.headers)
        assert h["__streams.errors.exception"] == b"Refused"
        assert h["__streams.errors.topic"] == b"eq.input"
        assert int(h["__streams.errors.partition"]) in range(4)
        # Keyed ones by the input's key, keyless ones by the input partition's number (never the sticky
        # partitioner's choice: it can leave a partition in the transaction with no record): the same partition.
        assert r.partition == int(h["__streams.errors.partition"]), (r.partition, h)
        assert int(h["__streams.errors.offset"]) >= 0
    long = [r for r in recs if len(r.value) == DEAD_LETTER_CAP]
    assert len(long) == 1 and int(dict(long[0].headers)["streamforest.original_bytes"]) == len(POISON[3])


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_sigkill_and_restart(broker, reference, guarantee):
    """SIGKILL right after joining (mid-restore), then once 3 and once 10 feedback records are committed
    (mid-processing, state snapshots behind); then run to the end."""
    lines, (want, want_errors), want_streams = reference
    prefix = f"kill-{guarantee}"
    produce(broker.bootstrap, create_topics(broker.bootstrap, prefix), lines)
    args = ("--guarantee", guarantee, "--commit-interval", "0.3", "--state-interval", "0.2", "--instance-id", "w1")
    logs = []
    for when in ("joined group", 3, 10):
        w = WorkerProcess(broker.bootstrap, prefix, *args)
        if isinstance(when, str):
            w.wait_for(when)
        else:
            _wait_records(broker.bootstrap, f"{prefix}.feedback", when, w)
        if when == 10:
            # How much engine work a snapshot waits for is timed (--state-interval): the last kill waits for one,
            # so that the run after it has state to restore whatever the machine's speed.
            _wait_snapshot(broker.bootstrap, prefix, w)
        w.kill()
        logs += w.lines
    logs += _run_to_end(broker.bootstrap, prefix, *args).lines
    # The restarts did restore state from the changelog (not only replay the input from the start).
    assert any(re.search(r"restored [1-9]\d* streams", line) for line in logs), "\n".join(logs)
    got, got_errors = outputs_by_stream(broker.bootstrap, prefix)
    assert sorted(got) == sorted(want)
    for key in want:
        if guarantee == "exactly-once":
            assert got[key] == want[key], key  # each record once
        else:
            assert set(want[key]) <= set(got[key]), key  # nothing missing
    if guarantee == "exactly-once":
        assert len(got_errors) == len(want_errors)
    assert_same_model(final_streams(broker.bootstrap, prefix), want_streams)


def test_quiet_partition_snapshots_its_state(broker, reference):
    """A worker that has read all its input snapshots the state after a quiet commit interval (long before the
    state interval is due, and without shutting down): killed then, its restart replays nothing."""
    lines, (want, _), want_streams = reference
    prefix = "quiet"
    topic = create_topics(broker.bootstrap, prefix)
    produce(broker.bootstrap, topic, lines)
    args = ("--commit-interval", "0.3", "--state-interval", "3600", "--instance-id", "w1")
    w = WorkerProcess(broker.bootstrap, prefix, *args)
    def alive() -> None:
        assert w.proc.poll() is None, w.log()

    wait_snapshots(WorkerConfig(bootstrap_servers=broker.bootstrap, topics=Topics(topic, prefix)), timeout=180,
                   check=alive)
    w.kill()
    again = _run_to_end(broker.bootstrap, prefix, *args)
    replays = [int(m.group(1)) for line in again.lines if (m := re.search(r"replaying (\d+) messages", line))]
    assert len(replays) == 4 and not any(replays), again.log()
    got, _ = outputs_by_stream(broker.bootstrap, prefix)
    for key in want:
        assert got[key] == want[key], key
    assert_same_model(final_streams(broker.bootstrap, prefix), want_streams)


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset per partition (0 where none is: an empty partition's first commit is 0)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: c.committed(TopicPartition(topic, p)) or 0 for p in range(4)}
    finally:
        c.close()


def test_commits_during_a_replay_never_move_offsets_back(broker, reference):
    """All input committed, no state snapshot (neither the state interval nor a quiet one): a restart replays everything
    without republishing. Commits due during that replay keep the committed offsets (they do not record the replay's
    position), so a crash mid-replay republishes nothing."""
    lines, (want, _), want_streams = reference
    prefix = "replay"
    topic = create_topics(broker.bootstrap, prefix)
    produce(broker.bootstrap, topic, lines)
    args = ("--state-interval", "3600", "--instance-id", "w1")
    # One commit, when the last message is processed (no commit interval falls due), and killed then: no partition
    # has committed before, so none is quiet yet and none has snapshotted its state.
    w = WorkerProcess(broker.bootstrap, prefix, "--commit-interval", "3600", "--commit-every", str(len(lines)), *args)

    def alive() -> None:
        assert w.proc.poll() is None, w.log()

    wait_committed(broker.bootstrap, prefix, topic, timeout=180, check=alive)
    w.kill()
    before = _committed(broker.bootstrap, prefix, topic)
    w = WorkerProcess(broker.bootstrap, prefix, "--commit-interval", "0.01", *args)
    # Killed when the first partition has caught up: the others are still replaying, with commits every 10 ms.
    w.wait_for("replay caught up")
    w.kill()
    replaying = [line for line in w.lines if re.search(r"replaying [1-9]\d* messages", line)]
    caught_up = [line for line in w.lines if "replay caught up" in line]
    assert len(caught_up) < len(replaying), "killed after the replay: nothing tested\n" + w.log()
    assert _committed(broker.bootstrap, prefix, topic) == before, w.log()
    _run_to_end(broker.bootstrap, prefix, "--commit-interval", "0.3", *args)
    got, _ = outputs_by_stream(broker.bootstrap, prefix)
    for key in want:
        assert got[key] == want[key], key  # each record once
    assert_same_model(final_streams(broker.bootstrap, prefix), want_streams)


def test_missing_topics_refused_without_create_topics(broker):
    proc = subprocess.run([sys.executable, "-m", "streamforest.cli", "kafka", "run", "--bootstrap-servers",
                           broker.bootstrap, "--topic-prefix", "absent", "--input-topic", "absent.input",
                           "--exit-when-idle", "2"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1
    assert "do not exist" in proc.stderr and "absent.state" in proc.stderr and "--create-topics" in proc.stderr


@pytest.mark.parametrize("case", ["fewer", "more"])
def test_recreated_input_topic_is_read_from_its_beginning(broker, reference, tmp_path, case):
    """The input topic is deleted and created again: the worker logs it, keeps the state, and reads the new topic
    from its beginning (its old offsets would skip new messages). With fewer messages than the state covers, the
    offsets show it; with more, the message at the last covered offset is not the one the state saw."""
    lines, _, _ = reference
    prefix = f"recreate-{case}"
    cut = len(lines) // 2 if case == "fewer" else 12
    topic = create_topics(broker.bootstrap, prefix)
    produce(broker.bootstrap, topic, lines[:cut])
    _run_to_end(broker.bootstrap, prefix)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.delete_topics([topic])
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(topic, 4, 1)])
            break
        except TopicAlreadyExistsError:  # the deletion is still under way
            assert time.monotonic() < deadline, "the input topic was not deleted in 60 s"
            time.sleep(0.5)
    admin.close()
    new = lines[cut:cut + 5] if case == "fewer" else lines[cut:]
    produce(broker.bootstrap, topic, new)
    w = _run_to_end(broker.bootstrap, prefix)
    told = "beyond the input's end" if case == "fewer" else "is not the one the state last saw"
    assert any(told in line and "topic recreated?" in line for line in w.lines), w.log()

    # The model is the one the embedded runtime builds from the old messages and then the new ones.
    assert_same_model(final_streams(broker.bootstrap, prefix), embedded(tmp_path, lines[:cut] + new)[1])


def test_broker_restart_mid_run(broker, reference):
    """The broker is stopped and started again while a worker runs, between transactions (the next test restarts it
    with transactions in flight); the worker reconnects, rejoins, and the second half of the input gives the
    uninterrupted run's records."""
    lines, (want, _), want_streams = reference
    prefix = f"restart-{uuid.uuid4().hex[:8]}"  # its own topics in every run (``--count`` repeats it)
    half = len(lines) // 2
    topic = create_topics(broker.bootstrap, prefix)
    produce(broker.bootstrap, topic, lines[:half])
    w = WorkerProcess(broker.bootstrap, prefix, "--exit-when-idle", "10", "--commit-interval", "0.3",
                      "--state-interval", "0.2", "--instance-id", "w1")
    def alive() -> None:
        assert w.proc.poll() is None, w.log()

    # Committed, and quiet: the worker snapshotted its state after a quiet commit interval, so no transaction is
    # open when the broker stops.
    wait_committed(broker.bootstrap, prefix, topic, timeout=180, check=alive)
    wait_snapshots(WorkerConfig(bootstrap_servers=broker.bootstrap, topics=Topics(topic, prefix)), timeout=180,
                   check=alive)
    broker.restart(down=2)
    produce(broker.bootstrap, topic, lines[half:])
    assert w.wait() == 0, w.log()
    got, _ = outputs_by_stream(broker.bootstrap, prefix)
    for key in want:
        assert got[key] == want[key], f"{key}\n{w.log()}"
    assert_same_model(final_streams(broker.bootstrap, prefix), want_streams)


def test_consumer_takes_the_group_timeouts(broker):
    """``--session-timeout`` and ``--max-poll-interval`` reach the group consumer (the latter was fixed at 600 s)."""
    config = WorkerConfig(bootstrap_servers=broker.bootstrap, session_timeout_ms=7_000, max_poll_interval_ms=45_000)
    c = clients.consumer(config)
    try:
        assert (c.config["session_timeout_ms"], c.config["max_poll_interval_ms"]) == (7_000, 45_000)
    finally:
        c.close()


def test_broker_restart_with_a_transaction_in_flight(broker, reference):
    """The broker is stopped and started again while the worker is mid-run, its transactions open (a commit every
    0.3 s, most of the input waiting): the transaction in flight is aborted and its partition restored and replayed,
    so a read_committed reader sees every record exactly once and the uninterrupted run's final model."""
    lines, (want, want_errors), want_streams = reference
    prefix = f"restart-txn-{uuid.uuid4().hex[:8]}"  # its own topics in every run (``--count`` repeats it)
    produce(broker.bootstrap, create_topics(broker.bootstrap, prefix), lines)
    w = WorkerProcess(broker.bootstrap, prefix, "--exit-when-idle", "10", "--commit-interval", "0.3",
                      "--state-interval", "0.2", "--instance-id", "w1")
    # Every partition started: the worker is on its first messages, its transactions open.
    w.wait_for("restored", count=4)
    time.sleep(0.5)
    broker.restart(down=2)
    assert w.wait() == 0, w.log()
    got, got_errors = outputs_by_stream(broker.bootstrap, prefix)
    assert sorted(got) == sorted(want), w.log()
    for key in want:
        assert got[key] == want[key], f"{key}\n{w.log()}"  # each record once
    assert len(got_errors) == len(want_errors), w.log()
    assert_same_model(final_streams(broker.bootstrap, prefix), want_streams)
    assert any("mid-transaction" in line for line in w.lines), "no transaction was in flight\n" + w.log()


def test_a_batch_in_flight_when_the_broker_dies_is_not_resent(tmp_path):
    """A transaction's batch whose produce request is unanswered when the broker dies is not resent on the new
    connection after the broker's restart: noida-db, having forgotten the transaction, would take it into a
    transaction no marker ever ends, hiding every later record of the partition. kafka-python queues such a batch
    again for a retry before the lost connection is reported (and resends it even while the transaction aborts):
    the producer aborts it, so a read_committed reader sees the next producer's committed record."""
    b = LocalBroker(tmp_path / "data")
    b.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic("t", 1, 1)])
        admin.close()
        config = WorkerConfig(bootstrap_servers=b.bootstrap)
        p = clients.TrackedProducer(clients.producer(config, "tx"))
        p.init_transactions()
        p.begin_transaction()
        p.send("t", b"before", partition=0).get(timeout=30)
        time.sleep(3)  # noida-db writes to disk behind its answers: the topic and the record survive the SIGKILL
        b.freeze()
        in_flight = p.send("t", b"in flight", partition=0)
        # Its batch taken out of the accumulator for a connection: sent, or buffered by a connection not yet ready,
        # unanswered either way (the connection fails both when it is lost).
        accumulator = p.producer._accumulator
        deadline = time.monotonic() + 30
        while not any(batch.drained is not None for batch in accumulator._incomplete.all()):
            assert time.monotonic() < deadline, "the batch never left the accumulator"
            time.sleep(0.05)
        assert not in_flight.is_done
        b.kill()
        b.start()
        with pytest.raises(KafkaError, match="lost mid-transaction"):
            in_flight.get(timeout=30)
        clients.bounded(p.abort_transaction, "abort", seconds=30)
        p.close(timeout=10)
        p = clients.TrackedProducer(clients.producer(config, "tx"))
        p.init_transactions()
        p.begin_transaction()
        p.send("t", b"after", partition=0).get(timeout=30)
        p.commit_transaction()
        p.close(timeout=10)
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, isolation_level="read_committed", enable_auto_commit=False)
        tp = TopicPartition("t", 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline:
            seen += [r.value for recs in c.poll(timeout_ms=300).values() for r in recs]
        c.close()
        assert seen == [b"after"]
    finally:
        b.stop()


def test_a_batch_the_broker_answers_as_a_duplicate_is_not_delivered(tansu):
    """Tansu answers DUPLICATE_SEQUENCE_NUMBER to a batch whose sequence numbers it counted before (here: the
    producer's sequence for the partition rewound) and writes nothing; kafka-python completes the batch as delivered.
    The producer's delivery check fails instead, naming the answer: the partitions publish again from their committed
    state."""
    admin = KafkaAdminClient(bootstrap_servers=tansu.bootstrap)
    topic = f"duplicate-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    p = clients.TrackedProducer(clients.producer(WorkerConfig(bootstrap_servers=tansu.bootstrap)))
    try:
        tp = TopicPartition(topic, 0)
        p.send(topic, b"first", partition=0)
        p.check_delivered()
        p._transaction_manager.reset_sequence_for_partition(tp)
        dropped = p.send(topic, b"second", partition=0)
        with pytest.raises(clients.DeliveryFailed, match="DUPLICATE_SEQUENCE_NUMBER"):
            p.check_delivered()
        assert dropped.succeeded()  # what kafka-python alone would have believed
    finally:
        p.close(timeout=10)
    assert [r.value for r in read_topic(tansu.bootstrap, topic, "read_uncommitted")] == [b"first"]


def test_a_producer_that_cannot_deliver_is_replaced(broker, reference):
    """At-least-once, the worker's shared producer is put mid-run in kafka-python's fatal state, where it aborts every
    batch from then on: where Tansu's ``UnknownError`` answer to the producer's epoch bump left it after a broker
    restart (its restarted broker had forgotten the producer's sequence numbers). The worker replaces the producer
    and starts every partition again on the new one: every record arrives, and the final model is the
    uninterrupted run's. (The worker runs on a thread of this process, so that its producer can be reached.)"""
    lines, (want, _), want_streams = reference
    prefix = "failed-producer"
    half = len(lines) // 2
    topic = create_topics(broker.bootstrap, prefix)
    produce(broker.bootstrap, topic, lines[:half])
    worker = Worker(WorkerConfig(bootstrap_servers=broker.bootstrap, group_id=prefix, topics=Topics(topic, prefix),
                                 guarantee="at-least-once", commit_interval=0.3, state_interval=0.2,
                                 exit_when_idle=5.0),
                    EngineConfig(forest={"random_state": 0, "trees_per_generation": 5}))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while len(worker.tasks) < 4 or worker.producer is None:
        assert thread.is_alive() and time.monotonic() < deadline, "the worker did not start its partitions"
        time.sleep(0.05)
    failed = worker.producer
    failed._transaction_manager.transition_to_fatal_error(KafkaError("injected: the producer cannot deliver"))
    produce(broker.bootstrap, topic, lines[half:])
    thread.join(240)
    if thread.is_alive():
        worker.stop()
        thread.join(60)
        pytest.fail("the worker did not finish in 240 s with a producer that cannot deliver")
    assert worker.producer is not failed
    got, _ = outputs_by_stream(broker.bootstrap, prefix)
    assert sorted(got) == sorted(want)
    for key in want:
        assert set(want[key]) <= set(got[key]), key
    assert_same_model(final_streams(broker.bootstrap, prefix), want_streams)
