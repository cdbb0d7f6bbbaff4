"""The worker's stall rule on its own, with no broker: when a join the coordinator holds waits for evidence.

The group tests (``test_kafka_group.py``) run it against real brokers, where the race it settles (a dead static
member's records standing still for just under the limit when the survivor's held join reaches it) comes only now and
then; here the decision is driven by the clock directly. The consumer stands in only for its current assignment.
"""

from __future__ import annotations

from types import SimpleNamespace

from kafka import TopicPartition

from streamforest.connectors.kafka import Worker

LIMIT = 20.0


def _worker(others: dict[int, tuple[int, int, float]], mine: tuple[int, ...] = ()) -> Worker:
    """A worker whose join has been held since t = 0, watching ``others`` (partition -> committed offset, end, since
    when it stands still); a partition has records when its committed offset is short of its end."""
    w = Worker.__new__(Worker)
    w.was_member = True
    w.unsettled_since = 0.0
    w.others = others
    w.consumer = SimpleNamespace(assignment=lambda: {TopicPartition("input", p) for p in mine})
    w._records_waiting = lambda partition, committed, end: committed < end
    return w


def test_a_held_join_waits_for_partitions_standing_still_since_early_in_it():
    # The dead member's partition 1 has stood still with records since t = 2: at t = 20 the join has waited the
    # limit, the partition 18 s; the stall waits for it, and from t = 22 it acts (the partition then stalled too).
    w = _worker({1: (5, 9, 2.0)})
    assert w._evidence_ripening(20.0, LIMIT)
    assert not w._evidence_ripening(22.0, LIMIT)


def test_no_wait_without_such_evidence():
    assert not _worker({1: (5, 9, 12.0)})._evidence_ripening(20.0, LIMIT)  # standing still only since late in it
    assert not _worker({1: (9, 9, 2.0)})._evidence_ripening(20.0, LIMIT)  # nothing to read
    assert not _worker({1: (5, 9, 2.0)}, mine=(1,))._evidence_ripening(20.0, LIMIT)  # the worker's own partition
    assert not _worker({})._evidence_ripening(20.0, LIMIT)
    never = _worker({1: (5, 9, 2.0)})
    never.was_member = False  # the group still forming: nothing has moved yet, nothing is evidence
    assert not never._evidence_ripening(20.0, LIMIT)
