"""The embedded runtime: JSONL in, a directory of JSONL files out, checkpoints, resuming, determinism, SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from streamforest.engine.core import EngineConfig
from streamforest.engine.produce import produce_messages
from streamforest.engine.runtime import OUTPUT_FILES, run

from .support import CLI, DIABETES, MAGIC, TINY, dumps, label, task, task_messages, untimed

BAD = [
    b'{"v": 1, "type": "feature", "stream": "s", "name": "broken"',  # truncated JSON
    b'{"v": 1, "type": "teleport", "stream": "s"}',  # unknown type
    b'{"v": 1, "type": "feature", "stream": "s", "name": "x", "ids": ["0", "1"], "values": [1.0]}',
    b'{"v": 1, "type": "label", "stream": "s", "id": "3", "label": NaN}',
]


def read(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def outputs(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in OUTPUT_FILES.values()}


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def toy_lines() -> list[bytes]:
    t = task()
    msgs = [dumps(m) for m in task_messages(t)]
    later = [dumps(label("s", t["ids"][-1], 1)), dumps(label("s", t["ids"][-2], 0))]
    return msgs[:2] + BAD[:2] + [b"", b"   "] + msgs[2:] + BAD[2:] + later


CONFIG = EngineConfig(forest=dict(TINY), encoding="leaves", n_components=2**10)


# ----------------------------------------------------------------------------- in-process runs


def test_run_writes_one_file_per_record_type(tmp_path):
    src = write_lines(tmp_path / "in.jsonl", toy_lines())
    e = run(str(src), str(tmp_path / "out"), CONFIG)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES.values())
    feedback, preds, encs, errors = (read(out / n) for n in
                                     ("feedback.jsonl", "predictions.jsonl", "encodings.jsonl", "errors.jsonl"))
    assert [r["feature"] for r in feedback] == ["a", "b", "noise", "cat"]
    assert {r["type"] for r in preds} == {"prediction"} and {r["type"] for r in encs} == {"encoding"}
    assert len(preds) == len(encs) == 4 * 15 + 14 + 13  # per feature, then after each delayed label
    # One dead letter per bad line, saying where it came from (line numbers count blank lines too).
    assert [e["source"] for e in errors] == [f"{src}:{n}" for n in (3, 4, 10, 11)]
    assert [e["original"].encode() for e in errors] == BAD
    assert e.streams["s"].forest.model_version_ == 6


def test_resuming_from_a_checkpoint_applies_nothing_twice(tmp_path):
    lines = toy_lines()
    ref = tmp_path / "ref"
    run(str(write_lines(tmp_path / "ref.jsonl", lines)), str(ref), CONFIG)

    src, out, ckpt = tmp_path / "in.jsonl", tmp_path / "out", tmp_path / "ckpt"
    write_lines(src, lines[:7])
    run(str(src), str(out), CONFIG, str(ckpt))
    manifest = json.loads((ckpt / "manifest.json").read_text())
    assert manifest["position"] == {"source": str(src), "offset": src.stat().st_size, "line": 7}
    assert manifest["outputs"] == {n: (out / n).stat().st_size for n in OUTPUT_FILES.values()}
    # Output written after the checkpoint (a crash before the next one) is cut back and written again.
    with open(out / "predictions.jsonl", "ab") as fh:
        fh.write(b'{"v": 1, "type": "prediction", "half a line')
    write_lines(src, lines)  # more input arrives
    run(str(src), str(out), CONFIG, str(ckpt))
    run(str(src), str(out), CONFIG, str(ckpt))  # and again: nothing new
    got, want = outputs(out), outputs(ref)
    for name in ("predictions.jsonl", "encodings.jsonl"):
        assert got[name] == want[name], name
    assert got["errors.jsonl"].replace(b"in.jsonl", b"ref.jsonl") == want["errors.jsonl"]
    assert untimed(read(out / "feedback.jsonl")) == untimed(read(ref / "feedback.jsonl"))


def test_checkpoint_every_n_messages_records_the_position(tmp_path):
    lines = [dumps(m) for m in task_messages(task())[:1]] + BAD * 3
    src = write_lines(tmp_path / "in.jsonl", lines)
    ckpt = tmp_path / "ckpt"
    run(str(src), str(tmp_path / "out"), CONFIG, str(ckpt), checkpoint_every=5)
    manifest = json.loads((ckpt / "manifest.json").read_text())
    assert manifest["seq"] == 3  # after 5 and 10 messages, and at the end
    assert manifest["position"]["line"] == 13
    assert manifest["outputs"]["errors.jsonl"] == (tmp_path / "out" / "errors.jsonl").stat().st_size


def test_a_checkpoint_of_another_input_is_refused(tmp_path):
    lines = toy_lines()
    ckpt = tmp_path / "ckpt"
    run(str(write_lines(tmp_path / "a.jsonl", lines)), str(tmp_path / "out"), CONFIG, str(ckpt))
    with pytest.raises(ValueError, match="another --checkpoint-dir"):
        run(str(write_lines(tmp_path / "b.jsonl", lines)), str(tmp_path / "out2"), CONFIG, str(ckpt))


def test_stdin_input_resumes_by_line(tmp_path):
    """Through the CLI: a checkpointed run on stdin, then the whole input again on stdin, equals one run."""
    lines = toy_lines()
    whole = b"".join(line + b"\n" for line in lines)
    half = b"".join(line + b"\n" for line in lines[:8])
    args = ["--forest-param", "trees_per_generation=3", "--forest-param", "max_depth=4", "--encoding", "none"]
    ref, out, ckpt = tmp_path / "ref", tmp_path / "out", tmp_path / "ckpt"
    src = write_lines(tmp_path / "in.jsonl", lines)
    run(str(src), str(ref), EngineConfig(forest={"random_state": 0, "trees_per_generation": 3, "max_depth": 4},
                                         encoding="none"))
    for data in (half, whole):
        subprocess.run([*CLI, "run", "--input", "-", "--output", str(out), "--checkpoint-dir", str(ckpt), *args],
                       input=data, check=True)
    got, want = outputs(out), outputs(ref)
    assert got["predictions.jsonl"] == want["predictions.jsonl"]
    assert got["errors.jsonl"] == want["errors.jsonl"].replace(str(src).encode(), b"stdin")
    assert [e["source"] for e in read(out / "errors.jsonl")] == [f"stdin:{n}" for n in (3, 4, 10, 11)]
    assert untimed(read(out / "feedback.jsonl")) == untimed(read(ref / "feedback.jsonl"))


# ----------------------------------------------------------------------------- determinism across processes


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The same input file run twice by two separate processes (publishing everything, with path encodings)."""
    d = tmp_path_factory.mktemp("determinism")
    msgs, _, _ = produce_messages(DIABETES, "target", "d", seed=3)
    lines = [dumps(m) for m in msgs]
    src = write_lines(d / "in.jsonl", lines[:3] + BAD + lines[3:])
    args = ["--publish", "all", "--encoding", "paths", "--n-components", "4096",
            "--forest-param", "trees_per_generation=4", "--forest-param", "max_depth=5"]
    for k in (1, 2):
        subprocess.run([*CLI, "run", "--input", str(src), "--output", str(d / f"out{k}"), *args], check=True,
                       cwd=d)
    return d / "out1", d / "out2"


