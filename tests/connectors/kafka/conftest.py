"""A real Kafka-protocol broker for the session: noida-db on a free 127.0.0.1 port, data in a temporary directory,
stopped by its PID. Required: when noida-db is missing or does not start, the tests fail (they are not skipped)."""

from __future__ import annotations

import pytest
from kafka_harness import STARTED, Broker


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("noida") / "data")
    b.start()
    yield b
    b.stop()


@pytest.fixture(autouse=True)
def _no_worker_left():
    yield
    while STARTED:
        STARTED.pop().kill()
