"""Helpers of the Kafka tests: broker processes, topics, reading outputs, worker processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import orjson
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from streamforest.connectors.kafka import clients
from streamforest.connectors.kafka.changelog import Changelog
from streamforest.connectors.kafka.cli import message_key
from streamforest.connectors.kafka.config import Topics, WorkerConfig
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
    """Write ``lines`` to ``topic`` keyed as the workers key them; fails unless the broker acknowledged each one.
    Not idempotent, one request at a time: Tansu can answer an idempotent batch as a duplicate without storing it,
    and kafka-python calls that delivered (docs/kafka.md); without sequence numbers an acknowledgement is a write."""
    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all",
                      max_in_flight_requests_per_connection=1)
    futures = [p.send(topic, key=message_key(line), value=line) for line in lines]
    p.flush()
    p.close()
    failed = [(i, f.exception) for i, f in enumerate(futures) if not f.succeeded()]
    assert not failed, f"the broker did not acknowledge {len(failed)} of {len(lines)} input records: {failed[:5]}"


def describe_input(bootstrap: str, topic: str, lines: list[bytes]) -> str:
    """Which of ``lines`` the input ``topic`` lacks (read uncommitted), with each partition's record count: tells
    an input record the broker lost from one the workers did not process."""
    held = read_topic(bootstrap, topic, "read_uncommitted")
    missing = sorted(set(lines) - {r.value for r in held}, key=lines.index)
    counts = Counter(r.partition for r in held)
    where = [(lines.index(m), clients.key_partition(message_key(m), sorted(counts) or [0])) for m in missing]
    return (f"input {topic}: {len(held)} of {len(lines)} records, by partition {dict(sorted(counts.items()))}; "
            f"missing lines (index, partition): {where}")


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
        batch = c.poll(timeout_ms=300)
        # The fetches' high watermark counts too: Tansu reports the end of a partition short (docs/kafka.md).
        end = {tp: max(e, c.highwater(tp) or 0) for tp, e in end.items()}
        for recs in batch.values():
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


def describe_missing(want: dict, got: dict, again: dict) -> str:
    """What ``got`` lacks of ``want`` (both as :func:`outputs_by_stream` gives them), per (kind, stream): how many
    records, of which model versions, on which output partitions, and how many a second read (``again``) found. A
    record a second read finds was cut off by the first read's end; one neither finds never reached the topic. A
    (kind, stream) with none missing but another count (duplicates) is named with its counts."""
    lines = []
    for key in want:
        miss = set(want[key]) - set(got.get(key, ()))
        if not miss:
            if len(got.get(key, ())) != len(want[key]):
                lines.append(f"{key}: {len(got[key])} records, {len(want[key])} expected, none missing")
            continue
        recs = [orjson.loads(m) for m in miss]
        versions = Counter(r.get("model_version") for r in recs)
        parts = Counter(clients.key_partition(r["key"].encode(), [0, 1, 2, 3]) for r in recs)
        found = len(miss & set(again.get(key, ())))
        lines.append(f"missing {key}: {len(miss)} of {len(want[key])} records (got {len(got.get(key, ()))}); "
                     f"versions {dict(versions)}; output partitions {dict(parts)}; found by a second read: {found}")
    return "\n".join(lines)


def broker_warnings(b, n: int = 30) -> str:
    """The last ``n`` warnings and errors of a Tansu broker's log (it logs at warn, and the object store's retries),
    for a failing test's message; empty for a broker without such a log."""
    path = getattr(b, "log_dir", None)
    if path is None or not (Path(path) / "tansu.log").exists():
        return ""
    text = re.sub(r"\x1b\[[0-9;]*m", "", (Path(path) / "tansu.log").read_text(errors="replace"))
    lines = [line[:300] for line in text.splitlines() if " WARN " in line or " ERROR " in line or "retry" in line]
    return f"broker warnings (last {n} of {len(lines)}):\n" + "\n".join(lines[-n:])


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


def embedded(d: Path, lines: list[bytes]) -> tuple[tuple[dict, list], dict]:
    """The embedded runtime (``streamforest run``) on ``lines`` in directory ``d``: its outputs as
    :func:`reference_by_stream` gives them, and its final streams."""
    from streamforest.engine.core import EngineConfig
    from streamforest.engine.runtime import run

    (d / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    engine = run(str(d / "in.jsonl"), str(d / "out"),
                 EngineConfig(forest={"random_state": 0, "trees_per_generation": 5}))
    return reference_by_stream(d / "out", lines), engine.streams


def final_streams(bootstrap: str, prefix: str) -> dict:
    """Every stream's state in the changelog's latest snapshots (the model the workers leave behind)."""
    config = WorkerConfig(bootstrap_servers=bootstrap, topics=Topics(f"{prefix}.input", prefix))
    streams = {}
    for p in range(4):
        reader = clients.reader(config)
        streams.update(Changelog(config.topics.state, p, config.state_chunk_bytes).restore(reader))
        reader.close()
    return streams


def assert_same_model(got: dict, want: dict) -> None:
    from streamforest.engine.checkpoint import stream_arrays

    assert sorted(got) == sorted(want)
    for name in want:
        a_arrays, a_header = stream_arrays(got[name])
        b_arrays, b_header = stream_arrays(want[name])
        assert a_header == b_header, name
        assert sorted(a_arrays) == sorted(b_arrays), name
        for k in b_arrays:
            np.testing.assert_array_equal(a_arrays[k], b_arrays[k], err_msg=f"{name}: {k}")


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
        """Every line the worker itself logged, and the client library's last 40 (a broker restart makes it log
        hundreds of connection errors, which would push the worker's own account of a failure out of view)."""
        lines = list(self.lines)
        tail = len(lines) - 40
        return "\n".join(line for i, line in enumerate(lines) if i >= tail or "streamforest" in line)


def wait_all(workers: list[WorkerProcess], timeout: float = 240.0) -> None:
    """Wait until every worker has exited (they run with ``--exit-when-idle``), each with status 0."""
    deadline = time.monotonic() + timeout
    for w in workers:
        rc = w.wait(max(1.0, deadline - time.monotonic()))
        assert rc == 0, f"worker exited with {rc}:\n" + w.log()
