"""The propositionalization loop over Kafka (a real noida-db broker, real ``streamforest kafka run`` workers): the
same decisions and files as the in-process driver; records matched to the run that sent the messages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import orjson
import pytest
from kafka_harness import ROOT, WorkerProcess, create_topics, read_topic

from streamforest.connectors.kafka import transport as kafka_transport
from streamforest.connectors.kafka.config import Topics
from streamforest.connectors.kafka.transport import KafkaTransport, worker_command
from streamforest.relational.drivers import EngineClient, InProcess
from streamforest.relational.loop import engine_config

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PREFIX = "sf-kdriver"  # this module's topics (the broker is shared by the session)
MUTAGENESIS = ROOT.parent / "shared" / "datasets" / "mutagenesis" / "data.json"
#: Short commits: the loop waits for each feature's feedback, which a read_committed reader sees at the commit.
FAST = ["--partitions", "2", "--commit-interval", "0.02", "--exit-when-idle", "180"]


def _worker(bootstrap: str, prefix: str, config: dict) -> tuple[WorkerProcess, Topics]:
    topics = Topics(input=f"{prefix}.input", prefix=prefix)
    w = WorkerProcess(bootstrap, prefix, *worker_command(bootstrap, topics, config)[3:], *FAST)
    w.wait_for("worker joined group")
    return w, topics


def _stop(w: WorkerProcess) -> None:
    """SIGTERM: the worker commits and leaves the group (exit status 0)."""
    os.kill(w.proc.pid, signal.SIGTERM)
    assert w.wait(60) == 0, w.log()


class Recording:
    """A transport that keeps every record it hands to the client."""

    def __init__(self, inner: KafkaTransport) -> None:
        self.inner, self.seen = inner, []

    def send(self, message: dict) -> None:
        self.inner.send(message)

    def receive(self, timeout: float) -> list[dict]:
        out = self.inner.receive(timeout)
        self.seen.extend(out)
        return out

    def close(self) -> None:
        self.inner.close()


def _exchange(client: EngineClient, name: str, values: np.ndarray) -> tuple[dict, dict]:
    ids = [f"m{i}" for i in range(60)]
    client.samples("s", ids, [i % 2 for i in range(45)] + [None] * 15)
    fb = client.feature("s", name, ids, values)
    return fb, client.wait_predictions("s", 15, fb["model_version"])


def _without_seconds(fb: dict) -> dict:
    return {k: v for k, v in fb.items() if k != "seconds"}  # a clock reading (docs/messages.md)


def test_records_are_matched_to_the_run_that_sent_them(broker, monkeypatch):
    config = {"forest": {"trees_per_generation": 5, "random_state": 0}, "publish": "unlabelled", "encoding": "none"}
    worker, topics = _worker(broker.bootstrap, f"{PREFIX}-match", config)
    x = np.arange(60) % 3 + 0.5
    y = (np.arange(60) * 7) % 11 - 2.0
    ref = EngineClient(InProcess(config))  # the same messages, uncut, in this process
    ref_x, ref_x_pred = _exchange(ref, "x", x)
    ref.drop("s")
    ref_y, ref_y_pred = _exchange(ref, "y", y)

    a = EngineClient(Recording(KafkaTransport(broker.bootstrap, topics, run_id="a")))
    fb, pred = _exchange(a, "x", x)
    assert _without_seconds(fb) == _without_seconds(ref_x) and pred == ref_x_pred
    assert {r["stream"] for r in a.transport.seen} == {"s"}  # the loop's own name, not the wire's "a:s"
    a.close()  # drops a:s on the worker

    # The same run id again (its stream dropped and made anew), and another run beside it, both opened after
    # the first exchange: neither takes the earlier records for its own. Feature y is cut in parts on the wire.
    b = EngineClient(Recording(KafkaTransport(broker.bootstrap, topics, run_id="a")))
    c = EngineClient(Recording(KafkaTransport(broker.bootstrap, topics, run_id="c")))
    monkeypatch.setattr(kafka_transport, "MESSAGE_BYTES", 300)
    fb, pred = _exchange(b, "y", y)
    monkeypatch.undo()
    assert _without_seconds(fb) == _without_seconds(ref_y) and pred == ref_y_pred
    assert [r.get("feature") for r in b.transport.seen if r["type"] == "feedback"] == ["y"]

    # A refused message comes back to the run that sent it, under its stream, and nowhere else.
    c.samples("s", ["k1", "k2"], [0, 1])
    with pytest.raises(RuntimeError, match=r"the engine refused a message: .* unknown sample ids \[.nobody.\]"):
        c.feature("s", "bad", ["k1", "nobody"], np.array([1.0, 2.0]))
    assert [(r["type"], r["stream"]) for r in c.transport.seen] == [("error", "s")]
    b.transport.receive(1.0)
    assert all(r["type"] != "error" for r in b.transport.seen)
    b.close()
    c.close()
    # Every stream a run made is dropped when it closes (a worker keeps serving: nothing of the runs stays).
    msgs = [json.loads(r.value) for r in read_topic(broker.bootstrap, topics.input)]
    assert {m["stream"] for m in msgs if m["type"] == "samples"} == {"a:s", "c:s"}
    assert sum(m["type"] == "control" and m["op"] == "drop" for m in msgs) == 3
    parts = [(m["part"], m["parts"]) for m in msgs if m["type"] == "feature" and m["name"] == "y"]
    assert len(parts) > 2 and parts == [(i, len(parts)) for i in range(len(parts))]
    declared = [m for m in msgs if m["type"] == "samples" and m["stream"] == "a:s"]
    assert len(declared) > 3 and sum(len(m["samples"]) for m in declared) == 2 * 60  # run a: 1 message; b: cut
    _stop(worker)


def test_kafka_transport_refuses_missing_topics_and_bad_run_ids(broker):
    with pytest.raises(ValueError, match="run_id must be"):
        KafkaTransport(broker.bootstrap, Topics(prefix=f"{PREFIX}-none"), run_id="a:b")
    with pytest.raises(ValueError, match=f"topic {PREFIX}-none.input does not exist"):
        KafkaTransport(broker.bootstrap, Topics(input=f"{PREFIX}-none.input", prefix=f"{PREFIX}-none"))


def test_without_a_worker_the_loop_gives_up_and_says_which_topic_it_waited_on(broker, tmp_path):
    prefix = f"{PREFIX}-idle"
    create_topics(broker.bootstrap, prefix, partitions=1)  # the topics, but no worker on them
    rng = np.random.default_rng(0)
    docs = [{"y": int(i % 2), "parts": [{"w": float(rng.normal())}]} for i in range(20)]
    (tmp_path / "docs.json").write_text(json.dumps(docs))
    run = _relational("--documents", str(tmp_path / "docs.json"), "--label", "y", "--budget", "2", "--out",
                      str(tmp_path / "out"), "--timeout", "3", "--bootstrap-servers", broker.bootstrap,
                      "--input-topic", f"{prefix}.input", "--topic-prefix", prefix, "--run-id", "lonely")
    assert run.returncode == 1, run.stderr
    assert "no feedback for feature" in run.stderr
    assert f"is a `streamforest kafka run` worker consuming {prefix}.input?" in run.stderr
    sent = [(json.loads(r.value)["stream"], json.loads(r.value)["type"])
            for r in read_topic(broker.bootstrap, f"{prefix}.input")]
    assert sent[0] == ("lonely:explore-0", "samples") and sent[-1] == ("lonely:explore-0", "control")


def _relational(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")} | (env or {})
    return subprocess.run([sys.executable, "-m", "streamforest.cli", "relational", "run", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env=env)


@pytest.mark.skipif(not MUTAGENESIS.exists(), reason="../shared/datasets/mutagenesis is not here")
def test_loop_over_kafka_writes_what_the_in_process_loop_writes(broker, tmp_path):
    docs = json.loads(MUTAGENESIS.read_text())
    for d in docs[::5]:
        d["mutagenic"] = None  # unlabelled rows: the final stream scores them
    data = tmp_path / "data.json"
    data.write_text(json.dumps(docs))
    common = ["--documents", str(data), "--label", "mutagenic", "--budget", "15", "--seed", "3"]
    ref = _relational(*common, "--out", str(tmp_path / "inprocess"), "--quiet")
    assert ref.returncode == 0, ref.stderr

    explore, topics = _worker(broker.bootstrap, f"{PREFIX}-explore", engine_config(3))
    final, final_topics = _worker(broker.bootstrap, f"{PREFIX}-final", engine_config(3, final=True))
    out = tmp_path / "kafka"
    run = _relational(*common, "--out", str(out), "--input-topic", topics.input, "--topic-prefix", topics.prefix,
                      "--final-input-topic", final_topics.input, "--final-topic-prefix", final_topics.prefix,
                      env={"STREAMFOREST_BOOTSTRAP_SERVERS": broker.bootstrap})  # the environment selects Kafka
    assert run.returncode == 0, run.stderr + "\n" + explore.log() + "\n" + final.log()
    assert "streamforest kafka run --bootstrap-servers" in run.stderr  # the workers' command lines are printed

    a, b = tmp_path / "inprocess", out
    trials = [orjson.loads(line) for line in (a / "candidates.jsonl").read_bytes().splitlines()]
    assert len(trials) == 15 and any(t["accepted"] for t in trials)
    # Byte for byte: no field of these files is a clock reading (the feedback's `seconds` is not kept).
    for name in ("candidates.jsonl", "features.csv", "predictions.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert len((b / "predictions.csv").read_text().splitlines()) == 1 + len(docs[::5])
    assert (b / "loop.png").stat().st_size > 0

    # The messages went over the topics under the run's stream names, and the run dropped its streams.
    msgs = [json.loads(r.value) for r in read_topic(broker.bootstrap, topics.input)]
    streams = {m["stream"] for m in msgs}
    run_ids = {s.split(":", 1)[0] for s in streams}
    assert len(run_ids) == 1 and {s.split(":", 1)[1] for s in streams} == {t["stream"] for t in trials}
    assert sum(m["type"] == "feature" for m in msgs) >= 15
    assert {m["stream"] for m in msgs if m["type"] == "control"} == streams
    final_msgs = [json.loads(r.value) for r in read_topic(broker.bootstrap, final_topics.input)]
    assert {m["stream"] for m in final_msgs} == {f"{run_ids.pop()}:final"}
    _stop(explore)
    _stop(final)


def test_without_kafka_python_the_loop_runs_in_process_and_kafka_names_the_extra(tmp_path):
    rng = np.random.default_rng(0)
    docs = [{"y": int(i % 2), "parts": [{"w": float(rng.normal() + i % 2)} for _ in range(3)]} for i in range(40)]
    data = tmp_path / "docs.json"
    data.write_text(json.dumps(docs))
    code = ("import sys; sys.modules['kafka'] = None\n"
            "from streamforest.cli import main\n"
            f"args = ['relational', 'run', '--documents', {str(data)!r}, '--label', 'y', '--budget', '3', '--quiet']\n"
            f"assert main([*args, '--out', {str(tmp_path / 'a')!r}]) == 0\n"
            f"sys.exit(main([*args, '--out', {str(tmp_path / 'b')!r}, '--bootstrap-servers', '127.0.0.1:1']))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=ROOT)
    assert done.returncode == 1, done.stderr
    assert "the relational loop over Kafka needs kafka-python" in done.stderr
    assert "pip install 'streamforest[kafka]'" in done.stderr
    assert (tmp_path / "a" / "candidates.jsonl").read_text().count("\n") == 3
