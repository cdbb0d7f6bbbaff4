"""The rebalance listener with no broker: kafka-python 3 calls it on the consumer's I/O thread, so it queues what
it was told, and the worker's loop hands partitions over and takes new ones between two messages; at-least-once,
while the loop is in its poll, the listener commits a revoked partition's progress first.

The consumer and the partition tasks stand in only for what a hand-over calls (assignment, pause, checkpoint,
close): the group tests (``test_kafka_group.py``) run the same path against real brokers.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from types import SimpleNamespace

from kafka import TopicPartition

from streamforest.connectors.kafka.worker import Worker, _Listener


class _Task:
    """A partition task that records what the hand-over did to it, and on which thread."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.calls: list[tuple[str, str]] = []
        self.committed_position: int | None = None

    def checkpoint(self, consumer, force_state: bool = False) -> bool:
        self.calls.append(("checkpoint" if force_state else "commit", threading.current_thread().name))
        return True

    def close(self, abort: bool = False) -> None:
        self.calls.append(("close", threading.current_thread().name))

    def prepare_commit(self, consumer, force_state: bool = False) -> dict:
        self.calls.append(("prepare" if force_state else "prepare unforced", threading.current_thread().name))
        return {TopicPartition("input", self.partition): self.partition}

    def committed(self, offsets: dict) -> None:
        self.calls.append(("committed", threading.current_thread().name))


def _consumer(assigned: set[int], commits: list | None = None) -> SimpleNamespace:
    async def commit(offsets, timeout_ms=None):
        commits.append((offsets, threading.current_thread().name))

    return SimpleNamespace(assignment=lambda: {TopicPartition("input", p) for p in assigned},
                           pause=lambda *tps: None, _coordinator=SimpleNamespace(_commit_offsets_sync_async=commit))


def _worker(partitions: tuple[int, ...]) -> Worker:
    w = Worker.__new__(Worker)
    w.config = SimpleNamespace(topics=SimpleNamespace(input="input"), exactly_once=False)
    w.metrics = SimpleNamespace(rebalances=SimpleNamespace(inc=lambda: None))
    w.tasks = {p: _Task(p) for p in partitions}
    w.pending = {}
    w.rebalance_events = deque()
    w.was_member = True
    w.commits = []
    w.consumer = _consumer(set(partitions), w.commits)
    w.polling = False
    return w


def _on_io_thread(call) -> None:
    """``call()`` on a thread named as the I/O thread; coroutines it returns are run there to the end."""
    def run() -> None:
        out = call()
        for coro in out if isinstance(out, tuple) else (out,):
            if asyncio.iscoroutine(coro):
                asyncio.run(coro)

    t = threading.Thread(target=run, name="kafka-io")
    t.start()
    t.join()


def test_the_listener_only_queues_while_the_loop_processes_and_the_loop_hands_over():
    w = _worker((1, 3))
    listener = _Listener(w, w.consumer)
    task = w.tasks[3]
    _on_io_thread(lambda: listener.on_partitions_revoked([TopicPartition("input", 3)]))
    # Nothing touched on the I/O thread: a message of partition 3 in the loop's hands finishes on a live task.
    assert w.tasks[3] is task and task.calls == []
    assert not w._settled()  # an event not yet applied: the worker is not idle
    w._apply_rebalances()
    assert 3 not in w.tasks and sorted(w.tasks) == [1]
    main = threading.current_thread().name
    assert task.calls == [("checkpoint", main), ("close", main)]  # committed (state forced), then let go
    assert w.tasks[1].calls == []
    assert w.commits == []


def test_while_the_loop_polls_the_listener_commits_a_revocation_before_it_returns():
    w = _worker((1, 3))
    w.polling = True  # the loop waits in kafka-python's poll, which calls the listener
    listener = _Listener(w, w.consumer)
    task = w.tasks[3]
    _on_io_thread(lambda: listener.on_partitions_revoked([TopicPartition("input", 3)]))
    assert task.calls == [("prepare", "kafka-io"), ("committed", "kafka-io")]  # state forced, offsets committed
    assert w.commits == [({TopicPartition("input", 3): 3}, "kafka-io")]
    assert w.tasks[3] is task  # still the loop's to let go
    w._apply_rebalances()
    main = threading.current_thread().name
    assert task.calls[2:] == [("checkpoint", main), ("close", main)] and 3 not in w.tasks
    assert w.tasks[1].calls == []


def test_events_apply_in_order_and_lost_partitions_are_not_committed():
    w = _worker((1,))
    listener = _Listener(w, w.consumer)
    task = w.tasks[1]
    _on_io_thread(lambda: (listener.on_partitions_lost([TopicPartition("input", 1)]),
                           listener.on_partitions_assigned([TopicPartition("input", 1), TopicPartition("input", 2)])))
    w._apply_rebalances()
    assert task.calls == [("close", threading.current_thread().name)]  # fenced: nothing to commit
    assert w.tasks == {} and sorted(w.pending) == [1, 2]  # both wait for a new task


def test_events_of_a_replaced_consumer_are_dropped():
    w = _worker((1,))
    old = _Listener(w, w.consumer)
    w.consumer = _consumer({1})  # a rejoin replaced the consumer; its partitions were handed over before
    _on_io_thread(lambda: old.on_partitions_assigned([TopicPartition("input", 2)]))
    w._apply_rebalances()
    assert w.pending == {} and not w.rebalance_events
