"""Records appended in bulk (``blocks.append_block``) are, to a reader, the records ``KafkaProducer.send`` writes:
same partitions, order, keys, values and headers, across batch cuts, appended after records sent one by one, in
transactions and compressed."""

from __future__ import annotations

import numpy as np
import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka_harness import read_topic

from streamforest.connectors.kafka import blocks, clients
from streamforest.connectors.kafka.config import Topics, WorkerConfig
from streamforest.connectors.kafka.outputs import Origin, RecordBlock, outputs
from streamforest.engine.records import RecordBatch

pytestmark = pytest.mark.kafka


def _block(n: int, topic: str, seed: int) -> RecordBlock:
    """A republication block of ``n`` prediction records, some of them long (batch cuts at every size)."""
    rng = np.random.default_rng(seed)
    ids = [f"id{k}" + "x" * int(rng.integers(0, 300)) for k in range(n)]
    proba = rng.random((n, 2))
    block = outputs(Topics(prefix=topic), RecordBatch.of_predictions("s", ids, 3, np.array([0, 1]), proba),
                    Origin("in", 0, 0, b"s", b"{}"))
    assert isinstance(block, RecordBlock)
    return block


def _seen(bootstrap: str, topic: str) -> list:
    return [(r.partition, r.offset, r.key, r.value, r.headers) for r in read_topic(bootstrap, topic)]


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_blocks_read_as_records_sent_one_by_one(broker, guarantee):
    prefix = f"blocks-{guarantee}"
    config = WorkerConfig(bootstrap_servers=broker.bootstrap, topics=Topics(prefix=prefix))
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(f"{prefix}{s}.predictions", 3, 1) for s in ("-bulk", "-each")])
    admin.close()
    saved = dict(clients.BATCHING)
    clients.BATCHING["batch_size"] = 16 * 1024  # many batch cuts in a few hundred records
    try:
        made = {}
        for way in ("bulk", "each"):
            topic = f"{prefix}-{way}"
            tid = f"{prefix}-{way}" if guarantee == "exactly-once" else None
            producer = clients.TrackedProducer(clients.producer(config, tid))
            assert producer.bulk
            if tid:
                producer.init_transactions()
                producer.begin_transaction()
            first, second = _block(50, topic, 0), _block(700, topic, 1)
            producer.send_records(first.records(), keyless_partition=0)  # an open batch for the block to fill
            if way == "bulk":
                assert producer.send_block(second) == 700
            else:
                producer.send_records(second.records(), keyless_partition=0)
            producer.check_delivered()
            if tid:
                producer.commit_transaction()
            producer.close()
            made[way] = _seen(broker.bootstrap, f"{topic}.predictions")
    finally:
        clients.BATCHING.clear()
        clients.BATCHING.update(saved)
    assert len(made["bulk"]) == 750
    assert made["bulk"] == made["each"]
    assert len({p for p, *_ in made["bulk"]}) == 3


def test_header_bytes_are_kafka_pythons():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    headers = [("streamforest.type", b"prediction"), ("streamforest.model_version", b"12")]
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, 0, b"k", b"v", headers)
    record = bytes(builder._buffer[DefaultRecordBatchBuilder.HEADER_STRUCT.size:])
    assert record.endswith(blocks.header_bytes(headers))
