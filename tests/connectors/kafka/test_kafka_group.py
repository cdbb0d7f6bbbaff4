"""The consumer group's paths: members that die, come back or join, and broker restarts.

Every path runs on Tansu (``tansu``, at-least-once: its read_committed shows aborted records, so every record at
least once and the final model exact); the static members' paths and a dynamic member's failover and restart also on
noida-db (``broker``, exactly-once). Where a coordinator leaves the group waiting, the worker's own defence
(``--stall-timeout``) ends the wait: noida-db never expires a SIGKILLed member, and both brokers can elect a dead
member as the group's leader (docs/kafka.md, ``python -m scenarios.kafka_dead_leader``). Tansu expires dead
dynamic members by itself, so its dynamic tests check that no worker had to defend itself (no ``stalled`` line).
A restarted dynamic member removes its predecessor (``--member-file``): noida-db would keep the dead one and leave
the joins unanswered (docs/kafka.md).

No test restarts a worker that waits on its group, and none moves the workers to a fresh group.
"""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

import orjson
import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka_harness import (
    WorkerProcess,
    assert_same_model,
    broker_warnings,
    create_topics,
    describe_input,
    describe_missing,
    embedded,
    final_streams,
    outputs_by_stream,
    produce,
    read_topic,
    wait_all,
)

from streamforest.connectors.kafka.clients import key_partition
from streamforest.connectors.kafka.testing import wait_committed
from streamforest.engine.produce import produce_messages

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

STREAMS = "abcdefgh"
#: Short group timeouts keep the tests lean (6 s: noida-db's shortest session); the stall timeout is well above a
#: healthy rebalance on either broker; the rebalance timeout is short because Tansu waits that long for a dead
#: static member.
STALL_TIMEOUT = 20
GROUP = ("--session-timeout", "6", "--max-poll-interval", "10", "--stall-timeout", str(STALL_TIMEOUT),
         "--commit-interval", "0.3", "--state-interval", "0.2")
AT_LEAST_ONCE = ("--guarantee", "at-least-once")


