"""The worker (the app): joins the group, starts a task per assigned partition, loops poll -> process ->
checkpoint, and hands partitions over on rebalance.

kafka-python 3 calls the rebalance listener on the consumer's I/O thread. The listener queues what it was told
(:attr:`Worker.rebalance_events`); the loop hands partitions over and takes new ones between two messages, so a
partition's state is never snapshotted, nor its transaction closed, under a message being processed. At-least-once,
a revocation's progress is committed by the listener itself, while the loop waits in its poll
(:meth:`Worker.commit_revoked`): after the listener, kafka-python refuses commits until the follow-up join ends.

Failures are local to a partition: when producing or committing fails (a broker restart, a fenced producer, a
timeout), the partition's open transaction is aborted and the task is started again from the changelog, which
replays the input from the last committed state. Assigned partitions wait (paused) until their task has started,
so restores happen in the loop, not inside the rebalance callback.

The worker does not rely on the group coordinator to end every wait: when it has been joining or rebalancing for
``stall_timeout`` seconds since its last generation, or an input partition with records to read has been in other
hands (or none) that long under the same holder with its committed offset standing still, it hands its partitions
over, closes its consumer and joins again with a new one (:meth:`Worker._rejoin`). It first removes from the group
the member that holds such a partition and, when static, itself (:meth:`Worker._remove_holders`): a coordinator
that keeps a dead static member (noida-db for ever, Tansu until another member's heartbeat expires it) would
otherwise give the partition back to it, and a static member's rejoin alone is no membership change (a stalled join
waits a little for such partitions to have stood still the whole limit: :meth:`Worker._evidence_ripening`). Stalls in a
row lengthen the wait before the next one and the time out of the group (:meth:`Worker._stall_limit`,
:meth:`Worker._rejoin_pause`): two members whose rejoins keep stalling each other drift apart, and the others'
rebalance ends while one is out.
A rebalance under a dead leader ends sooner (:meth:`Worker._check_leader`): a leader that is no longer a member of
the group (Tansu keeps such a leader for ever, and elects no other), or one this worker removed, is cleared at once
while the rebalance goes on (:meth:`Worker._clear_leader`); a member leader whose assignment the SyncGroup has
awaited for two session timeouts (noida-db elects a SIGKILLed dynamic leader again) is removed by member id.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import zlib
from collections import deque
from typing import Any

from kafka import AsyncConsumerRebalanceListener, KafkaProducer
from kafka.errors import FencedInstanceIdError, KafkaError
from kafka.structs import MemberState

from streamforest.connectors.kafka import clients
from streamforest.connectors.kafka.changelog import log_end
from streamforest.connectors.kafka.config import WorkerConfig
from streamforest.connectors.kafka.metrics import KindEngineMetrics, WorkerMetrics
from streamforest.connectors.kafka.task import PartitionTask
from streamforest.engine.core import EngineConfig

log = logging.getLogger("streamforest.kafka")

RETRY_SECONDS = 1.0
POLL_SECONDS = 0.2
#: Longest interval between two looks at the progress of the input partitions other members hold.
GROUP_CHECK_SECONDS = 2.0
#: Most times the stall timeout a worker waits before its next rejoin after stalls in a row (the back-off doubles).
STALL_BACKOFF_MAX = 4
#: Session timeouts a SyncGroup may wait for the leader's assignment before that leader is removed from the group
#: (a live leader sends its assignment as soon as its JoinGroup is answered, as the others' are).
LEADER_SYNC_SESSIONS = 2


class Worker:
    """Consumes the input topic in a consumer group and drives one engine per assigned partition.

    Parameters
    ----------
    config
        Brokers, group, topics, guarantee and intervals.
    engine_config
        What every partition's engine learns and republishes (the same for every worker of a group).
    registry
        prometheus-client registry for the engine's and the worker's metrics (a fresh one by default).
    """

    def __init__(self, config: WorkerConfig, engine_config: EngineConfig | None = None, registry: Any = None) -> None:
        self.config = config
        self.engine_config = engine_config or EngineConfig()
        self.engine_metrics = KindEngineMetrics(registry)
        self.metrics = WorkerMetrics(self.engine_metrics.registry)
        self.tasks: dict[int, PartitionTask] = {}
        #: Assigned partitions whose task has not started yet -> when to try next.
        self.pending: dict[int, float] = {}
        self.stopping = threading.Event()
        #: What the rebalance listener was told, in order, for the loop to apply between messages: (the consumer
        #: told, "assigned" | "revoked" | "lost", input partitions). Appended on kafka-python's I/O thread.
        self.rebalance_events: deque[tuple[Any, str, list[int]]] = deque()
        #: Whether the loop is in its poll (not processing a message): the listener may commit a revocation then.
        self.polling = False
        self.consumer: Any = None
        self.poller: clients.QuietPoller | None = None
        #: Since when the consumer has not been a stable member (``None``: it is one).
        self.unsettled_since: float | None = time.monotonic()
        #: Input partitions others hold (or nobody does) with records to read -> (committed offset, end offset, since
        #: when the committed offset stands still under the same holder).
        self.others: dict[int, tuple[int, int, float]] = {}
        #: Input partition -> the last holder DescribeGroups named for it (:meth:`_holders`).
        self.holders: dict[int, tuple[str, ...]] = {}
        #: Stalls with less than a stall timeout settled in between: each lengthens the wait before the next and
        #: the time out of the group (bounded).
        self.stalls_in_row = 0
        #: Since when the worker is a stable member with every assigned partition started (``None``: it is not).
        self.settled_since: float | None = None
        #: (generation, member id) last seen: a new one is the coordinator answering, not a stall.
        self.generation: tuple[int, str] | None = None
        #: (partition, offset, end) -> whether a committed record is there to read (reads of a standing offset).
        self._waiting: dict[tuple[int, int, int], bool] = {}
        self.next_group_check = 0.0
        #: A leader named by a JoinGroup answer and missing from the group's members, since when (monotonic).
        self.missing_leader: tuple[str, float] | None = None
        #: Member ids this worker removed from the group (itself included) or cleared as a departed leader -> when
        #: (monotonic): a JoinGroup answered after that which names one as the leader names a departed leader.
        self.left: dict[str, float] = {}
        self.next_leader_check = 0.0
        #: Whether the group has formed with this worker in it (it was a stable member or was given partitions).
        self.was_member = False
        self.probe: Any = None
        self.admin: Any = None
        self.producer: KafkaProducer | None = None  # at-least-once: one idempotent producer for every partition
        self.messages = 0
        #: Last time anything happened (records, a rebalance, a task started or restarted): ``--exit-when-idle``.
        self.last_activity = time.monotonic()

    # ------------------------------------------------------------------ lifecycle

    def stop(self, *_: Any) -> None:
        """Finish the message in hand, commit, leave the group (what SIGTERM and SIGINT do)."""
        self.stopping.set()

    def run(self) -> None:
        clients.ensure_topics(self.config)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        if not self.config.exactly_once:
            self.producer = clients.producer(self.config)
        self._remove_predecessor()
        self._join()
        log.info("worker joined group %s on %s (%s)", self.config.group_id, self.config.topics.input,
                 self.config.guarantee)
        if self.config.checkpoint_seconds < self.config.commit_interval:
            log.warning("committing every %g s, not every %g s: half the stall timeout, or the other members would "
                        "take this worker for a dead one", self.config.checkpoint_seconds, self.config.commit_interval)
        try:
            self._loop()
        finally:
            self._shutdown()

    def _remove_predecessor(self) -> None:
        """Remove from the group the dynamic member ``member_file`` names: this worker's predecessor, which a
        SIGKILL left in the group (noida-db never expires it, and keeps the restarted member's join waiting)."""
        path = self.config.member_file
        if path is None or self.config.instance_id is not None or not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            old = f.read().strip()
        if not old:
            return
        try:
            result = clients.remove_members(self._admin(), self.config.group_id, [clients.Member(old)]).get(
                old, "no answer")
        except KafkaError as exc:  # a top-level UnknownMemberId: the coordinator no longer knows it
            result = type(exc).__name__
        self.left[old] = time.monotonic()
        log.warning("removed member %s, this worker's predecessor (%s), from group %s: %s", old, path,
                    self.config.group_id, result)
        if result == "NoError":
            self.metrics.members_removed.inc()

    def _record_member(self, member_id: str) -> None:
        """Write the member id the coordinator gave this dynamic worker to ``member_file`` (atomically)."""
        path = self.config.member_file
        if path is None or self.config.instance_id is not None or not member_id:
            return
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(member_id)
        os.replace(tmp, path)

    def _join(self) -> None:
        """A new group consumer subscribed to the input (the same ``instance_id`` for a static member)."""
        self.consumer = clients.consumer(self.config)
        self.consumer.subscribe([self.config.topics.input], listener=_Listener(self, self.consumer))
        self.poller = clients.QuietPoller(self.consumer)
        # ``others`` is kept: how long a partition's committed offset has stood still does not depend on this
        # worker's membership, and a stall that outlasts several rejoins must still name its holder.
        self.unsettled_since = time.monotonic()
        self.next_group_check = 0.0

    def _loop(self) -> None:
        last_commit = time.monotonic()
        since_commit = 0
        while not self.stopping.is_set():
            self._apply_rebalances()
            self._start_pending()
            # Work in hand is committed when due, not after a full poll wait: a client waiting for its records
            # (the relational loop) sees them one commit interval after the message, not later.
            wait = POLL_SECONDS
            if since_commit:
                wait = min(wait, max(0.0, last_commit + self.config.checkpoint_seconds - time.monotonic()))
            try:
                # Quiet polls only in a stable group: a join's steps go on in the consumer's poll, and its own
                # waits are what the group coordinator's timing expects.
                self.polling = True
                try:
                    if not self._settled():
                        batch = self.consumer.poll(timeout_ms=int(wait * 1000))
                    else:
                        batch = self.poller.poll(wait)
                finally:
                    self.polling = False
            except FencedInstanceIdError as exc:
                # The member was removed (by another worker's defence) while its join was in flight: kafka-python
                # gives such a consumer up for good, so a new one takes the same instance id.
                self._rejoin(f"the coordinator fenced this member ({exc})", [])
                continue
            except KafkaError as exc:
                log.warning("poll failed (%s): retrying", exc)
                self.last_activity = time.monotonic()
                time.sleep(RETRY_SECONDS)
                continue
            for tp, msgs in batch.items():
                task = self.tasks.get(tp.partition)
                if task is None:
                    continue  # revoked or restarting: its task seeks to where it resumes
                self.metrics.records_in.labels(tp.topic).inc(len(msgs))
                self.last_activity = time.monotonic()
                for msg in msgs:
                    if self.rebalance_events:
                        self._apply_rebalances()
                    if self.tasks.get(tp.partition) is not task:
                        break  # revoked, or restarted by a failed commit: it resumes from its committed state
                    try:
                        task.process(msg)
                    except KafkaError as exc:
                        self._restart(task, f"producing failed: {exc}", exc)
                        break
                    since_commit += 1
                    self.messages += 1
                    if self.stopping.is_set():
                        break
                    if since_commit >= self.config.commit_every or \
                            time.monotonic() - last_commit >= self.config.checkpoint_seconds:
                        self._commit_all()
                        last_commit, since_commit = time.monotonic(), 0
                if self.stopping.is_set():
                    break
            if time.monotonic() - last_commit >= self.config.checkpoint_seconds:
                self._commit_all()
                last_commit, since_commit = time.monotonic(), 0
            self._sync_pauses()
            self._update_lag()
            stall = self._stalled()
            if stall is not None:
                self._rejoin(*stall)
                continue
            idle = self.config.exit_when_idle
            if idle is not None and self._idle_seconds() >= idle:
                if since_commit:
                    # Idle with progress not yet committed: committed now, not at the commit interval. The other
                    # members tell from the group's offsets whether this worker's partitions are done; members that
                    # each wait for the other's commit before stopping would otherwise wait out the interval.
                    self._commit_all()
                    last_commit, since_commit = time.monotonic(), 0
                if not self._behind() and not self._others_behind():
                    log.info("nothing consumed for %.1f s: stopping", idle)
                    break

    def _settled(self) -> bool:
        """Whether the worker is a stable member of its group with every assigned partition started, and not told
        of a rebalance it has yet to join (an idle member that stopped then would leave in the middle of it)."""
        return not self.pending and not self.rebalance_events and \
            self.consumer.group_metadata().state == MemberState.STABLE and not clients.rejoin_requested(self.consumer)

    def _idle_seconds(self) -> float:
        """How long the worker has had nothing to do. A worker that is joining or rebalancing, or whose
        partitions wait to start, is not idle: it does not know yet what it has to consume."""
        now = time.monotonic()
        if not self._settled():
            self.last_activity = now
        return now - self.last_activity

    # ------------------------------------------------------------------ the group's progress

    def _stall_limit(self) -> float:
        """How long a wait counts as a stall: ``stall_timeout``, doubled for each stall in a row up to
        ``STALL_BACKOFF_MAX`` times, and lengthened by up to a quarter by a fraction fixed per member. Two members
        that each find the other stalled (a rejoin is a rebalance the other must wait out) then do not act in step
        for ever: their waits drift apart and grow until one rebalance is left to finish."""
        return self.config.stall_timeout * min(2 ** self.stalls_in_row, STALL_BACKOFF_MAX) * self._spread()

    def _spread(self) -> float:
        """This member's factor between 1 and 1.25 (a hash of its instance id, or of its process id)."""
        who = self.config.instance_id or str(os.getpid())
        return 1 + (zlib.crc32(f"{self.config.group_id}/{who}".encode()) % 1000) / 4000

    def _stalled(self) -> tuple[str, list[int]] | None:
        """Why the group keeps this worker waiting beyond the stall limit (:meth:`_stall_limit`), and the input
        partitions that stood still with records in other hands (or none) that long (``None``: it does not keep
        the worker waiting).

        Once the group has formed with this worker in it, the partitions are watched in a rebalance too: a
        coordinator that waits for a dead static member keeps the survivor's join waiting, and the dead member is
        the one whose partitions stand still. Before that (the group forming) nothing has moved yet, so nothing is
        evidence. A join counts as stalled from its start or the last generation the coordinator gave the member,
        whichever is later: a new generation is the coordinator answering."""
        now = time.monotonic()
        limit = self._stall_limit()
        meta = self.consumer.group_metadata()
        stable = meta.state == MemberState.STABLE
        if (meta.generation_id, meta.member_id) != self.generation:
            if self.generation is None or meta.member_id != self.generation[1]:
                self._record_member(meta.member_id)
            self.generation = (meta.generation_id, meta.member_id)
            if not stable:
                self.unsettled_since = now
        if not (stable and not self.pending):
            self.settled_since = None
        elif self.settled_since is None:
            self.settled_since = now
        elif now - self.settled_since >= self.config.stall_timeout:
            self.stalls_in_row = 0  # settled for a whole stall timeout: the stalls in a row are over
        self.was_member = self.was_member or stable
        stalled: list[int] = []
        if self.was_member:
            if now >= self.next_group_check:
                self.next_group_check = now + min(GROUP_CHECK_SECONDS, limit / 4)
                try:
                    self._watch_others(now)
                except KafkaError as exc:
                    log.warning("the group's offsets are unavailable (%s): checked again later", exc)
            mine = {tp.partition for tp in self.consumer.assignment()}  # given to this worker since the last watch
            stalled = [p for p, (committed, end, since) in sorted(self.others.items())
                       if p not in mine and now - since >= limit and self._records_waiting(p, committed, end)]
        if not stable:
            if self.unsettled_since is None:
                self.unsettled_since = now
            waited = now - self.unsettled_since
            if waited >= limit and (stalled or not self._evidence_ripening(now, limit)):
                return f"joining or rebalancing for {waited:.0f} s", stalled
            if now >= self.next_leader_check:
                self.next_leader_check = now + GROUP_CHECK_SECONDS
                self._check_leader(now, waited)
            return None
        self.unsettled_since = None
        if not stalled:
            return None
        committed, _, since = self.others[stalled[0]]
        return (f"partition {stalled[0]} has records from offset {committed} on and its committed offset has not "
                f"moved for {now - since:.0f} s"), stalled

    def _evidence_ripening(self, now: float, limit: float) -> bool:
        """Whether an input partition in other hands (or none) with records has stood still since early in this
        stalled join (within half the stall limit of its start) but not yet for the whole limit. The stall then waits
        for it, half a limit at most: the records of a SIGKILLed member's partitions come about when the coordinator
        starts waiting for it, and a rejoin that came a moment before they had stood still the limit removed nobody,
        so the next join waited for the dead static member again, a doubled limit longer."""
        if not self.was_member:
            return False
        mine = {tp.partition for tp in self.consumer.assignment()}
        return any(p not in mine and now - since < limit and since <= self.unsettled_since + limit / 2
                   and self._records_waiting(p, committed, end)
                   for p, (committed, end, since) in self.others.items())

    def _watch_others(self, now: float) -> None:
        """Record, for each input partition another member holds (or nobody does) with records past its committed
        offset, that offset and since when it stands still under the same holder (:meth:`_holders`): a member
        that has just been given a partition (a restarted one restoring it) has the whole stall timeout to move it.
        The group's offsets come from the admin client and the partitions' ends from the probe: neither waits on
        this worker's own join."""
        mine = {tp.partition for tp in self.consumer.assignment()}
        parts = self.consumer.partitions_for_topic(self.config.topics.input) or set()
        tps = self._tps(sorted(p for p in parts if p not in mine))
        if not tps:
            self.others.clear()
            return
        probe = self._probe()
        ends = probe.end_offsets(tps, timeout_ms=clients.OFFSETS_TIMEOUT_MS)
        begins = probe.beginning_offsets(tps, timeout_ms=clients.OFFSETS_TIMEOUT_MS)
        offsets = self._admin().list_group_offsets({self.config.group_id: tps}).get(self.config.group_id, {})
        watched = {}
        for tp in tps:
            found = offsets.get(tp)
            committed = max(found.offset if found is not None and found.offset >= 0 else 0, begins[tp])
            if committed >= ends[tp]:
                ends[tp] = log_end(probe, tp, ends[tp])  # a broker may report its end short
                if committed >= ends[tp]:
                    continue
            seen = self.others.get(tp.partition)
            since = seen[2] if seen is not None and seen[0] == committed else now
            watched[tp.partition] = (committed, ends[tp], since)
        for p, holder in self._holders(sorted(watched)).items():
            if not holder:
                continue  # nobody named (a rebalance going on, or the partition in nobody's hands): no new holder
            if holder != self.holders.get(p, holder):
                committed, end, _ = watched[p]
                watched[p] = (committed, end, now)
            self.holders[p] = holder
        self.others = watched

    def _holders(self, partitions: list[int]) -> dict[int, tuple[str, ...]]:
        """Who holds each of ``partitions`` as the coordinator describes the group: the member ids it assigned the
        partition to (``()``: nobody) or, from a coordinator that reports no assignments (Tansu), the other members,
        and this worker's generation when it is a stable member (a rebalance may have moved the partition to any of
        them, and a restarted member is given its partitions only when that rebalance ends). A partition is left out
        when the group cannot be described or this worker's own id is not known yet."""
        if not partitions:
            return {}
        me = self.consumer.group_metadata().member_id
        try:
            members = clients.group_members(self._admin(), self.config.group_id, self.config.topics.input)
        except (KafkaError, ValueError) as exc:
            log.warning("the group's members are unavailable (%s): checked again later", exc)
            return {}
        others = [m for m in members if m.member_id != me]
        if any(m.partitions is not None for m in others):
            return {p: tuple(sorted(m.member_id for m in others if m.partitions and p in m.partitions))
                    for p in partitions}
        if not me:
            return {}
        # In a rebalance, the members that may be given the partition when it ends: a member joining (a restarted
        # one) is a new holder, and has the whole stall timeout to move it.
        meta = self.consumer.group_metadata()
        everyone = tuple(sorted(m.member_id for m in others))
        if meta.state == MemberState.STABLE:
            everyone = (*everyone, f"generation {meta.generation_id}")
        return dict.fromkeys(partitions, everyone)

    def _check_leader(self, now: float, waited: float) -> None:
        """Look at the leader this consumer's last JoinGroup answer named (not this worker) in a rebalance.

        A leader that is no longer a member is cleared at once (:meth:`_clear_leader`), and the rebalance goes on:
        one this worker removed (itself before a rejoin, or a holder) and a JoinGroup answered after the removal
        still names, or one DescribeGroups does not list and a JoinGroup answered after it was first found missing
        names again. Tansu keeps such a leader for ever and elects no other; so a member's own removal while it led
        a forming group leaves its id as the leader for the rest, and the member that removed it is the first to
        see its id again. A listed leader whose assignment this worker's SyncGroup has awaited for
        ``LEADER_SYNC_SESSIONS`` session timeouts, once the rebalance has lasted a session timeout (noida-db keeps a
        SIGKILLed dynamic leader as a member and elects it again), is removed by member id: the coordinator then
        elects a live member."""
        me = self.consumer.group_metadata().member_id
        named = clients.join_leader(self.consumer)
        if named is None or named[0] == me:
            return
        leader, answered = named
        gone = self.left.get(leader)
        if gone is not None:
            if answered > gone:
                self._clear_leader(leader, "removed from the group before")
            return
        try:
            members = {m.member_id for m in clients.group_members(self._admin(), self.config.group_id,
                                                                  self.config.topics.input)}
        except (KafkaError, ValueError) as exc:
            log.warning("the group's members are unavailable (%s): checked again later", exc)
            return
        if leader not in members:
            # Departed only if a JoinGroup answered after it was first found missing names it again: an answer
            # from before its expiry (a coordinator that expires a dead leader elects another) is no evidence.
            if self.missing_leader is None or self.missing_leader[0] != leader:
                self.missing_leader = (leader, now)
            elif answered > self.missing_leader[1]:
                self._clear_leader(leader, "no longer a member of the group")
            return
        awaited = clients.awaited_leader(self.consumer)
        limit = LEADER_SYNC_SESSIONS * self.config.session_timeout_ms / 1000
        if waited < self.config.session_timeout_ms / 1000 or awaited is None or awaited[0] != leader or \
                now - awaited[1] < limit:
            return
        try:
            removed = clients.remove_members(self._admin(), self.config.group_id, [clients.Member(leader)])
        except KafkaError as exc:
            log.warning("removing leader %s from group %s failed (%s): checked again later", leader,
                        self.config.group_id, exc)
            return
        self.left[leader] = time.monotonic()
        result = removed.get(leader, "no answer")
        log.warning("removed member %s, the leader of group %s, whose assignment this worker's SyncGroup has "
                    "awaited for %.0f s: %s", leader, self.config.group_id, now - awaited[1], result)
        if result == "NoError":
            self.metrics.members_removed.inc()

    def _records_waiting(self, partition: int, offset: int, end: int) -> bool:
        """Whether a committed input record is there to read at or after ``offset`` (not only a transaction's
        marker or aborted records): read once per standing offset."""
        key = (partition, offset, end)
        if key not in self._waiting:
            if len(self._waiting) > 1024:
                self._waiting.clear()
            tp = self._tps([partition])[0]
            reader = self._probe()
            reader.assign([tp])
            reader.seek(tp, offset)
            found = False
            deadline = time.monotonic() + clients.OFFSETS_TIMEOUT_MS / 1000
            while not found and time.monotonic() < deadline and reader.position(tp) < end:
                found = bool(reader.poll(timeout_ms=200).get(tp))
            self._waiting[key] = found
        return self._waiting[key]

    def _probe(self) -> Any:
        """The group-less reader that looks at partitions other members hold (made when first needed)."""
        if self.probe is None:
            self.probe = clients.reader(self.config, fetch_max_wait_ms=50, max_partition_fetch_bytes=64 * 1024)
        return self.probe

    def _others_behind(self) -> bool:
        """Whether records wait on an input partition this worker does not hold: the group is not done, and a
        member that stopped now could leave them to a member that died."""
        if not self.others:
            return False
        if any(self._records_waiting(p, committed, end) for p, (committed, end, _) in self.others.items()):
            self.last_activity = time.monotonic()
            return True
        return False

    def _rejoin(self, why: str, stalled: list[int]) -> None:
        """Leave the group and join it again with a new consumer: the coordinator starts the member afresh
        instead of leaving it to wait out the rebalance timeout (``max_poll_interval``, minutes). ``stalled``:
        input partitions that stood still with records in other hands, whose holders are removed first."""
        self.metrics.group_stalls.inc()
        self.stalls_in_row += 1
        log.warning("group %s stalled (%d in a row): %s (input partitions standing still with records: %s): handing "
                    "partitions over and joining again; the next stall counts after %.0f s", self.config.group_id,
                    self.stalls_in_row, why, stalled or "none", self._stall_limit())
        self.revoked(sorted(set(self.tasks) | set(self.pending)))
        if stalled or self.config.instance_id is not None:
            self._remove_holders(stalled)
        old = self.consumer
        try:
            clients.bounded(old.close, "leave group", seconds=10.0)
        except Exception as exc:  # a broker gone or a join in flight: the new consumer replaces the member anyway
            log.warning("closing the stalled consumer failed: %s", exc)
        # Out of the group, the others' rebalance can end without this worker and they go on with every partition;
        # after stalls in a row it stays out longer before joining again (what ends a cycle of stalls).
        self.stopping.wait(self._rejoin_pause())
        while not self.stopping.is_set():
            try:
                self._join()
                return
            except KafkaError as exc:
                log.warning("joining the group again failed (%s): retrying in %.0f s", exc, RETRY_SECONDS)
                time.sleep(RETRY_SECONDS)
        self.consumer = None

    def _rejoin_pause(self) -> float:
        """How long a worker stays out of the group before joining again: nothing after a first stall, then one
        session timeout more for each stall in a row, up to ``stall_timeout``, lengthened like the stall limit."""
        steps = self.stalls_in_row - 1
        return min(steps * self.config.session_timeout_ms / 1000, self.config.stall_timeout) * self._spread()

    def _remove_holders(self, stalled: list[int]) -> None:
        """Remove from the group the members holding ``stalled`` and, for a static member, this worker itself.

        ``stalled``: partitions that had records waiting and a committed offset standing still under the same
        holder for the whole stall limit: their holder is dead or stuck. A coordinator that reports assignments
        names the holders; one that does not (Tansu) leaves the other member when there is only one (in a larger
        group no other member is removed: a live one would be put out for nothing). A static member's own removal
        makes its rejoin a membership change: otherwise the coordinator hands it its old assignment back without a
        rebalance (KIP-345), and the partitions stay with the dead member; and the others' rebalance ends without
        waiting for it. A dynamic member leaves when its consumer closes.
        """
        me = self.consumer.group_metadata().member_id
        members: list[clients.Member] = []
        if stalled:
            try:
                members = clients.group_members(self._admin(), self.config.group_id, self.config.topics.input)
            except (KafkaError, ValueError) as exc:
                log.warning("the group's members are unavailable (%s): removing none of them", exc)
        others = [m for m in members if m.member_id != me]
        if any(m.partitions is not None for m in others):
            holders = [m for m in others if m.partitions and m.partitions & set(stalled)]
        else:
            holders = others if len(others) == 1 else []
        leaving = list(holders)
        if self.config.instance_id is not None and me:
            leaving.append(clients.Member(me, self.config.instance_id))
        try:
            removed = clients.remove_members(self._admin(), self.config.group_id, leaving)
        except KafkaError as exc:
            log.warning("removing members from the group failed (%s): joining again", exc)
            return
        self.left.update(dict.fromkeys((m.member_id for m in leaving), time.monotonic()))
        for m in holders:
            result = removed.get(m.member_id, "no answer")
            log.warning("removed member %s (instance %s), holder of stalled partitions %s, from group %s: %s",
                        m.member_id, m.instance_id, stalled, self.config.group_id, result)
            if result == "NoError":
                self.metrics.members_removed.inc()
        if stalled and not holders:
            log.warning("no member of group %s named as the holder of stalled partitions %s (members: %s)",
                        self.config.group_id, stalled, ", ".join(m.member_id for m in members) or "none")
        if self.config.instance_id is not None and me:
            log.info("left group %s as member %s so that joining again is a membership change: %s",
                     self.config.group_id, me, removed.get(me, "no answer"))

    def _clear_leader(self, leader: str, why: str) -> None:
        """Make the coordinator forget ``leader``, a departed member it still names as the group's leader
        (:func:`clients.clear_departed_leader`: a JoinGroup, a SyncGroup and a LeaveGroup of the admin client; the
        consumer's own rebalance goes on), and count it as a member removed."""
        self.left[leader] = time.monotonic()
        try:
            what = clients.clear_departed_leader(self._admin(), self.config.group_id, self.config.topics.input, leader,
                                                 self.config.session_timeout_ms)
        except (KafkaError, AttributeError) as exc:  # AttributeError: a kafka-python without the internals it uses
            log.warning("clearing departed leader %s of group %s failed (%s): the stall timeout still applies",
                        leader, self.config.group_id, exc)
            return
        self.left[leader] = time.monotonic()
        self.metrics.members_removed.inc()
        log.warning("removed departed leader %s (%s) from group %s: %s", leader, why, self.config.group_id, what)

    def _admin(self) -> Any:
        """The admin client that describes the group and removes members (made when first needed)."""
        if self.admin is None:
            self.admin = clients.group_admin(self.config)
        return self.admin

    def _shutdown(self) -> None:
        for task in list(self.tasks.values()):
            self._commit(task, force_state=True)
            task.close(abort=True)
        self.tasks.clear()
        if self.producer is not None:
            self.producer.close(timeout=10)
        if self.probe is not None:
            self.probe.close()
        if self.admin is not None:
            self.admin.close()
        if self.consumer is not None:
            self.consumer.close()
        log.info("worker stopped after %d messages", self.messages)

    # ------------------------------------------------------------------ tasks

    def _apply_rebalances(self) -> None:
        """Apply what the rebalance listener queued, in order (on the loop's thread, between messages). Events of a
        consumer this worker has since replaced (:meth:`_rejoin`) are dropped: their partitions were handed over
        before it closed."""
        while self.rebalance_events:
            consumer, kind, partitions = self.rebalance_events.popleft()
            if consumer is not self.consumer:
                continue
            if kind == "assigned":
                self.assigned(partitions)
            else:
                self.revoked(partitions, lost=kind == "lost")

    def assigned(self, partitions: list[int]) -> None:
        self.metrics.rebalances.inc()
        self.was_member = self.was_member or bool(partitions)
        self.last_activity = time.monotonic()
        for p in partitions:
            task = self.tasks.pop(p, None)
            if task is not None:
                # Assigned again without a revocation we saw (the member fell out of the group): the consumer's
                # position is no longer the task's, so the task starts again from its committed state.
                log.warning("partition %d: assigned again while running: restoring from the changelog", p)
                task.close(abort=True)
            self.pending[p] = 0.0
        self._pause(partitions)

    def revoked(self, partitions: list[int], lost: bool = False) -> None:
        """Commit what is done and the state (so the next owner replays little), then let the partition go. A
        cooperative rebalance goes on only when this member joins again (its next poll), so the commit comes before
        the next owner starts."""
        self.metrics.rebalances.inc()
        self.last_activity = time.monotonic()
        for p in partitions:
            self.pending.pop(p, None)
            task = self.tasks.pop(p, None)
            if task is None:
                continue
            try:
                if not lost:
                    self._commit(task, force_state=True)
            finally:  # whatever the commit raised, the partition's task lets go of it
                task.close(abort=True)
            if lost:
                log.info("partition %d lost", p)
            else:
                log.info("partition %d revoked: state handed over (committed offset %s)", p, task.committed_position)

    async def commit_revoked(self, consumer: Any, partitions: list[int]) -> None:
        """At-least-once, commit the revoked partitions' progress from the rebalance listener, on the consumer's I/O
        thread, while the member is still in the generation that revokes them. kafka-python goes on to the
        cooperative follow-up join as soon as the listener returns, and refuses a commit from then on
        (``RebalanceInProgressError``), so a commit from the loop can come too late (docs/kafka.md, "Scaling"). Only
        while the loop is in its ``poll`` (:attr:`polling`), where kafka-python calls the listener: never under a
        message being processed. The task is let go by the loop (:meth:`revoked`), which finds nothing left to
        commit. Exactly-once commits with the partition's transaction, which the follow-up join does not stop."""
        if self.config.exactly_once or consumer is not self.consumer or not self.polling:
            return
        try:
            commit = consumer._coordinator._commit_offsets_sync_async
        except AttributeError:  # another kafka-python: the loop commits the revocation
            return
        for p in partitions:
            task = self.tasks.get(p)
            if task is None:
                continue
            try:
                offsets = task.prepare_commit(consumer, force_state=True)
                if offsets:
                    await commit(offsets, clients.OFFSETS_TIMEOUT_MS)
                    task.committed(offsets)
                    log.info("partition %d: offset %d committed by the revocation", p, task.committed_position)
            except Exception as exc:  # the loop's revocation commits (or restarts the partition) as before
                log.warning("partition %d: committing on revocation failed (%s): the loop tries again", p, exc)

    def _start_pending(self) -> None:
        now = time.monotonic()
        for p, when in list(self.pending.items()):
            if when > now:
                continue
            task = PartitionTask(self.config, self.engine_config, p, self.engine_metrics, self.metrics,
                                 shared_producer=self.producer)
            try:
                task.start(self.consumer)
            except (KafkaError, TimeoutError, OSError, ValueError) as exc:
                log.warning("partition %d: start failed (%s): retrying in %.0f s", p, exc, RETRY_SECONDS)
                task.close(abort=True)
                self.pending[p] = now + RETRY_SECONDS
                continue
            del self.pending[p]
            self.tasks[p] = task
            self._resume([p])
            self.last_activity = time.monotonic()

    def _restart(self, task: PartitionTask, why: str, error: BaseException | None = None) -> None:
        """Abort the partition's open work and start it again from its committed state. At-least-once, when
        ``error`` leaves the shared producer unable to deliver (:func:`clients.needs_replacing`), a new producer
        takes its place and every partition starts again on it: records the other partitions gave the old one
        may be lost with it, and their restart republishes them."""
        log.warning("partition %d: %s: aborting and restoring from the changelog", task.partition, why)
        self._requeue(task)
        if self.producer is not None and error is not None and clients.needs_replacing(self.producer, error):
            log.warning("the producer failed (%s): replacing it and restarting partitions %s", error,
                        sorted(self.tasks) or "none")
            for other in list(self.tasks.values()):
                self._requeue(other)
            try:
                self.producer.close(timeout=5)
            except Exception as exc:  # its batches fail with it; their partitions are restarting
                log.warning("closing the failed producer: %s", exc)
            while True:
                try:
                    self.producer = clients.producer(self.config)
                    return
                except KafkaError as exc:  # the broker still away: the partitions wait for the new producer
                    log.warning("a new producer failed (%s): retrying in %.0f s", exc, RETRY_SECONDS)
                    if self.stopping.wait(RETRY_SECONDS):
                        return

    def _requeue(self, task: PartitionTask) -> None:
        """Close the partition's task and start it again after ``RETRY_SECONDS``."""
        self.tasks.pop(task.partition, None)
        task.close(abort=True)
        self.pending[task.partition] = time.monotonic() + RETRY_SECONDS
        self._pause([task.partition])

    def _commit(self, task: PartitionTask, force_state: bool = False) -> bool:
        try:
            return task.checkpoint(self.consumer, force_state)
        except KafkaError as exc:
            if task.partition in self.tasks:
                self._restart(task, f"commit failed: {exc}", exc)
            else:
                log.warning("partition %d: final commit failed: %s", task.partition, exc)
            return False

    def _commit_all(self) -> None:
        # Not in a rebalance: the commit would be refused (its generation is ending) and the partition restarted
        # for nothing; what is done is committed on revocation, or at the first commit once the group is stable.
        if self.consumer.group_metadata().state != MemberState.STABLE:
            return
        for task in list(self.tasks.values()):
            if self.tasks.get(task.partition) is task:  # not restarted by a failed commit of another partition
                self._commit(task)

    # ------------------------------------------------------------------ consumer helpers

    def _tps(self, partitions: list[int]) -> list[Any]:
        from kafka import TopicPartition

        return [TopicPartition(self.config.topics.input, p) for p in partitions]

    def _pause(self, partitions: list[int]) -> None:
        tps = [tp for tp in self._tps(partitions) if tp in self.consumer.assignment()]
        if tps:
            self.consumer.pause(*tps)

    def _resume(self, partitions: list[int]) -> None:
        tps = [tp for tp in self._tps(partitions) if tp in self.consumer.assignment()]
        if tps:
            self.consumer.resume(*tps)

    def _behind(self) -> bool:
        """Whether a running partition still has input to read although nothing came for a while. kafka-python's
        fetcher can stall on a partition after a broker restart: seeking to the task's position again restarts it."""
        assignment = self.consumer.assignment()
        tasks = [t for t in self.tasks.values() if t.position is not None and t.tp in assignment]
        if not tasks:
            return False
        try:
            ends = self.consumer.end_offsets([t.tp for t in tasks], timeout_ms=clients.OFFSETS_TIMEOUT_MS)
            # The consumer's own position counts too: it is past transaction markers that carry no message.
            fetched = {t.tp: self.consumer.position(t.tp, timeout_ms=clients.OFFSETS_TIMEOUT_MS) or 0 for t in tasks}
        except KafkaError as exc:
            log.warning("offsets unavailable (%s): not idle yet", exc)
            self.last_activity = time.monotonic()
            return True
        # The last fetch's high watermark counts too: a broker may report its end short (docs/kafka.md).
        ends = {tp: max(end, self.consumer.highwater(tp) or 0) for tp, end in ends.items()}
        behind = [t for t in tasks if ends.get(t.tp, 0) > max(t.position, fetched[t.tp])]
        for t in behind:
            log.warning("partition %d: %d messages to read but nothing fetched: fetching again from offset %d",
                        t.partition, ends[t.tp] - t.position, t.position)
            self.consumer.seek(t.tp, t.position)
        if behind:
            self.last_activity = time.monotonic()
        return bool(behind)

    def _sync_pauses(self) -> None:
        """Fetch exactly the partitions whose task runs: a pause or resume asked while the partition was briefly
        out of the assignment (a rejoin) is otherwise lost, and a partition stays paused for good."""
        assignment = self.consumer.assignment()
        paused = self.consumer.paused()
        running = {tp for tp in assignment if tp.partition in self.tasks}
        stale = [tp for tp in paused if tp in running]
        idle = [tp for tp in assignment if tp not in running and tp not in paused]
        if stale:
            self.consumer.resume(*stale)
        if idle:
            self.consumer.pause(*idle)

    def _update_lag(self) -> None:
        assignment = self.consumer.assignment()
        for p, task in self.tasks.items():
            tp = task.tp
            if tp not in assignment:
                continue  # revoked, its hand-over still queued (:meth:`_apply_rebalances`)
            high = self.consumer.highwater(tp)
            if high is not None and task.position is not None:
                self.metrics.consumer_lag.labels(tp.topic, str(p)).set(max(0, high - task.position))


class _Listener(AsyncConsumerRebalanceListener):
    """Queues what ``consumer`` is told for the worker's loop (:meth:`Worker._apply_rebalances`); a revocation's
    progress is committed here first (:meth:`Worker.commit_revoked`)."""

    def __init__(self, worker: Worker, consumer: Any) -> None:
        self.worker = worker
        self.consumer = consumer

    def _queue(self, kind: str, tps: Any) -> list[int]:
        partitions = sorted(tp.partition for tp in tps)
        self.worker.rebalance_events.append((self.consumer, kind, partitions))
        return partitions

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._queue("assigned", assigned)

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.worker.commit_revoked(self.consumer, self._queue("revoked", revoked))

    async def on_partitions_lost(self, lost: Any) -> None:
        self._queue("lost", lost)
