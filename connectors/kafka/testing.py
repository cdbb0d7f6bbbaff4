"""A local Kafka-protocol broker for tests and benchmarks: noida-db (a PyPI wheel, ``dev`` extra) on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from streamforest.connectors.kafka import clients
from streamforest.connectors.kafka.changelog import Changelog
from streamforest.connectors.kafka.config import WorkerConfig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _noida() -> str:
    exe = shutil.which("noida-db") or str(Path(sys.executable).parent / "noida-db")
    if not os.path.exists(exe):
        raise RuntimeError("noida-db is not installed: pip install -e '.[dev]' (the Kafka tests need a real broker)")
    return exe


class LocalBroker:
    """A noida-db Kafka broker in the foreground of a child process (stopped by its PID); ``stop``/``start`` keep
    its data directory, so a restart is a broker restart.


    Examples
    --------
    >>> LocalBroker(Path("/tmp/x")).bootstrap.startswith("127.0.0.1:")
    True
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> None:
        log = open(self.data_dir.parent / "broker.log", "ab")
        self.proc = subprocess.Popen([_noida(), "start", "--only", "kafka", "--kafka-port", str(self.port),
                                      "--data-dir", str(self.data_dir)], stdout=log, stderr=log,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"noida-db exited with {self.proc.returncode}: see {log.name}")
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
                admin.list_topics()
                admin.close()
                return
            except Exception:
                time.sleep(0.3)
        raise RuntimeError(f"noida-db did not answer on {self.bootstrap} in {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is not None:
            # The noida-db script runs the broker as its child: signal the whole process group (its own session),
            # or the broker outlives the test run.
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    os.killpg(self.proc.pid, 0)  # raises once no process of the group is left
                    time.sleep(0.1)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None


def wait_committed(bootstrap: str, group: str, topic: str, timeout: float | None = None,
                   check: Callable[[], None] | None = None) -> None:
    """Return once ``group`` has committed every offset of ``topic`` that exists now (polled every 0.1 s);
    ``check()`` runs between polls (e.g. to fail when the worker died); TimeoutError after ``timeout`` seconds."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
        end = c.end_offsets(tps)
        deadline = None if timeout is None else time.monotonic() + timeout
        while any((c.committed(tp) or 0) < end[tp] for tp in tps):
            if check is not None:
                check()
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"group {group} did not commit {topic} to its end in {timeout:.0f} s")
            time.sleep(0.1)
    finally:
        c.close()


def wait_snapshots(config: WorkerConfig, timeout: float | None = None, check: Callable[[], None] | None = None
                   ) -> None:
    """Return once every non-empty input partition's latest state snapshot (on the changelog) covers the input
    that exists now (polled every 0.5 s); ``check()`` runs between polls; TimeoutError after ``timeout`` seconds."""
    reader = clients.reader(config)
    try:
        tps = [TopicPartition(config.topics.input, p) for p in sorted(reader.partitions_for_topic(config.topics.input))]
        ends = {tp.partition: end for tp, end in reader.end_offsets(tps).items() if end}
    finally:
        reader.close()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        covered = {}
        for p in ends:
            changelog, reader = Changelog(config.topics.state, p, config.state_chunk_bytes), clients.reader(config)
            try:
                manifest = changelog.read_manifest(reader)
            finally:
                reader.close()
            covered[p] = manifest["offset"] if manifest else 0
        if covered == ends:
            return
        if check is not None:
            check()
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"state snapshots cover input offsets {covered}, the input ends at {ends}")
        time.sleep(0.5)
