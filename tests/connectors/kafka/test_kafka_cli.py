"""The ``kafka`` CLI group's options (environment included) and the worker's metric names; no broker needed."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from streamforest.cli import build_parser, main
from streamforest.connectors.kafka.config import WorkerConfig
from streamforest.connectors.kafka.metrics import KindEngineMetrics, WorkerMetrics

METRICS = {
    "streamforest_consumer_lag_records", "streamforest_kafka_records_in_total", "streamforest_kafka_records_out_total",
    "streamforest_kafka_dead_letters_total", "streamforest_kafka_commits_total",
    "streamforest_kafka_transactions_aborted_total", "streamforest_kafka_rebalances_total",
    "streamforest_kafka_group_stalls_total", "streamforest_kafka_group_members_removed_total",
    "streamforest_kafka_restore_seconds", "streamforest_kafka_state_bytes", "streamforest_process_seconds",
}


def test_options_from_environment(monkeypatch):
    monkeypatch.setenv("STREAMFOREST_BOOTSTRAP_SERVERS", "b1:9092,b2:9092")
    monkeypatch.setenv("STREAMFOREST_GUARANTEE", "at-least-once")
    monkeypatch.setenv("STREAMFOREST_COMMIT_INTERVAL", "2.5")
    monkeypatch.setenv("STREAMFOREST_CREATE_TOPICS", "true")
    monkeypatch.setenv("STREAMFOREST_FOREST_PARAM", "trees_per_generation=7 max_depth=4")
    monkeypatch.setenv("STREAMFOREST_MAX_POLL_INTERVAL", "45")
    monkeypatch.setenv("STREAMFOREST_STALL_TIMEOUT", "90")
    args = build_parser().parse_args(["kafka", "run", "--commit-interval", "3"])
    assert args.bootstrap_servers == "b1:9092,b2:9092"
    assert args.guarantee == "at-least-once"
    assert args.commit_interval == 3.0  # the command line wins
    assert args.create_topics is True
    assert args.forest_param == ["trees_per_generation=7", "max_depth=4"]
    assert args.max_poll_interval == 45.0
    assert args.stall_timeout == 90.0


def test_bad_environment_value_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setenv("STREAMFOREST_GUARANTEE", "twice")
    assert main(["kafka", "run"]) == 1
    assert "STREAMFOREST_GUARANTEE='twice'" in capsys.readouterr().err


def test_worker_metric_names():
    registry = CollectorRegistry()
    KindEngineMetrics(registry)
    m = WorkerMetrics(registry)
    m.records_in.labels("t").inc()
    m.records_out.labels("t").inc()
    m.consumer_lag.labels("t", "0").set(1)
    m.state_bytes.labels("0").set(1)
    m.process_seconds.labels("feature").observe(0.1)
    names = {s.name for metric in registry.collect() for s in metric.samples}
    names = {n.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum").removesuffix("_created")
             for n in names}
    assert METRICS <= names
    assert "streamforest_consumer_lag_records" in names  # the worker's, with topic and partition labels


@pytest.mark.parametrize("bad", [["--commit-interval", "0"], ["--state-chunk-bytes", "10"],
                                 ["--session-timeout", "30", "--max-poll-interval", "20"],
                                 ["--session-timeout", "10", "--stall-timeout", "10"]])
def test_bad_options_refused(bad, capsys):
    assert main(["kafka", "run", "--bootstrap-servers", "127.0.0.1:1", *bad]) == 1
    assert capsys.readouterr().err.startswith("streamforest kafka:")


def test_a_member_commits_within_half_the_stall_timeout():
    """The others take a committed offset standing still for a stall timeout for a dead holder's: a longer commit
    interval is kept at half the stall timeout, a shorter one as it is."""
    assert WorkerConfig(commit_interval=600, stall_timeout=20).checkpoint_seconds == 10
    assert WorkerConfig(commit_interval=0.3, stall_timeout=20).checkpoint_seconds == 0.3


class _EmptyThenRecords:
    """A consumer whose fetches come back empty ``empty`` times, then with one record (as noida-db answers)."""

    def __init__(self, empty: int) -> None:
        self.empty = empty
        self.polls = 0

    def poll(self, timeout_ms: int) -> dict:
        assert timeout_ms == 0
        self.polls += 1
        return {} if self.polls <= self.empty else {"tp": ["record"]}


def test_quiet_poller_sleeps_between_empty_polls():
    from streamforest.connectors.kafka.clients import QuietPoller

    idle = _EmptyThenRecords(empty=10**9)
    poller = QuietPoller(idle, pauses=(0.005, 0.05))
    assert poller.poll(0.3) == {}
    # 5 + 10 + 20 + 40 ms, then 50 ms pauses: about 9 polls in 0.3 s, not a fetch loop
    assert 5 <= idle.polls <= 12
    busy = _EmptyThenRecords(empty=2)
    poller = QuietPoller(busy, pauses=(0.005, 0.05))
    assert poller.poll(1.0) == {"tp": ["record"]} and busy.polls == 3
    assert poller.pause == 0.005  # records reset the pause
