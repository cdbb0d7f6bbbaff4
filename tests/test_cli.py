"""The ``streamforest`` command: help, ``produce``, ``run``, ``inspect``, usage errors, and the MagicTelescope flow of
issue 4 end to end (produce -> bad lines mixed in -> run -> feedback, dead letters, test AUC)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest
from sklearn.metrics import roc_auc_score

from streamforest.cli import main
from streamforest.engine.messages import FeatureMessage, SamplesMessage, decode

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "streamforest" / "data"
DIABETES = DATA / "diabetes_37.csv"
MAGIC = DATA / "MagicTelescope_1120.csv"
CLI = [sys.executable, "-m", "streamforest.cli"]
SCRIPT = Path(sys.executable).with_name("streamforest")
TINY = ["--forest-param", "trees_per_generation=3", "--forest-param", "max_depth=4"]


def read_csv(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    return header, {h: [r[j] for r in rows[1:]] for j, h in enumerate(header)}


def jsonl(data: bytes) -> list[dict]:
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def produce(capsysbinary, *args: str) -> list[dict]:
    assert main(["produce", *args]) == 0
    return jsonl(capsysbinary.readouterr().out)


def toy_input(path: Path) -> Path:
    """A small flow: the diabetes dataset's first 200 rows, three features."""
    _header, cols = read_csv(DIABETES)
    ids = [str(i) for i in range(200)]
    msgs = [{"v": 1, "type": "samples", "stream": "d",
             "samples": [{"id": i, "label": int(cols["target"][k]) if k < 150 else None} for k, i in enumerate(ids)]}]
    msgs += [{"v": 1, "type": "feature", "stream": "d", "name": name, "ids": ids,
              "values": [float(v) for v in cols[name][:200]]} for name in ("plas", "mass", "age")]
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in msgs) + b'{"v": 1, "type": "nope"}\n')
    return path


# ----------------------------------------------------------------------------- help


def test_console_script_help_explains_the_commands():
    r = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for word in ("produce", "run", "inspect", "demo", "examples:", "streams of features"):
        assert word in r.stdout


@pytest.mark.parametrize(("command", "words"), [
    ("produce", ["--target", "--stream", "--seed", "--test-fraction", "--order", "--chunk", "0-based"]),
    ("run", ["--input", "--output", "--checkpoint-dir", "--metrics-port", "--forest-param", "--publish",
             "--encoding", "stdin"]),
    ("inspect", ["checkpoint", "generations"]),
    ("demo", ["--dataset", "--out", "baseline", "plot"]),
])
def test_each_subcommand_help_explains_itself(capsys, command, words):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for word in words:
        assert word in out, word


# ----------------------------------------------------------------------------- produce


def test_produce_prints_samples_then_one_feature_per_column(capsysbinary):
    header, cols = read_csv(DIABETES)
    msgs = produce(capsysbinary, str(DIABETES), "--target", "target", "--stream", "s1", "--seed", "4")
    n = len(cols["target"])
    features = [h for h in header if h != "target"]
    assert len(msgs) == 1 + len(features)
    for m in msgs:
        assert m["v"] == 1 and m["stream"] == "s1"
        decode(orjson.dumps(m))  # every message is valid input
    first = msgs[0]
    assert first["type"] == "samples"
    assert [s["id"] for s in first["samples"]] == [str(i) for i in range(n)]  # 0-based row numbers, as strings
    test = [k for k, s in enumerate(first["samples"]) if s["label"] is None]
    y = np.array([int(v) for v in cols["target"]])
    for c in (0, 1):  # a stratified third of each class is sent unlabelled
        assert abs(np.sum(y[test] == c) - round(np.sum(y == c) / 3)) <= 1
    assert all(s["label"] == y[k] for k, s in enumerate(first["samples"]) if s["label"] is not None)
    assert sorted(m["name"] for m in msgs[1:]) == sorted(features)
    for m in msgs[1:]:
        assert m["type"] == "feature" and m["kind"] == "numeric" and "parts" not in m
        assert m["ids"] == [str(i) for i in range(n)]
        assert m["values"] == [float(v) for v in cols[m["name"]]]