def _messages() -> list[bytes]:
    """Eight small streams, interleaved: their keys fall on every one of the four partitions."""
    per_stream = []
    for stream in STREAMS:
        msgs, _, _ = produce_messages("banknote-authentication", "target", stream, seed=ord(stream))
        per_stream.append([orjson.dumps(m) for m in msgs])
    assert {key_partition(s.encode(), [0, 1, 2, 3]) for s in STREAMS} == {0, 1, 2, 3}
    return [s[k] for k in range(max(map(len, per_stream))) for s in per_stream if k < len(s)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    lines = _messages()
    (want, _), streams = embedded(tmp_path_factory.mktemp("embedded-group"), lines)
    return lines, want, streams


_RUNS = itertools.count()


def _unique(name: str) -> str:
    """A fresh topic prefix and group id for each run of a test (a test run again in one session starts afresh)."""
    return f"{name}-{next(_RUNS)}"


def _setup(b, prefix: str, lines: list[bytes]) -> str:
    topic = create_topics(b.bootstrap, prefix)
    produce(b.bootstrap, topic, lines)
    return topic


def _members(b, prefix: str, names: str, static: bool, *extra: str, member_dir: Path | None = None
             ) -> dict[str, WorkerProcess]:
    """Workers named ``names``: static ones with their name as instance id; dynamic ones, given ``member_dir``,
    each with its ``--member-file`` there (a restarted worker of the same name removes its predecessor)."""
    def identity(n: str) -> tuple[str, ...]:
        if static:
            return ("--instance-id", n)
        return () if member_dir is None else ("--member-file", str(member_dir / f"{prefix}-{n}"))

    return {n: WorkerProcess(b.bootstrap, prefix, *identity(n), *GROUP, *extra) for n in names}


def _one_killed(b, prefix: str, lines: list[bytes], static: bool, *extra: str, member_dir: Path | None = None
                ) -> dict[str, WorkerProcess]:
    """Two members on a fresh input, member "1" SIGKILLed once both have started their partitions; the second half
    of the input is produced after the kill, so records wait on the dead member's partitions however fast the
    members were."""
    half = len(lines) // 2
    topic = _setup(b, prefix, lines[:half])
    ws = _members(b, prefix, "12", static, *extra, member_dir=member_dir)
    for w in ws.values():
        w.wait_for("restored", timeout=120)
    ws["1"].kill()
    produce(b.bootstrap, topic, lines[half:])
    return ws


def _restored(w: WorkerProcess) -> set[int]:
    """The partitions the worker started (restored from the changelog) at least once."""
    return {int(m.group(1)) for line in w.lines if (m := re.search(r"partition (\d+): restored", line))}


def _log_time(line: str) -> float:
    """The epoch seconds of a worker's log line."""
    return time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000


def _taken_over(w: WorkerProcess, since: float) -> float:
    """Seconds from ``since`` (epoch) to the worker's last start of a partition after it (from its log)."""
    starts = [_log_time(line) for line in w.lines if "restored" in line and _log_time(line) >= since]
    assert starts, w.log()
    return max(starts) - since


def _check(b, prefix: str, reference, workers, exactly_once: bool, defended: bool | None = False) -> None:
    """Every record (once, under exactly-once), the uninterrupted run's final model; ``defended``: whether a worker
    had to leave and rejoin a stalled group (``None``: either)."""
    _, want, want_streams = reference
    logs = "\n".join(w.log() for w in workers)
    got, dead = outputs_by_stream(b.bootstrap, prefix)
    assert sorted(got) == sorted(want), logs
    if exactly_once:
        wrong = [key for key in want if got[key] != want[key]]
    else:
        wrong = [key for key in want if not set(want[key]) <= set(got[key])]
    if wrong:
        # Read again: tells a first read cut short by the broker's reported end from records never written.
        time.sleep(2)
        again, _ = outputs_by_stream(b.bootstrap, prefix)
        inputs = describe_input(b.bootstrap, f"{prefix}.input", reference[0])
        letters = [(reason, reference[0].index(raw) if raw in reference[0] else raw[:80]) for reason, raw in dead]
        pytest.fail(f"outputs differ for {wrong}\n{describe_missing(want, got, again)}\n{inputs}\n"
                    f"dead letters (reason, input line): {letters}\n{broker_warnings(b)}\n{logs}", pytrace=False)
    assert_same_model(final_streams(b.bootstrap, prefix), want_streams)
    stalls = [line for w in workers for line in w.lines if "stalled" in line]
    if defended is not None:
        assert bool(stalls) == defended, logs


@pytest.fixture(params=["broker", "tansu"])
def group_broker(request):
    """A broker with the guarantee it supports (noida-db exactly-once, Tansu at-least-once)."""
    return request.param, request.getfixturevalue(request.param)


def _guarantee(name: str) -> tuple[str, ...]:
    return () if name == "broker" else AT_LEAST_ONCE


# ---------------------------------------------------------------------------------------------- dynamic members


def test_failover(group_broker, reference):
    """One of two dynamic members is SIGKILLed for good: the survivor is given its partitions, restores their state
    and writes every record. Tansu expires the dead member after the session timeout, with no rejoin of the
    survivor's own; noida-db does not, and the survivor removes it (its partitions stand still with records).
    (Static members: ``test_failover_static``.)"""
    name, b = group_broker
    prefix = _unique(f"failover-{name}")
    ws = _one_killed(b, prefix, reference[0], False, *_guarantee(name), "--exit-when-idle", "3")
    wait_all([ws["2"]])
    assert _restored(ws["2"]) == {0, 1, 2, 3}, ws["2"].log()  # its own two partitions, then the dead member's
    _check(b, prefix, reference, [ws["2"]], exactly_once=name == "broker", defended=name == "broker")


def test_restarted_member(group_broker, reference, tmp_path):
    """A dynamic member (as docker/compose.yaml runs them) SIGKILLed and started again with its ``--member-file``
    is given partitions again; the records are all written (exactly-once on noida-db). The restarted worker first
    removes its predecessor, which noida-db would keep in the group for ever (and keep the joins waiting).
    (A static member's restart: ``test_restarted_static_member``.)"""
    name, b = group_broker
    prefix = _unique(f"restart-member-{name}")
    args = (*_guarantee(name), "--exit-when-idle", "3")
    ws = _one_killed(b, prefix, reference[0], False, *args, member_dir=tmp_path)
    again = _members(b, prefix, "1", False, *args, member_dir=tmp_path)["1"]
    again.wait_for("restored")
    wait_all([again, ws["2"]], timeout=120.0)
    assert any("this worker's predecessor" in line for line in again.lines), again.log()
    # Tansu expires the dead member by itself: no worker has to defend itself there.
    _check(b, prefix, reference, [again, ws["2"]], exactly_once=name == "broker",
           defended=None if name == "broker" else False)


def test_broker_restart(tansu, reference):
    """The broker is stopped and started again while two members run: they reconnect, their partitions are assigned
    again, and the second half of the input gives every record and the uninterrupted run's model."""
    lines = reference[0]
    prefix = _unique("broker-restart")
    half = len(lines) // 2
    topic = _setup(tansu, prefix, lines[:half])
    ws = _members(tansu, prefix, "12", True, *AT_LEAST_ONCE, "--exit-when-idle", "8")

    def alive() -> None:
        for w in ws.values():
            assert w.proc.poll() is None, w.log()

    wait_committed(tansu.bootstrap, prefix, topic, timeout=180, check=alive)
    tansu.stop()
    time.sleep(2)
    tansu.start()
    produce(tansu.bootstrap, topic, lines[half:])
    wait_all(list(ws.values()))
    _check(tansu, prefix, reference, ws.values(), exactly_once=False, defended=None)


def test_third_member(tansu, reference):
    """A third dynamic member joins two busy ones while the second half of the input arrives: partitions move to
    it, every record is written and the final model is the uninterrupted run's."""
    lines = reference[0]
    prefix = _unique("third-member")
    half = len(lines) // 2
    topic = _setup(tansu, prefix, lines[:half])
    args = (*AT_LEAST_ONCE, "--exit-when-idle", "5")
    ws = _members(tansu, prefix, "12", False, *args)
    for w in ws.values():
        w.wait_for("restored")
    third = _members(tansu, prefix, "3", False, *args)["3"]
    produce(tansu.bootstrap, topic, lines[half:])
    wait_all([*ws.values(), third])
    assert _restored(third), third.log()
    _check(tansu, prefix, reference, [*ws.values(), third], exactly_once=False, defended=None)


def _committed(b, group: str, topic: str) -> dict[int, int | None]:
    """The offsets ``group`` has committed on ``topic``, by partition (None: none)."""
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: c.committed(TopicPartition(topic, p)) for p in sorted(c.partitions_for_topic(topic))}
    finally:
        c.close()


