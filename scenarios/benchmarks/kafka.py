"""Kafka's cost in CPU seconds, in one run on a local broker (noida-db, started here), on the same messages:

* the embedded runtime (files), the worker at-least-once and exactly-once (in this process, on a thread), and the
  raw consume -> produce loops moving the same output records with the same keys, headers and producer settings
  (the floors: what moving the bytes costs with no learning): kafka-python with blocks as the worker sends them
  (``TrackedProducer.send_block``), kafka-python with one ``send`` per record, and confluent-kafka (librdkafka)
  when it is installed. Each row gives this process's CPU seconds (user + system, every thread: the engine's numba
  threads, the clients' I/O threads) and the broker's (its process group, from /proc) beside it, and for a worker
  its group events (rebalances, partition restarts, messages replayed: work done twice when not 2 / 0 / 0). The
  broker shares the machine, so wall time measures it as much as us: the goals are in CPU seconds of this process,
  embedded / worker >= 80% and exactly-once within 5% of at-least-once;
* our CPU per commit of one partition under each guarantee (``--commit-cost``): what exactly-once adds per commit;
* the output's bytes per record kind, and what the encodings' ``values`` arrays take of them;
* ``--sweep``: the worker at-least-once under other producer batching and compression settings;
* recovery after SIGKILL with 10 streams x 5,000 samples x 50 features: restart -> state restored and the replay
  caught up with the committed offsets (goal <= 10 s), for a worker killed right when its input is committed (the
  longest replay) and for one killed after it was quiet (its state snapshotted, nothing to replay).

``python -m scenarios.benchmarks.kafka [--datasets NAME:STREAMS,...] [--sweep] [--recovery full|small|none]``
prints the tables and writes ``results/benchmarks/kafka.json``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import itertools
import json
import logging
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import NewTopic

from scenarios.benchmarks.common import environment
from streamforest.connectors.kafka import Topics, Worker, WorkerConfig, clients
from streamforest.connectors.kafka.cli import message_key
from streamforest.connectors.kafka.config import TOPIC_OF_TYPE
from streamforest.connectors.kafka.outputs import RecordBlock
from streamforest.connectors.kafka.testing import LocalBroker, wait_committed, wait_snapshots
from streamforest.engine.core import EngineConfig
from streamforest.engine.produce import produce_messages
from streamforest.engine.records import Lines
from streamforest.engine.runtime import OUTPUT_FILES, run

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 4
DEFAULT_DATASETS = "MagicTelescope:3"
QUICK_DATASETS = "banknote-authentication:2,diabetes:2"
#: What the engine, the workers and the clients run on before the clock starts.
WARM_UP_DATASETS = "banknote-authentication:2"
RAW_BLOCKS = "raw loop, blocks"
RAW_SENDS = "raw loop, send per record"
RAW_CONFLUENT = "raw loop, confluent-kafka"
#: What ``--sweep`` compares with the worker's own settings (``clients.BATCHING``, lz4, state every 3 s of work):
#: (compression, batching or None for the worker's own, other WorkerConfig settings).
SWEEP: list[tuple[str | None, dict[str, Any] | None, dict[str, Any]]] = [
    ("lz4", {"linger_ms": 5, "batch_size": 64 * 1024}, {}), ("lz4", {"linger_ms": 50, "batch_size": 1024 * 1024}, {}),
    (None, None, {}), ("zstd", None, {}), ("lz4", None, {"state_interval": 1e9})]


def create_topics(bootstrap: str, prefix: str) -> str:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    compact = {"cleanup.policy": "compact"}
    admin.create_topics([NewTopic(f"{prefix}.input", PARTITIONS, 1)] + [
        NewTopic(f"{prefix}.{n}", PARTITIONS, 1, topic_configs=compact if n in ("predictions", "encodings", "state")
                 else {}) for n in ("predictions", "encodings", "feedback", "errors", "state")])
    admin.close()
    return f"{prefix}.input"


def delete_topics(bootstrap: str, prefix: str) -> None:
    """Delete the topics of a measured row (``<prefix>.*``): the broker holds every topic in memory, and the rows of
    several rounds would not fit."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        names = [t for t in admin.list_topics() if t.startswith(f"{prefix}.")]
        if names:
            admin.delete_topics(names)
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, lines: list[bytes]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=20)
    for line in lines:
        p.send(topic, key=message_key(line), value=line)
    p.flush()
    p.close()


def throughput_messages(spec: str) -> list[bytes]:
    """The messages of ``NAME:STREAMS,...``: each bundled dataset as that many streams (seeds 0, 1, ...)."""
    lines = []
    for item in spec.split(","):
        name, _, n = item.partition(":")
        for s in range(int(n or 1)):
            msgs, _, _ = produce_messages(name, "target", f"{name}-{s}", seed=s)
            lines += [orjson.dumps(m) for m in msgs]
    return lines