def test_two_processes_give_identical_predictions_encodings_and_errors(two_runs):
    a, b = (outputs(d) for d in two_runs)
    assert all(a[n] for n in a), "every output file has records"
    for name in ("predictions.jsonl", "encodings.jsonl", "errors.jsonl"):
        assert a[name] == b[name], name
    assert untimed(read(two_runs[0] / "feedback.jsonl")) == untimed(read(two_runs[1] / "feedback.jsonl"))


def test_two_processes_give_identical_feedback_but_for_its_timings(two_runs):
    """Feedback is identical across runs except its wall-clock ``seconds`` (documented as the one field that
    varies), and those are real durations."""
    a, b = (outputs(d) for d in two_runs)
    fa = [orjson.loads(line) for line in a["feedback.jsonl"].splitlines()]
    fb = [orjson.loads(line) for line in b["feedback.jsonl"].splitlines()]
    assert fa and all(r["seconds"] > 0 for r in fa + fb)
    assert [{**r, "seconds": 0} for r in fa] == [{**r, "seconds": 0} for r in fb]


# ----------------------------------------------------------------------------- SIGKILL halfway, then restart

CHEAP = ["--forest-param", "trees_per_generation=10", "--forest-param", "max_depth=8", "--encoding", "none"]


@pytest.fixture(scope="module")
def magic_input(tmp_path_factory) -> Path:
    msgs, _, _ = produce_messages(MAGIC, "target", "s", seed=5)
    lines = [dumps(m) for m in msgs]
    return write_lines(tmp_path_factory.mktemp("magic") / "magic.jsonl", lines[:1] + BAD[:2] + lines[1:6] + BAD[2:]
                       + lines[6:])


def features_done(ckpt: Path, out: Path) -> int:
    """Feedback records the last checkpoint covers."""
    try:
        manifest = json.loads((ckpt / "manifest.json").read_text())
    except FileNotFoundError:
        return 0
    size = manifest["outputs"].get("feedback.jsonl", 0)
    return (out / "feedback.jsonl").read_bytes()[:size].count(b"\n")


@pytest.mark.slow
def test_a_run_killed_halfway_and_restarted_ends_like_an_uninterrupted_run(tmp_path, magic_input):
    ref = tmp_path / "ref"
    subprocess.run([*CLI, "run", "--input", str(magic_input), "--output", str(ref), *CHEAP], check=True)

    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    cmd = [*CLI, "run", "--input", str(magic_input), "--output", str(out), "--checkpoint-dir", str(ckpt), *CHEAP]
    proc = subprocess.Popen(cmd)
    try:
        deadline = time.monotonic() + 60
        while features_done(ckpt, out) < 3:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = features_done(ckpt, out)
    assert 3 <= done < 10, "killed halfway"

    subprocess.run(cmd, check=True)  # restarted on the same checkpoint directory
    assert (out / "predictions.jsonl").read_bytes() == (ref / "predictions.jsonl").read_bytes()
    assert (out / "errors.jsonl").read_bytes() == (ref / "errors.jsonl").read_bytes()
    feedback = read(out / "feedback.jsonl")
    assert len(feedback) == 10 and untimed(feedback) == untimed(read(ref / "feedback.jsonl"))
    assert len(read(out / "errors.jsonl")) == len(BAD)
