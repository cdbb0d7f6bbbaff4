"""Real Kafka-protocol brokers for the session, each on a free 127.0.0.1 port and stopped by its PID: noida-db
(``broker``: transactions, read_committed, exactly-once) and Tansu (``tansu``: the group paths, at-least-once).
Required: when one is missing or does not start, its tests fail (they are not skipped)."""

from __future__ import annotations

import pytest
from kafka_harness import STARTED, Broker

from streamforest.connectors.kafka.testing import TansuBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("noida") / "data")
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="session")
def tansu(tmp_path_factory):
    b = TansuBroker(tmp_path_factory.mktemp("tansu"))
    b.start()
    yield b
    b.close()


@pytest.fixture(autouse=True)
def _no_worker_left():
    yield
    while STARTED:
        STARTED.pop().kill()
