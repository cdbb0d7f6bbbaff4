"""The engine as a Kafka application (``pip install 'streamforest[kafka]'``).

Shaped like Quix Streams: :class:`Worker` orchestrates (group membership, the poll loop, rebalances, shutdown);
``clients`` holds thin wrappers around kafka-python's consumer, producers and admin client; each assigned input
partition is a ``task`` with its own pure :class:`~streamforest.engine.core.Engine` and one checkpoint routine
(outputs, then state on the ``changelog``, then offsets; one transaction under exactly-once).

The names below are imported on first use, so that ``streamforest --help`` works without kafka-python and a
missing one is reported with the extra that installs it.
"""

from __future__ import annotations

from typing import Any

_PUBLIC = {"Topics": "config", "WorkerConfig": "config", "WorkerMetrics": "metrics", "Worker": "worker",
           "KafkaTransport": "transport"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from streamforest.optional import require

    require("kafka", "the Kafka connector")
    module = require(f"{__name__}.{_PUBLIC[name]}", "the Kafka connector")
    return getattr(module, name)
