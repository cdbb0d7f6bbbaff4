"""Engine metrics in a fresh prometheus-client registry, and the CLI's ``--metrics-port`` endpoint."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamforest.engine.metrics import EngineMetrics

from .support import CLI, control, dumps, engine, feature, feed, label, of_type, task, task_messages


def value(reg: CollectorRegistry, name: str, **labels: str) -> float:
    v = reg.get_sample_value(name, labels)
    return 0.0 if v is None else v


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def test_counters_gauges_and_histograms_follow_the_messages(registry):
    t = task()
    e = engine(encoding="leaves", metrics=EngineMetrics(registry), prune_threshold=0.0)
    assert e.metrics.registry is registry
    msgs = task_messages(t)
    col = msgs[1]
    out = feed(e, msgs[:1])
    assert value(registry, "streamforest_samples", stream="s") == 60
    assert value(registry, "streamforest_records_consumed_total", kind="samples") == 1
    out = feed(e, [feature("s", "a", col["ids"][:30], col["values"][:30], "numeric", 0, 2)])
    assert out == [] and value(registry, "streamforest_features_arrived_total") == 0  # a part is not a feature
    assert value(registry, "streamforest_training_seconds_count") == 0
    out += feed(e, [feature("s", "a", col["ids"][30:], col["values"][30:], "numeric", 1, 2)])
    out += feed(e, msgs[2:])
    out += feed(e, [label("s", t["ids"][-1], 1), control("s", "snapshot"), msgs[2]])  # the last is a replay
    out += feed(e, [b"{", b'{"v": 1, "type": "teleport", "stream": "s"}', dumps(label("s", "ghost", 1)),
                    dumps(feature("s", "zz", ["ghost"], [1.0]))])

    consumed = {k: value(registry, "streamforest_records_consumed_total", kind=k)
                for k in ("samples", "feature", "label", "control", "unknown")}
    assert consumed == {"samples": 1, "feature": 7, "label": 2, "control": 1, "unknown": 2}
    for kind in ("feedback", "prediction", "encoding", "error"):
        assert value(registry, "streamforest_records_produced_total", kind=kind) == len(of_type(out, kind)), kind
    assert len(of_type(out, "feedback")) == 4 and len(of_type(out, "error")) == 4
    failed = {k: value(registry, "streamforest_records_failed_total", kind=k) for k in ("unknown", "label", "feature")}
    assert failed == {"unknown": 2, "label": 1, "feature": 1}
    assert value(registry, "streamforest_features_arrived_total") == 4
    assert value(registry, "streamforest_generations_grown_total") == 4
    assert value(registry, "streamforest_generations_pruned_total") == 0
    assert value(registry, "streamforest_trees_alive", stream="s") == e.streams["s"].forest.n_trees_ == 12
    # Training: the forest's start (first feature), three more features, one delayed label.
    assert value(registry, "streamforest_training_seconds_count") == 5
    assert value(registry, "streamforest_training_seconds_sum") > 0
    # Encoding: after each of four model changes and the snapshot.
    assert value(registry, "streamforest_encoding_seconds_count") == 6
    assert value(registry, "streamforest_encoding_seconds_sum") > 0
    assert value(registry, "streamforest_encoding_seconds_bucket", le="+Inf") == 6


def test_pruned_generations_are_counted(registry):
    e = engine(metrics=EngineMetrics(registry), prune_threshold=0.3)
    out = feed(e, task_messages(task()))
    fb = of_type(out, "feedback")
    dropped = sum(len(r["pruned"]) + len(r["merged"]) for r in fb)
    assert dropped > 0
    assert value(registry, "streamforest_generations_pruned_total") == dropped
    assert value(registry, "streamforest_trees_alive", stream="s") == e.streams["s"].forest.n_trees_


def test_no_encoding_seconds_without_encodings(registry):
    feed(engine(encoding="none", metrics=EngineMetrics(registry)), task_messages(task()))
    assert value(registry, "streamforest_encoding_seconds_count") == 0
    assert value(registry, "streamforest_training_seconds_count") == 4


def test_samples_gauge_per_stream(registry):
    e = engine(metrics=EngineMetrics(registry))
    feed(e, [{"v": 1, "type": "samples", "stream": "a", "samples": [{"id": str(i)} for i in range(5)]},
             {"v": 1, "type": "samples", "stream": "b", "samples": [{"id": "x"}]},
             {"v": 1, "type": "samples", "stream": "a", "samples": [{"id": "4"}, {"id": "5"}]}])
    assert value(registry, "streamforest_samples", stream="a") == 6
    assert value(registry, "streamforest_samples", stream="b") == 1


def test_a_dropped_stream_leaves_the_per_stream_gauges(registry):
    e = engine(metrics=EngineMetrics(registry), prune_threshold=0.0)
    feed(e, task_messages(task()))
    assert value(registry, "streamforest_trees_alive", stream="s") == 12
    feed(e, [control("s", "drop")])
    assert registry.get_sample_value("streamforest_trees_alive", {"stream": "s"}) is None
    assert registry.get_sample_value("streamforest_samples", {"stream": "s"}) is None


def test_each_engine_has_its_own_registry():
    a, b = engine(), engine()
    feed(a, [b"{"])
    assert value(a.metrics.registry, "streamforest_records_failed_total", kind="unknown") == 1
    assert value(b.metrics.registry, "streamforest_records_failed_total", kind="unknown") == 0


def test_names_have_one_prefix_base_units_and_total_counters(registry):
    e = engine(encoding="leaves", metrics=EngineMetrics(registry))
    feed(e, [*task_messages(task()), b"{"])
    families = list(text_string_to_metric_families(generate_latest(registry).decode()))
    assert families
    for fam in families:
        assert fam.name.startswith("streamforest_"), fam.name
        if fam.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in fam.samples), fam.name
        if fam.type == "histogram":
            assert fam.name.endswith("_seconds")
    names = {fam.name for fam in families}
    assert {"streamforest_records_consumed", "streamforest_records_produced", "streamforest_records_failed",
            "streamforest_features_arrived", "streamforest_generations_grown", "streamforest_generations_pruned",
            "streamforest_trees_alive", "streamforest_samples", "streamforest_training_seconds",
            "streamforest_encoding_seconds"} <= names


# ----------------------------------------------------------------------------- served by the CLI


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            addr, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                found.add(addr)
    return found


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
        return r.read().decode()


def test_cli_serves_metrics_on_localhost_while_it_waits_for_input(tmp_path):
    port = free_port()
    cmd = [*CLI, "run", "--input", "-", "--output", str(tmp_path / "out"), "--metrics-port", str(port),
           "--forest-param", "trees_per_generation=3", "--encoding", "none"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        msgs = task_messages(task())
        proc.stdin.write(b"".join(dumps(m) + b"\n" for m in msgs[:2]) + b"{\n")
        proc.stdin.flush()
        text, deadline = "", time.monotonic() + 60
        while 'streamforest_records_consumed_total{kind="unknown"} 1.0' not in text:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, text
            try:
                text = scrape(port)
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        assert 'streamforest_records_consumed_total{kind="samples"} 1.0' in text
        assert 'streamforest_records_consumed_total{kind="feature"} 1.0' in text
        assert "streamforest_features_arrived_total 1.0" in text
        assert 'streamforest_trees_alive{stream="s"} 3.0' in text
        assert 'streamforest_samples{stream="s"} 60.0' in text
        assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "out" / "feedback.jsonl").read_bytes().count(b"\n") == 1
    assert (tmp_path / "out" / "errors.jsonl").read_bytes().count(b"\n") == 1
