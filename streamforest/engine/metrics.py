"""Engine metrics with prometheus-client: one registry per engine, names ``streamforest_*`` in base units."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class EngineMetrics:
    """The engine's counters, gauges and histograms, registered in ``registry`` (a fresh one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.records_consumed = Counter("streamforest_records_consumed", "Input messages read, by type",
                                        ["kind"], registry=r)
        self.records_produced = Counter("streamforest_records_produced", "Output records emitted, by type",
                                        ["kind"], registry=r)
        self.records_failed = Counter("streamforest_records_failed", "Input messages refused (dead letters)",
                                      ["kind"], registry=r)
        self.features_arrived = Counter("streamforest_features_arrived", "Features that arrived whole",
                                        registry=r)
        self.generations_grown = Counter("streamforest_generations_grown", "Generations of trees grown",
                                         registry=r)
        self.generations_pruned = Counter("streamforest_generations_pruned",
                                          "Generations dropped by pruning or merged away", registry=r)
        self.trees_alive = Gauge("streamforest_trees_alive", "Trees alive, by stream", ["stream"], registry=r)
        self.samples_per_stream = Gauge("streamforest_samples", "Samples known, by stream", ["stream"], registry=r)
        self.training_seconds = Histogram("streamforest_training_seconds", "Time spent growing trees",
                                          buckets=SECONDS_BUCKETS, registry=r)
        self.encoding_seconds = Histogram("streamforest_encoding_seconds", "Time spent encoding samples",
                                          buckets=SECONDS_BUCKETS, registry=r)

    def consumed(self, kind: str) -> None:
        self.records_consumed.labels(kind).inc()

    def produced(self, kind: str, n: int = 1) -> None:
        self.records_produced.labels(kind).inc(n)

    def failed(self, kind: str) -> None:
        self.records_failed.labels(kind).inc()

    def samples(self, stream: str, n: int) -> None:
        self.samples_per_stream.labels(stream).set(n)

    def stream_dropped(self, stream: str) -> None:
        for gauge in (self.trees_alive, self.samples_per_stream):
            try:
                gauge.remove(stream)
            except KeyError:
                pass

    def feature_arrived(self, stream: str) -> None:
        self.features_arrived.inc()

    def generation(self, stream: str, report: Any, n_trees: int) -> None:
        self.generations_grown.inc()
        self.generations_pruned.inc(len(report.pruned) + len(report.merged))
        self.trees_alive.labels(stream).set(n_trees)