def test_produce_orders_and_splits_by_seed(capsysbinary):
    header, _ = read_csv(DIABETES)
    args = [str(DIABETES), "--target", "target", "--stream", "s"]
    in_file_order = produce(capsysbinary, *args, "--order", "file")
    assert [m["name"] for m in in_file_order[1:]] == header[:-1]
    a, b, c = (produce(capsysbinary, *args, "--seed", s) for s in ("1", "1", "2"))
    assert a == b
    assert [m["name"] for m in a[1:]] != [m["name"] for m in c[1:]]
    assert a[0] != c[0]  # another split
    none = produce(capsysbinary, *args, "--test-fraction", "0")
    assert all(s["label"] is not None for s in none[0]["samples"])


def test_produce_chunks_columns_into_parts(capsysbinary):
    msgs = produce(capsysbinary, str(DIABETES), "--target", "target", "--stream", "s", "--chunk", "300",
                   "--order", "file")
    parts = [decode(orjson.dumps(m)) for m in msgs[1:]]
    assert all(isinstance(p, FeatureMessage) for p in parts) and len(parts) == 8 * 3
    for k in range(8):
        col = parts[3 * k: 3 * k + 3]
        assert len({p.name for p in col}) == 1
        assert [(p.part, p.parts) for p in col] == [(0, 3), (1, 3), (2, 3)]
        assert [i for p in col for i in p.ids] == [str(i) for i in range(768)]


def test_produce_declares_nominal_columns(capsysbinary):
    msgs = produce(capsysbinary, str(DATA / "ilpd_1480.csv"), "--target", "target", "--stream", "s",
                   "--nominal", "Gender")
    kinds = {m["name"]: m["kind"] for m in msgs[1:]}
    assert kinds["Gender"] == "nominal" and kinds["Age"] == "numeric"
    assert isinstance(decode(orjson.dumps(msgs[0])), SamplesMessage)


def test_produce_accepts_the_name_of_a_bundled_dataset(capsysbinary):
    """``streamforest produce MagicTelescope --target target --stream s`` (the flow as issue 4's reviewers run it)."""
    msgs = produce(capsysbinary, "MagicTelescope", "--target", "target", "--stream", "s")
    assert len(msgs) == 11 and len(msgs[0]["samples"]) == 19020


# ----------------------------------------------------------------------------- run, inspect


def test_run_to_stdout(tmp_path, capfdbinary):
    src = toy_input(tmp_path / "in.jsonl")
    assert main(["run", "--input", str(src), "--output", "-", *TINY, "--encoding", "none"]) == 0
    out = jsonl(capfdbinary.readouterr().out)
    kinds = [r["type"] for r in out]
    assert kinds.count("feedback") == 3 and kinds.count("error") == 1 and kinds.count("prediction") == 3 * 50
    assert [p.name for p in tmp_path.iterdir()] == ["in.jsonl"]  # no output files


def test_run_then_inspect_shows_streams_generations_and_importances(tmp_path, capsys):
    src = toy_input(tmp_path / "in.jsonl")
    ckpt = tmp_path / "ckpt"
    assert main(["run", "--input", str(src), "--output", str(tmp_path / "out"), "--checkpoint-dir", str(ckpt),
                 *TINY]) == 0
    capsys.readouterr()
    assert main(["inspect", str(ckpt)]) == 0
    text = capsys.readouterr().out
    assert f"input {src} up to line 5" in text
    assert "stream 'd': 200 samples (150 labelled), 3 features" in text
    assert "model version 3, 9 trees in 3 generations" in text
    for name in ("plas", "mass", "age"):
        assert f"  {name}" in text  # a generation line and an importance line each
    assert "importances" in text


# ----------------------------------------------------------------------------- usage errors


def fails(capsys, argv: list[str], *words: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code not in (0, None), err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err
    return err


def test_missing_input_file(tmp_path, capsys):
    fails(capsys, ["run", "--input", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "out")],
          "no input file", "nope.jsonl")


@pytest.mark.parametrize(("param", "words"), [
    ("trees_per_generation", ["--forest-param expects key=value", "trees_per_generation"]),
    ("max_depth=-1", ["max_depth", "positive integer"]),
    ("bogus=1", ["bogus"]),
    ("policy=greedy", ["policy"]),
])
def test_bad_forest_param(tmp_path, capsys, param, words):
    src = toy_input(tmp_path / "in.jsonl")
    fails(capsys, ["run", "--input", str(src), "--output", str(tmp_path / "out"), "--forest-param", param], *words)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_inspect_of_an_empty_or_missing_directory(tmp_path, capsys):
    fails(capsys, ["inspect", str(tmp_path)], "no checkpoint", str(tmp_path))
    fails(capsys, ["inspect", str(tmp_path / "missing")], "no checkpoint")