class CpuMeter:
    """CPU seconds used by this process (every thread) and by the broker's processes, lap by lap."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid
        self.laps: dict[str, tuple[float, float]] = {}
        #: Of each lap, our system CPU seconds and our page faults (minor and major): the kernel's share of our
        #: CPU, and the memory the row touched for the first time (a heap that grows costs system CPU).
        self.kernel: dict[str, tuple[float, int]] = {}
        self._last = self._now()
        self._last_kernel = self._kernel()

    @staticmethod
    def _kernel() -> tuple[float, int]:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_stime, r.ru_minflt + r.ru_majflt

    def _now(self) -> tuple[float, float]:
        t = os.times()
        ticks = 0
        # noida-db's launcher runs the broker as a child in its process group (the group LocalBroker stops)
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # a process that ended meanwhile
            if int(fields[2]) == self.broker_pid:  # pgrp; then utime and stime (fields 14, 15 of proc(5))
                ticks += int(fields[11]) + int(fields[12])
        return t.user + t.system, ticks / os.sysconf("SC_CLK_TCK")

    def start(self) -> None:
        """Start a lap, after a full garbage collection: every row starts from the same heap, and none pays for
        the garbage of the row before it."""
        gc.collect()
        self._last = self._now()
        self._last_kernel = self._kernel()

    def lap(self, name: str) -> None:
        now, kernel = self._now(), self._kernel()
        self.laps[name] = (now[0] - self._last[0], now[1] - self._last[1])
        self.kernel[name] = (kernel[0] - self._last_kernel[0], kernel[1] - self._last_kernel[1])
        self._last, self._last_kernel = now, kernel
        print(f"{name}: our CPU {self.laps[name][0]:.1f} s, broker CPU {self.laps[name][1]:.1f} s", file=sys.stderr,
              flush=True)


def run_embedded(lines: list[bytes], config: EngineConfig, out_dir: Path, cpu: CpuMeter | None = None) -> float:
    """Seconds of the embedded runtime over ``lines`` into the new directory ``out_dir`` (``cpu``: started once the
    input file is written)."""
    out_dir.mkdir()
    (out_dir / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    if cpu is not None:
        cpu.start()
    t = time.perf_counter()
    run(str(out_dir / "in.jsonl"), str(out_dir), config)
    return time.perf_counter() - t


@contextmanager
def producer_settings(batching: dict[str, Any] | None):
    """The worker's producers with these settings (``batching`` None: the worker's own) for the block."""
    saved = dict(clients.BATCHING)
    clients.BATCHING.update(batching or {})
    try:
        yield
    finally:
        clients.BATCHING.clear()
        clients.BATCHING.update(saved)


class GroupEvents(logging.Handler):
    """What the worker's log says happened to its group membership while it ran: partitions restarted (a failed
    commit or produce, an assignment the worker did not expect) and messages replayed into restored state. A CPU
    figure of a run where these are not 0 includes work done twice. Also the state snapshots it wrote (their count
    follows the engine's wall time, ``--state-interval``: a slower round writes more of them)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.restarts = 0
        self.replayed = 0
        self.snapshots = 0
        self.snapshot_bytes = 0

    def emit(self, record: logging.LogRecord) -> None:
        msg = str(record.msg)
        if "aborting and restoring" in msg or "assigned again while running" in msg:
            self.restarts += 1
        elif "replaying %d messages" in msg:
            self.replayed += int(record.args[4])
        elif "state snapshot of %d bytes" in msg:
            self.snapshots += 1
            self.snapshot_bytes += int(record.args[1])


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    """The end offset of each partition of ``topic``."""
    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
        return {tp.partition: end for tp, end in c.end_offsets(tps).items()}
    finally:
        c.close()


def _wait_done(worker: Worker, ends: dict[int, int]) -> None:
    """Return once the worker has committed every input partition to ``ends``, looking at its tasks in this
    process: asking the broker for the group's offsets every 0.1 s costs this process CPU seconds over a run (about
    a millisecond per request), which would be counted as the worker's."""
    while True:
        try:
            done = {p for p, task in list(worker.tasks.items())
                    if task.committed_position is not None and task.committed_position >= ends[p]}
        except RuntimeError:  # the worker changed its tasks meanwhile
            done = set()
        if done >= set(ends):
            return
        time.sleep(0.2)


def run_worker(bootstrap: str, prefix: str, lines: list[bytes], config: EngineConfig, guarantee: str,
               cpu: CpuMeter | None = None, **settings: Any) -> tuple[float, dict[str, int]]:
    """Seconds from the worker's start until every input offset is committed, and its group events: rebalances
    (assignments and revocations, 2 when nothing went wrong), group stalls, partition restarts, messages replayed,
    state snapshots and commits; ``settings`` are WorkerConfig's. The input is produced first and ``cpu`` started
    after it: the worker's CPU runs from its start to its shutdown (the state snapshots of its partitions)."""
    topic = create_topics(bootstrap, prefix)
    produce(bootstrap, topic, lines)
    ends = _ends(bootstrap, topic)
    worker = Worker(WorkerConfig(bootstrap_servers=bootstrap, group_id=prefix, topics=Topics(topic, prefix),
                                 guarantee=guarantee, **settings), config)
    thread = threading.Thread(target=worker.run)
    events = GroupEvents()
    logger = logging.getLogger("streamforest.kafka")
    logger.addHandler(events)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        if cpu is not None:
            cpu.start()
        t = time.perf_counter()
        thread.start()
        _wait_done(worker, ends)
        seconds = time.perf_counter() - t
        threads = thread_cpu()
        worker.stop()
        thread.join()
    finally:
        logger.removeHandler(events)
        logger.setLevel(level)
    m = worker.metrics
    return seconds, {"rebalances": int(m.rebalances._value.get()), "stalls": int(m.group_stalls._value.get()),
                     "restarts": events.restarts, "replayed": events.replayed, "snapshots": events.snapshots,
                     "snapshot_bytes": events.snapshot_bytes, "commits": int(m.commits._value.get()),
                     "threads": threads}


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's live Python threads other than the main one, by name with its numbers taken
    out (the worker's thread, each client's I/O threads, the producers' senders): where a worker's CPU goes outside
    the numba threads (not Python threads: the rest of the process's CPU)."""
    out: dict[str, float] = {}
    for t in threading.enumerate():
        if t is threading.main_thread() or t.ident is None:
            continue
        try:
            cpu = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        except OSError:
            continue  # ended meanwhile
        name = re.sub(r"[-\d.]+(?= |$|-)|\d+", "", t.name).strip("- ")
        out[name] = out.get(name, 0.0) + cpu
    return out


def run_raw_loop(bootstrap: str, prefix: str, lines: list[bytes], outputs: list[tuple], bulk: bool,
                 cpu: CpuMeter | None = None) -> float:
    """kafka-python alone: consume the input, produce the same output records (spread over the input messages)
    with the worker's headers and producer settings, commit after each poll. No learning: the cost of moving the
    bytes. ``bulk``: as the worker sends a republication batch (``TrackedProducer.send_block``, consecutive records
    of one topic and headers as one block); else one ``KafkaProducer.send`` per record, partitioned by kafka-python."""
    topic = create_topics(bootstrap, prefix)
    produce(bootstrap, topic, lines)
    per = -(-len(outputs) // len(lines))
    # What each input message produces, made before the clock as the embedded runtime's records were.
    sends = [outputs[k * per:(k + 1) * per] for k in range(len(lines))]
    if bulk:
        sends = [_blocks(prefix, s) for s in sends]
    if cpu is not None:
        cpu.start()
    t = time.perf_counter()
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=prefix, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                      compression_type=WorkerConfig().compression_type,
                      **clients.BATCHING)
    tracked = clients.TrackedProducer(p)
    seen = 0
    while seen < len(lines):
        batch = c.poll(timeout_ms=200)
        offsets = {}
        for tp, recs in batch.items():
            for _ in recs:
                if bulk:
                    for block in sends[seen]:
                        tracked.send_block(block)
                else:
                    for out_topic, key, value, headers in sends[seen]:
                        p.send(f"{prefix}.{out_topic}", key=key, value=value, headers=headers)
                seen += 1
            offsets[tp] = OffsetAndMetadata(recs[-1].offset + 1, "", -1)
        if offsets:
            tracked.check_delivered()
            c.commit(offsets)
    seconds = time.perf_counter() - t
    p.close()
    c.close()
    return seconds


def run_confluent_loop(bootstrap: str, prefix: str, lines: list[bytes], outputs: list[tuple],
                       cpu: CpuMeter | None = None) -> float:
    """The raw loop of :func:`run_raw_loop` with confluent-kafka (librdkafka, C) instead of kafka-python: the same
    records, keys (murmur2 partitioning, as the worker's), headers, idempotence, lz4, linger and batch size; a
    second floor, what a client in C spends moving the same bytes."""
    from confluent_kafka import Consumer, KafkaException, Producer

    topic = create_topics(bootstrap, prefix)
    produce(bootstrap, topic, lines)
    per = -(-len(outputs) // len(lines))
    sends = [outputs[k * per:(k + 1) * per] for k in range(len(lines))]
    failed: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    if cpu is not None:
        cpu.start()
    t = time.perf_counter()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": prefix, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "compression.type": WorkerConfig().compression_type or "none",
                  "linger.ms": clients.BATCHING["linger_ms"], "batch.size": clients.BATCHING["batch_size"],
                  "partitioner": "murmur2_random"})
    seen = 0
    while seen < len(lines):
        msgs = c.consume(num_messages=100, timeout=0.2)
        for msg in msgs:
            if msg.error():
                raise KafkaException(msg.error())
            for out_topic, key, value, headers in sends[seen]:
                while True:
                    try:
                        p.produce(f"{prefix}.{out_topic}", value=value, key=key, headers=headers,
                                  on_delivery=delivered)
                        break
                    except BufferError:  # librdkafka's queue is full: let it deliver
                        p.poll(0.05)
            p.poll(0)
            seen += 1
        if msgs:
            p.flush()
            if failed:
                raise KafkaException(failed[0])
            c.commit(asynchronous=False)
    seconds = time.perf_counter() - t
    c.close()
    return seconds


def _blocks(prefix: str, records: list[tuple]) -> list[RecordBlock]:
    """Consecutive records of one topic and headers as one RecordBlock each."""
    out = []
    for (topic, headers), group in itertools.groupby(records, key=lambda r: (r[0], tuple(r[3]))):
        same = list(group)
        ends = np.zeros(len(same) + 1, dtype=np.int64)
        np.cumsum([len(r[2]) + 1 for r in same], out=ends[1:])
        out.append(RecordBlock(f"{prefix}.{topic}", [r[1] for r in same],
                               Lines(b"".join(r[2] + b"\n" for r in same), ends), list(headers)))
    return out


def embedded_outputs(out_dir: Path) -> list[tuple[str, bytes, bytes, list]]:
    """The embedded runtime's records as (topic suffix, key, value, headers), as a worker would send them."""
    out = []
    for kind, name in OUTPUT_FILES.items():
        for line in (out_dir / name).read_bytes().splitlines():
            r = orjson.loads(line)
            headers = [("streamforest.type", kind.encode())]
            if "model_version" in r:
                headers.append(("streamforest.model_version", str(r["model_version"]).encode()))
            out.append((TOPIC_OF_TYPE[kind], r["key"].encode(), line, headers))
    return out


def record_sizes(out_dir: Path) -> dict[str, dict[str, float]]:
    """Records, bytes and bytes per record of each output kind; for encodings also the bytes of their ``values``
    arrays and the share of records whose values are all ``1.0`` (binary encodings without collisions)."""
    sizes = {}
    for kind, name in OUTPUT_FILES.items():
        lines = (out_dir / name).read_bytes().splitlines()
        n_bytes = sum(len(x) for x in lines)
        row: dict[str, float] = {"records": len(lines), "bytes": n_bytes,
                                 "bytes_per_record": n_bytes / max(1, len(lines))}
        if kind == "encoding" and lines:
            values = [orjson.loads(x)["values"] for x in lines]
            row["values_bytes"] = sum(len(orjson.dumps(v)) + len(',"values":') for v in values)
            row["all_ones_share"] = sum(all(x == 1.0 for x in v) for v in values) / len(values)
        sizes[kind] = row
    return sizes


def recovery_messages(n_streams: int, n: int, d: int) -> list[bytes]:
    rng = np.random.default_rng(0)
    per_stream = []
    for s in range(n_streams):
        ids = [str(i) for i in range(n)]
        y = rng.integers(0, 2, n)
        msgs = [{"v": 1, "type": "samples", "stream": f"s{s}",
                 "samples": [{"id": i, "label": int(v) if k % 3 else None}
                             for k, (i, v) in enumerate(zip(ids, y, strict=True))]}]
        for j in range(d):
            signal_ = y + rng.normal(scale=2.0, size=n)
            msgs.append({"v": 1, "type": "feature", "stream": f"s{s}", "name": f"f{j}", "ids": ids,
                         "values": np.round(signal_, 4).tolist()})
        per_stream.append([orjson.dumps(m) for m in msgs])
    return [m for k in range(d + 1) for s in per_stream for m in s[k:k + 1]]


def _restart_until_caught_up(cmd: list[str]) -> tuple[subprocess.Popen, dict]:
    """Start the worker; return it (running) once every partition is restored and its replay caught up."""
    t = time.perf_counter()
    worker = subprocess.Popen([*cmd, "--log-level", "INFO"], stderr=subprocess.PIPE, cwd=ROOT, text=True)
    started: set[int] = set()
    caught_up: set[int] = set()
    restore_s, replayed = [], 0
    for line in worker.stderr:
        m = re.search(r"partition (\d+): restored \d+ streams .* in ([\d.]+) s; replaying (\d+) messages", line)
        if m:
            started.add(int(m.group(1)))
            restore_s.append(float(m.group(2)))
            replayed += int(m.group(3))
            if int(m.group(3)) == 0:
                caught_up.add(int(m.group(1)))
        m = re.search(r"partition (\d+): replay caught up", line)
        if m:
            caught_up.add(int(m.group(1)))
        if len(started) == PARTITIONS and caught_up >= started:
            break
    recovery = time.perf_counter() - t
    # Keep reading its log so that the worker never blocks on a full pipe.
    threading.Thread(target=worker.stderr.read, daemon=True).start()
    return worker, {"recovery_s": recovery, "restore_s_per_partition": restore_s, "messages_replayed": replayed}


def commit_cost(bootstrap: str, prefix: str, guarantee: str, commits: int) -> float:
    """CPU seconds of this process per commit of one partition, the calls of ``PartitionTask.checkpoint`` in a loop:
    four 2 KB records (one per output partition) and the changelog's ``position`` record per commit; at-least-once
    a flush, the position, a flush and the consumer's offset commit; exactly-once the transaction's begin, the
    records, the position, a flush, the offsets into the transaction and its commit (one helper thread, as the
    worker's). What exactly-once costs beyond at-least-once per commit, apart from the records."""
    topic = create_topics(bootstrap, prefix)
    produce(bootstrap, topic, [b"{}"])
    config = WorkerConfig(bootstrap_servers=bootstrap, group_id=prefix, topics=Topics(topic, prefix),
                          guarantee=guarantee)
    consumer = clients.consumer(config)
    consumer.subscribe([topic])
    while not consumer.assignment():
        consumer.poll(timeout_ms=100)
    eos = config.exactly_once
    producer = clients.TrackedProducer(clients.producer(config, f"{prefix}-0" if eos else None))
    if eos:
        producer.init_transactions()
    tp, value = TopicPartition(topic, 0), b"x" * 2000

    def commit(k: int) -> None:
        if eos:
            producer.begin_transaction()
        for partition in range(PARTITIONS):
            producer.send(config.topics.output("encoding"), key=b"k", value=value, partition=partition)
        if not eos:
            producer.check_delivered()
        producer.send(config.topics.state, partition=0, key=b"position", value=b"{}")
        producer.check_delivered()
        offsets = {tp: OffsetAndMetadata(k, "", -1)}
        if eos:
            group = consumer.group_metadata()
            clients.bounded(lambda: (producer.send_offsets_to_transaction(offsets, group),
                                     producer.commit_transaction()), "commit")
        else:
            consumer.commit(offsets)

    try:
        for k in range(20):  # connections, coordinators, the first transaction's partitions
            commit(k)
        gc.collect()
        t = time.process_time()
        for k in range(20, 20 + commits):
            commit(k)
        return (time.process_time() - t) / commits
    finally:
        producer.close()
        consumer.close()


def measure_recovery(bootstrap: str, lines: list[bytes]) -> dict:
    """Process everything, then SIGKILL twice and restart: (1) right when the input is all committed (the last
    state snapshot is then up to ``--state-interval`` seconds of engine work old: the replay is the longest),
    (2) once the restarted worker has been quiet and snapshotted its state (nothing to replay). Recovery = seconds
    from the restart until every partition is restored and its replay caught up."""
    prefix = "recovery"
    topic = create_topics(bootstrap, prefix)
    produce(bootstrap, topic, lines)
    cmd = [sys.executable, "-m", "streamforest.cli", "kafka", "run", "--bootstrap-servers", bootstrap,
           "--input-topic", topic, "--topic-prefix", prefix, "--group-id", prefix, "--instance-id", "w1",
           "--publish", "none", "--forest-param", "trees_per_generation=5"]
    first = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, cwd=ROOT)
    t = time.perf_counter()
    wait_committed(bootstrap, prefix, topic)
    processing = time.perf_counter() - t
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    second, busy = _restart_until_caught_up(cmd)
    wait_snapshots(WorkerConfig(bootstrap_servers=bootstrap, topics=Topics(topic, prefix)), timeout=600)
    os.kill(second.pid, signal.SIGKILL)
    second.wait()
    third, quiet = _restart_until_caught_up(cmd)
    third.send_signal(signal.SIGTERM)
    third.wait(60)
    return {"processing_s": processing, "killed_when_committed": busy, "killed_when_quiet": quiet}


def _settings_name(compression: str | None, batching: dict[str, Any] | None, settings: dict[str, Any]) -> str:
    b = batching or clients.BATCHING
    name = f"{compression or 'none'}, linger {b['linger_ms']} ms, batch {b['batch_size'] // 1024} KiB"
    if settings.get("state_interval", 0) > 1e6:
        return name + ", state only when quiet"
    return name + "".join(f", {k} {v}" for k, v in settings.items())


ROUND = ["embedded runtime", "worker at-least-once", "worker exactly-once", RAW_BLOCKS, RAW_SENDS, RAW_CONFLUENT]


def row_prefix(name: str, prefix: str) -> str | None:
    """The topic prefix of a row of :data:`ROUND` (``None``: it uses no topics)."""
    if name == "embedded runtime":
        return None
    if name.startswith("worker "):
        return f"{prefix}-{name.removeprefix('worker ')}"
    return f"{prefix}-{ {RAW_CONFLUENT: 'confluent', RAW_BLOCKS: 'blocks', RAW_SENDS: 'sends'}[name]}"


def measure(name: str, bootstrap: str, prefix: str, lines: list[bytes], config: EngineConfig,
            outputs: list[tuple], out_dir: Path, cpu: CpuMeter) -> dict[str, Any]:
    """Run one row of :data:`ROUND`: its seconds, and a worker's group events. ``cpu`` is started once the row's
    input is ready (its topics created and the input produced, or its file written): its lap is the row's work."""
    topics = row_prefix(name, prefix)
    if topics is None:
        return {"seconds": run_embedded(lines, config, out_dir, cpu)}
    if name.startswith("worker "):
        seconds, events = run_worker(bootstrap, topics, lines, config, name.removeprefix("worker "), cpu)
        return {"seconds": seconds, **events}
    if name == RAW_CONFLUENT:
        return {"seconds": run_confluent_loop(bootstrap, topics, lines, outputs, cpu)}
    return {"seconds": run_raw_loop(bootstrap, topics, lines, outputs, name == RAW_BLOCKS, cpu)}


#: The goals: ratio -> (whether a value meets it, its text, the worst of several values).
GOALS = {"embedded / worker at-least-once": (lambda r: r >= 0.8, ">= 80%", min),
         "embedded / worker exactly-once": (lambda r: r >= 0.8, ">= 80%", min),
         "exactly-once / at-least-once": (lambda r: abs(r - 1) <= 0.05, "within 5%",
                                          lambda rs: max(rs, key=lambda r: abs(r - 1)))}


def round_ratios(row: dict[str, dict]) -> dict[str, float]:
    """The ratios of our CPU seconds in one round: the goals', and the embedded runtime's share of it plus each raw
    loop (the most a worker moving its records with that client can reach)."""
    ours = {name: r["ours"] for name, r in row.items()}
    embedded = ours["embedded runtime"]
    ratios = {"embedded / worker at-least-once": embedded / ours["worker at-least-once"],
              "embedded / worker exactly-once": embedded / ours["worker exactly-once"],
              "exactly-once / at-least-once": ours["worker exactly-once"] / ours["worker at-least-once"]}
    for name in (RAW_BLOCKS, RAW_SENDS, RAW_CONFLUENT):
        if name in ours:
            ratios[f"embedded / (embedded + {name})"] = embedded / (embedded + ours[name])
    return ratios


def print_tables(n_in: int, n_out: int, load: list[float], rounds: list[dict[str, dict]],
                 sizes: dict[str, dict[str, float]], ratios: list[dict[str, float]], sweep: dict[str, dict]) -> None:
    print(f"{n_in} input messages -> {n_out} output records; load average (1 min) "
          f"{', '.join(f'{x:.1f}' for x in load)} at the start and after each round")
    print("group events of a worker: rebalances (assignments and revocations; 2 in a run where nothing went wrong) / "
          "partition restarts / messages replayed")
    for k, row in enumerate(rounds):
        print(f"\nround {k + 1}")
        print(f"| {'':<27} | {'our CPU s':>9} | {'of it system':>12} | {'page faults':>11} | {'broker CPU s':>12} | "
              f"{'wall s':>7} | {'out records/s':>13} | {'group events':>12} |")
        print(f"|{'-' * 29}|{'-' * 10}:|{'-' * 13}:|{'-' * 12}:|{'-' * 13}:|{'-' * 8}:|{'-' * 14}:|{'-' * 13}:|")
        for name in ROUND:
            if name not in row:
                continue
            r = row[name]
            happened = f"{r['rebalances']} / {r['restarts']} / {r['replayed']}" if "rebalances" in r else ""
            print(f"| {name:<27} | {r['ours']:>9.1f} | {r['ours_system']:>12.1f} | {r['page_faults']:>11,} | "
                  f"{r['broker']:>12.1f} | {r['seconds']:>7.1f} | {n_out / r['seconds']:>13,.0f} | {happened:>12} |")
        for name in ROUND:
            threads = row.get(name, {}).get("threads")
            if threads:
                rest = row[name]["ours"] - sum(threads.values())
                r = row[name]
                print(f"{name}, our CPU s by thread: " + ", ".join(
                    f"{t} {v:.1f}" for t, v in sorted(threads.items(), key=lambda x: -x[1])) +
                      f", numba threads and ended threads {rest:.1f}; {r.get('commits', 0)} commits, "
                      f"{r.get('snapshots', 0)} state snapshots ({r.get('snapshot_bytes', 0) / 1e6:.0f} MB)")
    print()
    print(f"| {'ratio of our CPU seconds':<50} | {'rounds':>16} | {'median':>7} | {'worst':>7} | goal |")
    print(f"|{'-' * 52}|{'-' * 17}:|{'-' * 8}:|{'-' * 8}:|---|")
    for name in ratios[0]:
        values = [r[name] for r in ratios]
        goal = GOALS.get(name)
        worst = goal[2](values) if goal else min(values)
        verdict = f"{goal[1]}: {'met' if all(goal[0](v) for v in values) else 'NOT met'}" if goal else ""
        print(f"| {name:<50} | {', '.join(f'{v:.1%}' for v in values):>16} | {float(np.median(values)):>7.1%} | "
              f"{worst:>7.1%} | {verdict} |")
    print()
    print(f"| {'kind':<10} | {'records':>8} | {'MB':>7} | {'bytes/record':>12} |")
    print(f"|{'-' * 12}|{'-' * 9}:|{'-' * 8}:|{'-' * 13}:|")
    for kind, r in sizes.items():
        print(f"| {kind:<10} | {r['records']:>8,} | {r['bytes'] / 1e6:>7.1f} | {r['bytes_per_record']:>12,.0f} |")
    enc = sizes.get("encoding", {})
    if enc.get("records"):
        print(f"encodings: `values` arrays {enc['values_bytes'] / enc['bytes']:.0%} of their bytes; "
              f"{enc['all_ones_share']:.0%} of the records have only 1.0 values")
    if sweep:
        print()
        print(f"| worker at-least-once, producer {'':<24} | {'our CPU s':>9} | {'broker CPU s':>12} | {'wall s':>7} | "
              f"{'group events':>12} |")
        print(f"|{'-' * 58}|{'-' * 10}:|{'-' * 13}:|{'-' * 8}:|{'-' * 13}:|")
        for name, r in sweep.items():
            happened = f"{r['rebalances']} / {r['restarts']} / {r['replayed']}"
            print(f"| {name:<56} | {r['ours']:>9.1f} | {r['broker']:>12.1f} | {r['seconds']:>7.1f} | "
                  f"{happened:>12} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=DEFAULT_DATASETS,
                    help=f"bundled datasets as NAME:STREAMS,... (default {DEFAULT_DATASETS})")
    ap.add_argument("--quick", action="store_true", help=f"--datasets {QUICK_DATASETS} and --recovery small")
    ap.add_argument("--sweep", action="store_true", help="also run the worker at-least-once under other producer "
                                                         "batching and compression settings")
    ap.add_argument("--recovery", choices=("full", "small", "none"), default="full",
                    help="recovery state of 10 x 5,000 x 50 (full), 10 x 1,000 x 10 (small), or no recovery run")
    ap.add_argument("--rounds", type=int, default=2,
                    help="how many times each row is measured, alternately in reverse order (default 2)")
    ap.add_argument("--no-floors", action="store_true",
                    help="only the embedded runtime and the workers (no raw loops)")
    ap.add_argument("--commit-cost", type=int, default=200, metavar="N",
                    help="CPU per commit of one partition, at-least-once and exactly-once, over N commits each, "
                         "twice (default 200; 0: not measured)")
    ap.add_argument("--out", default="results/benchmarks/kafka.json")
    args = ap.parse_args(argv)
    datasets, recovery_size = (QUICK_DATASETS, "small") if args.quick else (args.datasets, args.recovery)
    config = EngineConfig(forest={"random_state": 0})
    sweep: dict[str, dict] = {}
    rounds: list[dict[str, dict]] = [{} for _ in range(args.rounds)]
    recovery = None
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        broker = LocalBroker(tmp / "noida")
        broker.start()
        try:
            lines = throughput_messages(datasets)
            # Outside the clock: numba compiles (or loads) the kernels, and the clients their codecs, through both
            # workers; the embedded runtime runs on the whole input, so that the process's heap has grown to a
            # round's size (the first row of a first round otherwise used 2-3 CPU s more than the same row later,
            # with the most page faults)
            run_embedded(lines, config, tmp / "warm-up")
            warm = throughput_messages(WARM_UP_DATASETS)
            for guarantee in ("at-least-once", "exactly-once"):
                run_worker(broker.bootstrap, f"warm-up-{guarantee}", warm, config, guarantee)
                delete_topics(broker.bootstrap, f"warm-up-{guarantee}")
            cpu = CpuMeter(broker.proc.pid)
            load = [os.getloadavg()[0]]
            outputs: list[tuple] = []
            for r in range(args.rounds):
                # Every other round in reverse order: a load that rises or falls during a round weighs on both ends.
                for name in (ROUND if r % 2 == 0 else ROUND[::-1]):
                    if name == RAW_CONFLUENT and importlib.util.find_spec("confluent_kafka") is None:
                        continue
                    if args.no_floors and name.startswith("raw loop"):
                        continue
                    row = measure(name, broker.bootstrap, f"r{r}", lines, config, outputs, tmp / f"embedded{r}",
                                  cpu)
                    cpu.lap(name)
                    if row_prefix(name, f"r{r}") is not None:
                        delete_topics(broker.bootstrap, row_prefix(name, f"r{r}"))
                    rounds[r][name] = {"seconds": row.pop("seconds"), "ours": cpu.laps[name][0],
                                       "broker": cpu.laps[name][1], "ours_system": cpu.kernel[name][0],
                                       "page_faults": cpu.kernel[name][1], **row}
                    if name == "embedded runtime" and not outputs:
                        outputs = embedded_outputs(tmp / f"embedded{r}")
                        sizes = record_sizes(tmp / f"embedded{r}")
                load.append(os.getloadavg()[0])
            if importlib.util.find_spec("confluent_kafka") is None:
                print("confluent-kafka is not installed: no row for it (pip install confluent-kafka)", file=sys.stderr)
            if args.sweep:
                for k, (compression, batching, settings) in enumerate(SWEEP):
                    name = _settings_name(compression, batching, settings)
                    with producer_settings(batching):
                        seconds, happened = run_worker(broker.bootstrap, f"sweep{k}", lines, config,
                                                       "at-least-once", cpu, compression_type=compression,
                                                       **settings)
                        cpu.lap(name)
                    sweep[name] = {"seconds": seconds, "ours": cpu.laps[name][0], "broker": cpu.laps[name][1],
                                   **happened}
            commits: dict[str, list[float]] = {}
            for k in range(2 if args.commit_cost else 0):
                for guarantee in ("at-least-once", "exactly-once"):
                    commits.setdefault(guarantee, []).append(
                        commit_cost(broker.bootstrap, f"commits{k}-{guarantee}", guarantee, args.commit_cost))
                    delete_topics(broker.bootstrap, f"commits{k}-{guarantee}")
            if recovery_size != "none":
                shape = (10, 1000, 10) if recovery_size == "small" else (10, 5000, 50)
                recovery = {"shape": shape, **measure_recovery(broker.bootstrap, recovery_messages(*shape))}
        finally:
            broker.stop()
    n_in, n_out = len(lines), len(outputs)
    ratios = [round_ratios(r) for r in rounds]
    print_tables(n_in, n_out, load, rounds, sizes, ratios, sweep)
    if commits:
        print()
        print(f"our CPU per commit of one partition ({args.commit_cost} commits, twice): " + "; ".join(
            f"{g} {', '.join(f'{c * 1e3:.2f}' for c in cs)} ms" for g, cs in commits.items()))
    if recovery is not None:
        shape = recovery["shape"]
        for case in ("killed_when_committed", "killed_when_quiet"):
            r = recovery[case]
            print(f"recovery after SIGKILL ({case.replace('_', ' ')}), {shape[0]} streams x {shape[1]} samples x "
                  f"{shape[2]} features: {r['recovery_s']:.2f} s (goal <= 10 s: "
                  f"{'met' if r['recovery_s'] <= 10 else 'NOT met'}); restore per partition "
                  f"{[round(s, 2) for s in r['restore_s_per_partition']]} s, {r['messages_replayed']} messages "
                  "replayed")
        print(f"first run (processing the recovery state) {recovery['processing_s']:.1f} s")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"datasets": datasets, "input_messages": n_in, "output_records": n_out,
                               "rounds": rounds, "load_average": load, "record_sizes": sizes,
                               "ratios": ratios, "sweep": sweep, "producer": clients.BATCHING,
                               "commit_cpu_s": commits,
                               "recovery": recovery, "environment": environment()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
