"""Thin wrappers around kafka-python: the worker's consumer and producers, and topic administration."""

from __future__ import annotations

import logging
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

from streamforest.connectors.kafka.config import COMPACTED, OUTPUTS, WorkerConfig

log = logging.getLogger("streamforest.kafka")


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
        max_poll_interval_ms=600_000, group_instance_id=config.instance_id, **config.client)
    settings.update(overrides)
    return KafkaConsumer(**settings)


def reader(config: WorkerConfig, **overrides: Any) -> KafkaConsumer:
    """A group-less consumer for assigned partitions (changelog restore, ``tail``), committed reads only."""
    settings = dict(bootstrap_servers=config.bootstrap_servers, group_id=None, enable_auto_commit=False,
                    auto_offset_reset="earliest", isolation_level="read_committed", **config.client)
    settings.update(overrides)
    return KafkaConsumer(**settings)


def producer(config: WorkerConfig, transactional_id: str | None = None) -> KafkaProducer:
    """An idempotent producer; transactional when ``transactional_id`` is given."""
    settings: dict[str, Any] = dict(
        bootstrap_servers=config.bootstrap_servers, enable_idempotence=True, acks="all",
        compression_type=_compression(config), linger_ms=5, batch_size=256 * 1024,
        max_request_size=config.state_chunk_bytes + 64 * 1024, **config.client)
    if transactional_id is not None:
        settings.update(transactional_id=transactional_id, transaction_timeout_ms=60_000)
    return KafkaProducer(**settings)


def admin(config: WorkerConfig) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=config.bootstrap_servers, **config.client)


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