def test_produce_errors(tmp_path, capsys):
    fails(capsys, ["produce", str(tmp_path / "none.csv"), "--target", "t", "--stream", "s"], "none.csv")
    fails(capsys, ["produce", str(DIABETES), "--target", "label", "--stream", "s"], "no column 'label'")


def test_checkpoint_of_another_input(tmp_path, capsys):
    a = toy_input(tmp_path / "a.jsonl")
    b = toy_input(tmp_path / "b.jsonl")
    ckpt = str(tmp_path / "ckpt")
    assert main(["run", "--input", str(a), "--output", str(tmp_path / "o1"), "--checkpoint-dir", ckpt, *TINY]) == 0
    fails(capsys, ["run", "--input", str(b), "--output", str(tmp_path / "o2"), "--checkpoint-dir", ckpt, *TINY],
          "another --checkpoint-dir")


def test_usage_errors_exit_non_zero_with_usage(capsys):
    r = subprocess.run([*CLI, "run", "--output", "out"], capture_output=True, text=True)
    assert r.returncode == 2 and "--input" in r.stderr and "usage:" in r.stderr
    for argv, words in ((["teleport"], "invalid choice"), (["produce", "x.csv"], "--target"),
                        (["run", "--input", "-", "--output", "-", "--publish", "some"], "invalid choice")):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2 and words in capsys.readouterr().err


# ----------------------------------------------------------------------------- the flow on MagicTelescope

BAD_LINES = [
    b'{"v": 1, "type": "feature", "stream": "s", "name": "FLength", "ids": ["0", "1"], "val',  # truncated JSON
    b'{"v": 1, "type": "feature", "stream": "s", "name": 42, "ids": ["0"], "values": [1.0]}',  # wrong type
    b'{"v": 1, "type": "samples", "stream": "s", "samples": {"id": "0"}}',  # wrong type
    b'{"v": 1, "type": "teleport", "stream": "s"}',  # unknown message type
    b'{"v": 1, "type": "feature", "stream": "s", "name": "extra", "ids": ["0", "1", "2"], "values": [1.0, 2.0]}',
    b'{"v": 1, "type": "label", "stream": "s", "id": "5", "label": NaN}',  # NaN label, a raw literal
    b'{"v": 1, "type": "label", "stream": "s", "id": "no-such-row", "label": 1}',  # unknown id
]


@pytest.mark.slow
def test_magic_telescope_flow(tmp_path):
    seed = 7
    produced = subprocess.run([str(SCRIPT), "produce", str(MAGIC), "--target", "target", "--stream", "s",
                               "--seed", str(seed)], capture_output=True, check=True).stdout
    lines = produced.splitlines()
    assert len(lines) == 11
    # Bad lines mixed in: after the samples, between features, at the end.
    mixed = [lines[0], BAD_LINES[0], *lines[1:4], *BAD_LINES[1:4], *lines[4:9], BAD_LINES[4], *lines[9:],
             *BAD_LINES[5:]]
    src = tmp_path / "input.jsonl"
    src.write_bytes(b"\n".join(mixed) + b"\n")
    bad_at = [k + 1 for k, line in enumerate(mixed) if line in BAD_LINES]

    out = tmp_path / "out"
    r = subprocess.run([str(SCRIPT), "run", "--input", str(src), "--output", str(out), "--encoding", "none"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    feedback = jsonl((out / "feedback.jsonl").read_bytes())
    _, cols = read_csv(MAGIC)
    assert sorted(f["feature"] for f in feedback) == sorted(c for c in cols if c != "target")  # one per feature
    errors = jsonl((out / "errors.jsonl").read_bytes())
    assert [e["source"] for e in errors] == [f"{src}:{k}" for k in bad_at]  # one per bad line
    assert [e["original"].encode() for e in errors] == BAD_LINES
    assert all(e["reason"] for e in errors)

    samples = orjson.loads(lines[0])["samples"]
    test_ids = [s["id"] for s in samples if s["label"] is None]
    preds = jsonl((out / "predictions.jsonl").read_bytes())
    final = max(p["model_version"] for p in preds)
    assert final == feedback[-1]["model_version"] == 10
    last = {p["id"]: p["proba"]["1"] for p in preds if p["model_version"] == final}
    assert sorted(last) == sorted(test_ids)  # the unlabelled rows, each once
    y = np.array([int(cols["target"][int(i)]) for i in test_ids])
    auc = roc_auc_score(y, [last[i] for i in test_ids])
    assert auc >= 0.90, auc
