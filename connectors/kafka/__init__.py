"""The engine as a Kafka application (``pip install 'streamforest[kafka]'``).

Shaped like Quix Streams: :class:`Worker` orchestrates (group membership, the poll loop, rebalances, shutdown);
``clients`` holds thin wrappers around kafka-python's consumer, producers and admin client; each assigned input
partition is a ``task`` with its own pure :class:`~streamforest.engine.core.Engine` and one checkpoint routine
(outputs, then state on the ``changelog``, then offsets; one transaction under exactly-once).
"""

from streamforest.connectors.kafka.config import Topics, WorkerConfig
from streamforest.connectors.kafka.metrics import WorkerMetrics
from streamforest.connectors.kafka.worker import Worker

__all__ = ["Topics", "Worker", "WorkerConfig", "WorkerMetrics"]
