"""A consumer group whose leader dies: both test brokers elect the dead member again and the group never forms.
A minimal reproduction with kafka-python consumers (the worker's settings, eager rebalancing), no worker.

Two members ``a`` and ``b`` share a 4-partition topic; the leader is stopped without a LeaveGroup (what a SIGKILL
leaves behind) and started again (a new member). Every JoinGroup answer then names the dead member as the leader,
so no member sends the assignments and every SyncGroup waits or is answered "rebalance in progress":

* **Tansu 0.6** (``--broker tansu``, static members as ``--instance-id`` runs them): a formed group's heartbeat
  expires the silent member without clearing the leader, and the join that changes the group (the restarted
  member's new member id, or a member's new subscription) makes it a forming group with ``leader:
  Some(old leader)``; a forming group elects a leader only while it has none, and clears it only when it expires
  that member, which is no longer a member (``tansu-broker/src/coordinator/group/administrator.rs``). A forming
  group's LeaveGroup of its leader keeps the leader the same way. DescribeGroups does not list the leader.
* **noida-db 0.2.3** (``--broker noida``, dynamic members as ``docker/compose.yaml`` runs them): never expires the
  silent member (DescribeGroups lists it minutes later) and keeps electing it.

Then what the worker does once a rebalance has lasted a session timeout under a leader that is not itself
(``Worker._check_leader``): a leader DescribeGroups does not list is cleared with
:func:`streamforest.connectors.kafka.clients.clear_departed_leader` (one JoinGroup under its member id, the
leader's SyncGroup, one LeaveGroup: the formed group drops the leader it lost); a listed one whose assignment the
SyncGroup has awaited for two session timeouts is removed by member id (LeaveGroup v3). The group forms again.
``python -m scenarios.kafka_dead_leader --broker tansu|noida`` prints each member's state every 5 s and how long
each phase took.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.structs import MemberState

from streamforest.connectors.kafka import clients
from streamforest.connectors.kafka.config import Topics, WorkerConfig
from streamforest.connectors.kafka.testing import LocalBroker, TansuBroker

GROUP, TOPIC, SESSION_MS = "g", "t", 6000


def _config(bootstrap: str, name: str | None) -> WorkerConfig:
    return WorkerConfig(bootstrap_servers=bootstrap, group_id=GROUP, topics=Topics(TOPIC, "p"),
                        session_timeout_ms=SESSION_MS, max_poll_interval_ms=10_000, stall_timeout=20.0,
                        instance_id=name)


def _formed(members: dict) -> bool:
    """The four partitions shared among the members, each member given some, one of them stable (noida-db keeps
    rebalancing a formed group: a member keeps its partitions meanwhile)."""
    parts = [tp.partition for c in members.values() for tp in c.assignment()]
    return sorted(parts) == [0, 1, 2, 3] and all(c.assignment() for c in members.values()) and \
        any(c.group_metadata().state == MemberState.STABLE for c in members.values())


def _show(members: dict, admin: KafkaAdminClient, t0: float) -> None:
    listed = [m.member_id for m in clients.group_members(admin, GROUP, TOPIC)]
    for name, c in members.items():
        meta, named = c.group_metadata(), clients.join_leader(c)
        print(f"  {time.monotonic() - t0:5.1f} s  {name}: {meta.state!s:<13} member {meta.member_id} "
              f"partitions {sorted(tp.partition for tp in c.assignment())} leader named {named and named[0]}")
    print(f"          DescribeGroups members: {listed}")


def _poll_until(members: dict, admin: KafkaAdminClient, seconds: float) -> float | None:
    """Poll every member in turn until the group is formed (the seconds it took) or ``seconds`` pass (``None``)."""
    t0 = time.monotonic()
    shown = t0
    while time.monotonic() - t0 < seconds:
        for c in members.values():
            c.poll(timeout_ms=50)
        if _formed(members):
            _show(members, admin, t0)
            return time.monotonic() - t0
        if time.monotonic() - shown >= 5:
            _show(members, admin, t0)
            shown = time.monotonic()
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=["tansu", "noida"], default="tansu")
    static = parser.parse_args().broker == "tansu"
    with tempfile.TemporaryDirectory(prefix="dead-leader-") as tmp:
        broker = TansuBroker(Path(tmp)) if static else LocalBroker(Path(tmp) / "data")
        broker.start()
        members: dict = {}
        try:
            bs = broker.bootstrap
            admin = clients.group_admin(_config(bs, None))
            admin.create_topics([NewTopic(TOPIC, 4, 1)])

            def member(name: str):
                # Eager rebalancing: with the worker's cooperative protocol, kafka-python's plain consumers can leave
                # the partitions the leader revoked in nobody's hands (no follow-up rebalance comes), a fault of its
                # own that the worker's stall check handles and this reproduction would stop at.
                c = clients.consumer(_config(bs, name if static else None),
                                     partition_assignment_strategy=[RangePartitionAssignor])
                c.subscribe([TOPIC])
                return c

            members["a"] = member("a")
            assert _poll_until(members, admin, 60) is not None, "a alone did not form the group"
            members["b"] = member("b")
            took = _poll_until(members, admin, 120)
            assert took is not None, "a and b did not form the group"
            leader = clients.join_leader(members["b"])[0]
            dead = next(n for n, c in members.items() if c.group_metadata().member_id == leader)
            print(f"formed with a and b in {took:.1f} s; leader {leader} ({dead}): stopping it without a LeaveGroup")
            gone = members.pop(dead)
            gone._coordinator.is_dynamic_member = lambda: False  # no LeaveGroup on close: what a SIGKILL leaves
            gone.close()
            if static:
                _poll_until(members, admin, 2 * SESSION_MS / 1000)  # the survivor's heartbeats expire it
            print(f"{dead} started again" + (" with its instance id" if static else " (a new dynamic member)"))
            members[dead] = member(dead)
            took = _poll_until(members, admin, 60)
            if took is not None:
                print(f"the group formed again in {took:.1f} s: not reproduced this time")
                return
            named = {clients.join_leader(c)[0] for c in members.values() if clients.join_leader(c)}
            listed = {m.member_id for m in clients.group_members(admin, GROUP, TOPIC)}
            print(f"STUCK for 60 s: JoinGroup answers name leader(s) {sorted(named)}, DescribeGroups lists "
                  f"{sorted(listed)}")
            for name in sorted(named):
                t0 = time.monotonic()
                if name in listed:
                    what = f"LeaveGroup: {clients.remove_members(admin, GROUP, [clients.Member(name)])[name]}"
                else:
                    what = clients.clear_departed_leader(admin, GROUP, TOPIC, name, SESSION_MS)
                print(f"removed dead leader {name} in {time.monotonic() - t0:.1f} s ({what})")
            took = _poll_until(members, admin, 90)
            print("the group formed again" + (f" {took:.1f} s after the removal" if took is not None else
                                               ": NO, not within 90 s"))
        finally:
            for c in members.values():
                c.close()
            broker.close() if static else broker.stop()


if __name__ == "__main__":
    main()
