"""The Kafka worker's metrics (prometheus-client), beside the engine's in the same registry.

Names follow Prometheus conventions: one ``streamforest_`` prefix, base units, counters declared without ``_total``
(the client appends it).
"""

from __future__ import annotations

from typing import get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from streamforest.connectors.kafka.config import TOPIC_OF_TYPE, Topics
from streamforest.engine.messages import Message
from streamforest.engine.metrics import SECONDS_BUCKETS, EngineMetrics

#: The kinds input messages are counted under: the engine's message classes, and ``unknown`` for what is none.
MESSAGE_KINDS = (*(c.__name__.removesuffix("Message").lower() for c in get_args(Message)), "unknown")


class WorkerMetrics:
    """Counters, gauges and histograms of one worker, registered in ``registry``.

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry, generate_latest
    >>> m = WorkerMetrics(CollectorRegistry())
    >>> m.records_in.labels("streamforest.input").inc(3)
    >>> b"streamforest_kafka_records_in_total" in generate_latest(m.registry)
    True
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.consumer_lag = Gauge("streamforest_consumer_lag_records",
                                  "Input records not yet consumed (high watermark - position)",
                                  ["topic", "partition"], registry=r)
        self.records_in = Counter("streamforest_kafka_records_in", "Records consumed, by topic", ["topic"],
                                  registry=r)
        self.records_out = Counter("streamforest_kafka_records_out", "Records produced, by topic", ["topic"],
                                   registry=r)
        self.dead_letters = Counter("streamforest_kafka_dead_letters", "Dead letters produced", registry=r)
        self.commits = Counter("streamforest_kafka_commits", "Checkpoints committed (one per partition each)",
                               registry=r)
        self.transactions_aborted = Counter("streamforest_kafka_transactions_aborted",
                                            "Transactions aborted (the partition is restored and replayed)",
                                            registry=r)
        self.rebalances = Counter("streamforest_kafka_rebalances", "Partition assignments and revocations",
                                  registry=r)
        self.group_stalls = Counter("streamforest_kafka_group_stalls",
                                    "Times the worker found its group stalled (a join never answered, input in "
                                    "nobody's hands) and left and joined it again", registry=r)
        self.members_removed = Counter("streamforest_kafka_group_members_removed",
                                       "Members the worker removed from its group (LeaveGroup by member id): each "
                                       "held an input partition whose records stood still for the stall timeout, or "
                                       "was a departed member the coordinator still named as the group's leader",
                                       registry=r)
        self.restore_seconds = Histogram("streamforest_kafka_restore_seconds",
                                         "Time to restore a partition's state from the changelog",
                                         buckets=SECONDS_BUCKETS, registry=r)
        self.state_bytes = Gauge("streamforest_kafka_state_bytes", "Bytes of the last state snapshot, by partition",
                                 ["partition"], registry=r)
        self.process_seconds = Histogram("streamforest_process_seconds", "Engine time per input message, by kind",
                                         ["kind"], buckets=SECONDS_BUCKETS, registry=r)


class KindEngineMetrics(EngineMetrics):
    """Engine metrics that remember the kind of the last message consumed, so that the worker can time messages
    by kind without decoding them a second time."""

    last_kind = "unknown"

    def consumed(self, kind: str) -> None:
        self.last_kind = kind
        super().consumed(kind)


def zero_series(metrics: WorkerMetrics, engine_metrics: EngineMetrics, topics: Topics) -> None:
    """Create every labelled counter and histogram of a worker at 0 for each topic and kind it can have.

    Prometheus computes a rate from two scrapes of a series: a series born with its first count (a burst of
    messages between two scrapes, a restore before the first scrape) shows no rate and no quantile at all.

    Examples
    --------
    >>> from prometheus_client import generate_latest
    >>> m = WorkerMetrics()
    >>> zero_series(m, EngineMetrics(m.registry), Topics())
    >>> b'streamforest_process_seconds_count{kind="feature"} 0.0' in generate_latest(m.registry)
    True
    """
    metrics.records_in.labels(topics.input)
    for record_type in TOPIC_OF_TYPE:
        metrics.records_out.labels(topics.output(record_type))
        engine_metrics.records_produced.labels(record_type)
    for kind in MESSAGE_KINDS:
        metrics.process_seconds.labels(kind)
        engine_metrics.records_consumed.labels(kind)
        engine_metrics.records_failed.labels(kind)
