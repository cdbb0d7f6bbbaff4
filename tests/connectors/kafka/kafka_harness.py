"""Helpers of the Kafka tests: a noida-db broker process, topics, reading outputs, worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import orjson
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from streamforest.connectors.kafka.cli import message_key
from streamforest.connectors.kafka.testing import LocalBroker as Broker  # noqa: F401  (conftest's fixture)

ROOT = Path(__file__).resolve().parents[3]
FOREST = ["--forest-param", "trees_per_generation=5"]


# ---------------------------------------------------------------------- topics and records

def create_topics(bootstrap: str, prefix: str, partitions: int = 4) -> str:
    """Input and output topics of ``prefix`` (as ``--create-topics`` would); returns the input topic."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    compact = {"cleanup.policy": "compact"}
    admin.create_topics([NewTopic(f"{prefix}.input", partitions, 1)] + [
        NewTopic(f"{prefix}.{name}", partitions, 1, topic_configs=compact if name in ("predictions", "encodings",
                                                                                     "state") else {})
        for name in ("predictions", "encodings", "feedback", "errors", "state")])
    admin.close()
    return f"{prefix}.input"


def produce(bootstrap: str, topic: str, lines: list[bytes]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    for line in lines:
        p.send(topic, key=message_key(line), value=line)
    p.flush()
    p.close()


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed") -> list:
    """Every record of ``topic`` up to its end (committed ones only by default)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    out = []
    deadline = time.monotonic() + 120
    while any(c.position(tp) < end[tp] for tp in tps):
        assert time.monotonic() < deadline, f"could not read {topic} to its end"
        for recs in c.poll(timeout_ms=300).values():
            out.extend(r for r in recs if r.offset < end[TopicPartition(r.topic, r.partition)])
    c.close()
    return out


def outputs_by_stream(bootstrap: str, prefix: str, isolation: str = "read_committed") -> dict:
    """{(kind, stream): sorted canonical JSON of its records} and the errors as {(reason, original bytes)}."""
    got: dict = defaultdict(list)
    for kind in ("predictions", "encodings", "feedback"):
        for r in read_topic(bootstrap, f"{prefix}.{kind}", isolation):
            rec = orjson.loads(r.value)
            rec.pop("seconds", None)
            got[(kind, rec["stream"])].append(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))
    errors = []
    for r in read_topic(bootstrap, f"{prefix}.errors", isolation):
        errors.append((dict(r.headers)["__streams.errors.message"].decode(), r.value))
    return {k: sorted(v) for k, v in got.items()}, sorted(errors)


def reference_by_stream(out_dir: Path, raw_lines: list[bytes]) -> tuple[dict, list]:
    """The embedded runtime's outputs in the same shape as :func:`outputs_by_stream`."""
    files = {"predictions": "predictions.jsonl", "encodings": "encodings.jsonl", "feedback": "feedback.jsonl"}
    got: dict = defaultdict(list)
    for kind, name in files.items():
        for line in (out_dir / name).read_bytes().splitlines():
            rec = orjson.loads(line)
            rec.pop("seconds", None)
            got[(kind, rec["stream"])].append(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))
    errors = []
    for line in (out_dir / "errors.jsonl").read_bytes().splitlines():
        rec = orjson.loads(line)
        n = int(rec["source"].rsplit(":", 1)[1])  # the embedded runtime's line number (1-based)
        errors.append((rec["reason"], raw_lines[n - 1]))
    return {k: sorted(v) for k, v in got.items()}, sorted(errors)


# ---------------------------------------------------------------------- workers

#: Every worker started, so that a failing test leaves none running (conftest kills them after each test).
STARTED: list[WorkerProcess] = []


