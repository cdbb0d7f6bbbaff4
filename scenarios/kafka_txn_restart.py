"""noida-db and a transaction open across its restart: a minimal reproduction, no worker involved.

A transactional producer commits one record, opens a transaction and writes a second, then the broker's Kafka
service is stopped and started again (``LocalBroker.restart``, the data directory kept). The producer goes on in the
same transaction, writes a third record and commits: the broker answers the commit with success. A read_committed
reader then never sees the third record, and a later transaction of a new producer with the same transactional id,
committed as well, stays invisible too: the partition's last stable offset stays at the third record, whose
transaction the broker no longer knows and never ends. A second restart ends it (the broker aborts the transactions
it finds open when it starts), and the later commit appears.
``python -m scenarios.kafka_txn_restart`` prints what the reader sees at each step.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from streamforest.connectors.kafka.testing import LocalBroker


def committed(bootstrap: str) -> tuple[list[str], int]:
    """The values a read_committed reader finds in partition 0 of topic ``t`` (5 s of polls), and the end offset it
    is given (the last stable offset)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    tp = TopicPartition("t", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    values: list[str] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=300).values():
            values += [r.value.decode() for r in recs]
    end = c.end_offsets([tp])[tp]
    c.close()
    return values, end


def producer(bootstrap: str) -> KafkaProducer:
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx", enable_idempotence=True, acks="all")
    p.init_transactions()
    return p


def transaction(p: KafkaProducer, value: bytes, commit: bool = True) -> None:
    """A transaction of ``p`` writing ``value`` to ``t``, acknowledged; committed, or left open."""
    p.begin_transaction()
    p.send("t", value).get(timeout=30)
    if commit:
        p.commit_transaction()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = LocalBroker(Path(tmp) / "data")
        broker.start()
        try:
            bs = broker.bootstrap
            admin = KafkaAdminClient(bootstrap_servers=bs)
            admin.create_topics([NewTopic("t", 1, 1)])
            admin.close()
            p = producer(bs)
            transaction(p, b"committed before the restart")
            transaction(p, b"open across the restart", commit=False)
            broker.restart(down=0)
            p.send("t", b"written after the restart, committed").get(timeout=30)
            p.commit_transaction()
            print("the commit after the restart succeeded; read_committed sees", committed(bs))
            p.close()
            p = producer(bs)
            transaction(p, b"a new producer's transaction, committed")
            p.close()
            print("after a new producer's commit, read_committed sees", committed(bs))
            broker.restart(down=0)
            print("after a second restart, read_committed sees", committed(bs))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