def _wait_progress_on_every_input_partition(b, prefix: str, timeout: float = 120.0) -> None:
    """Return once predictions of a stream of every input partition are out: each partition's task has processed
    a message (a stream's predictions fall on every output partition, so outputs there say nothing of which input
    partitions have moved)."""
    deadline = time.monotonic() + timeout
    while {key_partition(orjson.loads(r.value)["stream"].encode(), [0, 1, 2, 3])
           for r in read_topic(b.bootstrap, f"{prefix}.predictions")} != {0, 1, 2, 3}:
        assert time.monotonic() < deadline, f"no predictions from every input partition in {timeout:.0f} s"
        time.sleep(0.5)


def test_revoked_with_uncommitted_progress(tansu, reference):
    """A third member joins two that have made progress but committed nothing (at-least-once, commit interval
    600 s): each partition the rebalance moves is committed by its revocation (by the rebalance listener, before
    kafka-python's follow-up join, after which it refuses commits) and let go by the worker's loop, and its new owner
    resumes where the last owner stopped, with nothing to replay; every record is written and the final model is the
    uninterrupted run's.
    (Exactly-once commits with every transaction: outputs cannot be visible before their offsets are committed.)"""
    lines = reference[0]
    prefix = _unique("revoked-uncommitted")
    half = len(lines) // 2
    topic = _setup(tansu, prefix, lines[:half])
    # No commit for a whole minute (half the stall timeout: Tansu expires dead dynamic members by itself).
    quiet = (*AT_LEAST_ONCE, "--commit-interval", "600", "--stall-timeout", "120")
    # The first two stay idle longer than the third's two rounds of a cooperative rebalance can take (each up to a
    # rebalance timeout on Tansu): a member idle that long commits, then stops, rightly, and hands its partitions
    # over by its final commit instead of by the revocation this test is about.
    ws = _members(tansu, prefix, "12", False, *quiet, "--exit-when-idle", "25")
    for w in ws.values():
        w.wait_for("restored")
    _wait_progress_on_every_input_partition(tansu, prefix)
    assert all(off is None for off in _committed(tansu, prefix, topic).values()), "committed before the rebalance"
    third = _members(tansu, prefix, "3", False, *quiet, "--exit-when-idle", "5")["3"]
    third.wait_for("restored")
    moved = _restored(third)
    handed = {int(m.group(1)) for w in ws.values() for line in w.lines
              if (m := re.search(r"partition (\d+) revoked: state handed over", line))}
    assert moved and moved <= handed, "\n".join(w.log() for w in [*ws.values(), third])
    by_listener = {int(m.group(1)) for w in ws.values() for line in w.lines
                   if (m := re.search(r"partition (\d+): offset \d+ committed by the revocation", line))}
    assert moved <= by_listener, "\n".join(w.log() for w in [*ws.values(), third])
    committed = _committed(tansu, prefix, topic)
    assert all(committed[p] is not None and committed[p] > 0 for p in moved), \
        f"moved {sorted(moved)}, committed {committed}\n" + "\n".join(w.log() for w in [*ws.values(), third])
    produce(tansu.bootstrap, topic, lines[half:])
    workers = [*ws.values(), third]
    wait_all(workers)
    logs = "\n".join(w.log() for w in workers)
    # The new owner's state covers the offset the group has committed for it: nothing to replay.
    starts = [m for line in third.lines
              if (m := re.search(r"restored \d+ streams covering offset (\d+) .*; replaying (\d+) messages up to "
                                 r"committed offset (\S+)", line))]
    assert starts and all(m.group(2) == "0" and m.group(1) == m.group(3) for m in starts), logs
    _check(tansu, prefix, reference, workers, exactly_once=False, defended=None)