class WorkerProcess:
    """``streamforest kafka run`` in a child process; its log lines are collected as they come."""

    def __init__(self, bootstrap: str, prefix: str, *extra: str, group: str | None = None) -> None:
        cmd = [sys.executable, "-m", "streamforest.cli", "kafka", "run", "--bootstrap-servers", bootstrap,
               "--input-topic", f"{prefix}.input", "--topic-prefix", prefix, "--group-id", group or prefix,
               "--session-timeout", "6", *FOREST, *extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=ROOT)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        STARTED.append(self)

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.decode("utf-8", "replace").rstrip())

    def wait_for(self, text: str, timeout: float = 120.0, count: int = 1) -> None:
        deadline = time.monotonic() + timeout
        while sum(text in line for line in list(self.lines)) < count:
            if self.proc.poll() is not None:
                self._reader.join(5)
                if sum(text in line for line in self.lines) >= count:
                    return
                raise AssertionError(f"worker exited ({self.proc.returncode}) before {text!r}:\n" + self.log())
            assert time.monotonic() < deadline, f"no {text!r} in {timeout:.0f} s:\n" + self.log()
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def wait(self, timeout: float = 300.0) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker still running after {timeout:.0f} s:\n" + self.log()) from None
        self._reader.join(5)
        return rc

    def log(self) -> str:
        return "\n".join(self.lines[-80:])


def join_group(bootstrap: str, prefix: str, *extra: str, join_timeout: float = 30.0, attempts: int = 3
               ) -> WorkerProcess:
    """A worker joining a group that already has a member, once it has partitions (its first "restored" line).

    When the broker never answers its JoinGroup, the worker is started again with the same arguments (a static
    member: the new process takes the member over). noida-db 0.2.3 answers a held JoinGroup by polling the group's
    state every 20 ms; when the other member goes from its JoinGroup response through SyncGroup to its cooperative
    follow-up JoinGroup between two polls, the newcomer's request is never answered and the group waits for it for
    the whole rebalance timeout (seen about once in ten runs on a loaded machine). Apache Kafka answers held joins
    on the state change itself; the workers under test are not what stalls, so the harness retries, not the worker.
    """
    for attempt in range(1, attempts):
        worker = WorkerProcess(bootstrap, prefix, *extra)
        try:
            worker.wait_for("restored", timeout=join_timeout)
            return worker
        except AssertionError:
            if worker.proc.poll() is not None:
                raise
            print(f"no assignment in {join_timeout:.0f} s (attempt {attempt}): starting the worker again:\n"
                  + worker.log(), file=sys.stderr)
            worker.kill()
    worker = WorkerProcess(bootstrap, prefix, *extra)
    worker.wait_for("restored")
    return worker


def wait_finished(bootstrap: str, prefix: str, workers: dict[str, WorkerProcess], *extra: str,
                  timeout: float = 90.0, restarts: int = 2) -> dict[str, WorkerProcess]:
    """The group's workers (by ``--instance-id``, all started with ``--exit-when-idle`` and ``extra``), once every
    one has exited.

    A worker left alone when the other member stops must rejoin the group to take its partitions over; noida-db can
    leave a JoinGroup unanswered (see :func:`join_group`), and then the whole group waits for it for the rebalance
    timeout (minutes): a worker in a rebalance is never idle, and restarting the members into that group was not
    always enough. So while any worker is still running ``timeout`` seconds on, every member is started again in a
    fresh consumer group, at most ``restarts`` times. That also exercises a worker's restart without the group's
    offsets: it restores the changelog's state and replays without republishing up to the published position
    recorded there, so the records are still each written once.
    """
    for attempt in range(restarts + 1):
        deadline = time.monotonic() + timeout
        while any(w.proc.poll() is None for w in workers.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        stuck = [name for name, w in workers.items() if w.proc.poll() is None]
        if not stuck:
            break
        if attempt == restarts:
            raise AssertionError(f"workers {stuck} still running after {restarts} restarts:\n"
                                 + "\n".join(workers[name].log() for name in stuck))
        group = f"{prefix}-retry{attempt + 1}"
        for name in stuck:
            print(f"{name} still running after {timeout:.0f} s (a rejoin never answered?): starting every member "
                  f"again in group {group}:\n" + workers[name].log(), file=sys.stderr)
        for w in workers.values():
            w.kill()
        for name in workers:
            workers[name] = WorkerProcess(bootstrap, prefix, "--instance-id", name, *extra, group=group)
    for w in workers.values():
        w.wait()
    return workers
