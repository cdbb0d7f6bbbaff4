"""The changelog against a real broker: a state bigger than the broker's message size limit round-trips."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from kafka.errors import MessageSizeTooLargeError
from kafka_harness import create_topics

from streamforest.connectors.kafka import clients
from streamforest.connectors.kafka.changelog import Changelog, snapshot_bytes
from streamforest.connectors.kafka.config import DEFAULT_MAX_MESSAGE_BYTES, Topics, WorkerConfig
from streamforest.engine.checkpoint import stream_arrays
from streamforest.engine.core import Engine, EngineConfig

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _engine(n: int = 4000, d: int = 40) -> Engine:
    rng = np.random.default_rng(0)
    e = Engine(EngineConfig(forest={"random_state": 0, "trees_per_generation": 2, "max_depth": 3}, publish="none"))
    ids = [str(i) for i in range(n)]
    y = rng.integers(0, 2, n)
    e.process(orjson.dumps({"v": 1, "type": "samples", "stream": "big",
                            "samples": [{"id": i, "label": int(v)} for i, v in zip(ids, y, strict=True)]}))
    for j in range(d):
        e.process(orjson.dumps({"v": 1, "type": "feature", "stream": "big", "name": f"f{j}", "ids": ids,
                                "values": rng.normal(size=n).tolist()}))
    return e


def test_state_over_the_message_size_limit(broker):
    prefix = "bigstate"
    create_topics(broker.bootstrap, prefix)
    config = WorkerConfig(bootstrap_servers=broker.bootstrap, topics=Topics(f"{prefix}.input", prefix))
    engine = _engine()
    data = snapshot_bytes(engine.streams["big"])
    assert len(data) > DEFAULT_MAX_MESSAGE_BYTES
    producer = clients.producer(config, "bigstate-test")
    producer.init_transactions()
    # The limit is real: the broker refuses the snapshot as one record.
    plain = clients.producer(WorkerConfig(bootstrap_servers=broker.bootstrap, state_chunk_bytes=1_000_000))
    plain.config["max_request_size"] = 4 * len(data)
    with pytest.raises(MessageSizeTooLargeError):
        plain.send(config.topics.state, partition=1, key=b"whole", value=data).get(timeout=30)
    plain.close()

    log = Changelog(config.topics.state, 1, config.state_chunk_bytes)
    producer.begin_transaction()
    log.write(producer, engine.streams, {"big"}, 123, config.topics.input)
    producer.commit_transaction()
    assert len(log.manifest["streams"]["big"]["offsets"]) == -(-len(data) // config.state_chunk_bytes)
    # A second snapshot supersedes the first; restore reads the latest only.
    engine.streams["big"].labels[0] = engine.streams["big"].labels[0]
    producer.begin_transaction()
    log.write(producer, engine.streams, {"big"}, 456, config.topics.input)
    producer.commit_transaction()
    producer.close()

    restored = Changelog(config.topics.state, 1, config.state_chunk_bytes)
    reader = clients.reader(config)
    streams = restored.restore(reader)
    reader.close()
    assert restored.manifest["offset"] == 456
    a_arrays, a_header = stream_arrays(streams["big"])
    b_arrays, b_header = stream_arrays(engine.streams["big"])
    assert a_header == b_header
    for k in b_arrays:
        np.testing.assert_array_equal(a_arrays[k], b_arrays[k])