# ----------------------------------------------------------------------------------------------- static members


def test_restarted_static_member(group_broker, reference):
    """Two static members, one SIGKILLed and started again with its instance id: the restarted member is given
    partitions again and every record is written (exactly-once on noida-db). Joins noida-db leaves unanswered end
    in the worker's own rejoin; the two members' defences must not keep each other rejoining. Tansu can keep the
    dead member's old id as the leader of the restarted group; a member that finds it so clears it, and the group
    forms without a rejoin."""
    name, b = group_broker
    prefix = _unique(f"static-restart-{name}")
    args = (*_guarantee(name), "--exit-when-idle", "3")
    ws = _one_killed(b, prefix, reference[0], True, *args)
    again = _members(b, prefix, "1", True, *args)["1"]
    # Bounded: the restarted member is taken back within a few rebalances (11-36 s seen on either broker).
    wait_all([again, ws["2"]], timeout=120.0)
    _check(b, prefix, reference, [again, ws["2"]], exactly_once=name == "broker", defended=None)
    assert _restored(again), again.log()


def test_failover_static(group_broker, reference):
    """Two static members, one SIGKILLed for good: the survivor is given the dead member's partitions within three
    stall timeouts of the kill and writes every record (exactly-once on noida-db). noida-db never expires the dead
    member: the survivor finds its partitions standing still with records, removes it (named by DescribeGroups'
    assignments) and itself, and joins again. Tansu expires it, but can keep its id as the group's leader: the
    survivor then clears that leader."""
    name, b = group_broker
    prefix = _unique(f"static-failover-{name}")
    ws = _one_killed(b, prefix, reference[0], True, *_guarantee(name), "--exit-when-idle", "3")
    killed = time.time()
    survivor = ws["2"]
    wait_all([survivor])
    assert _restored(survivor) == {0, 1, 2, 3}, survivor.log()
    taken = _taken_over(survivor, killed)
    assert taken < 3 * STALL_TIMEOUT, f"taken over {taken:.0f} s after the kill\n{survivor.log()}"
    noida = name == "broker"
    _check(b, prefix, reference, [survivor], exactly_once=noida, defended=True if noida else None)
    removed = [line for line in survivor.lines if "removed member" in line]
    assert all("NoError" in line for line in removed), survivor.log()
    if noida:  # noida-db names each member's instance and assignment
        assert any("(instance 1)" in line for line in removed), survivor.log()
        assert not any("(instance 2)" in line for line in removed), survivor.log()
