"""Restarts that never corrupt: a checkpoint only resumes the run it covers (same configuration, input and outputs),
a corrupt or truncated checkpoint falls back to the previous generation, and the input's edge cases (a byte order
mark, a CSV given to ``run``, over-long lines) are handled before anything is written."""

from __future__ import annotations

import json
import shutil
import subprocess

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamforest.engine.checkpoint import MANIFEST, PREVIOUS, Checkpointer, CheckpointError
from streamforest.engine.core import EngineConfig
from streamforest.engine.runtime import OUTPUT_FILES, run

from .support import CLI, REPO, TINY, dumps, engine, feature, label, samples, state_bytes
from .test_runtime import CONFIG, outputs, read, toy_lines, write_lines

ARGS = ["--forest-param", "trees_per_generation=3", "--forest-param", "max_depth=4", "--n-components", "1024"]


def input_lines() -> list[bytes]:
    """The toy input with, after its 9th line, a message that changes the state without changing the model (so
    that the last checkpoint of a run over those 10 lines rewrites the stream: the two generations differ)."""
    lines = toy_lines()
    return [*lines[:9], dumps(samples("s", [("extra", None)])), *lines[9:]]


@pytest.fixture
def checkpointed(tmp_path):
    """A run over half the toy input with a checkpoint, and the reference outputs of the whole input."""
    lines = input_lines()
    ref = tmp_path / "ref"
    run(str(write_lines(tmp_path / "ref.jsonl", lines)), str(ref), CONFIG)
    src, out, ckpt = tmp_path / "in.jsonl", tmp_path / "out", tmp_path / "ckpt"
    write_lines(src, lines[:10])
    run(str(src), str(out), CONFIG, str(ckpt), checkpoint_every=2)
    write_lines(src, lines)  # more input arrives
    return src, out, ckpt, ref


def same_as_reference(out, ref):
    got, want = outputs(out), outputs(ref)
    for name in ("predictions.jsonl", "encodings.jsonl"):
        assert got[name] == want[name], name
    assert got["errors.jsonl"].replace(b"in.jsonl", b"ref.jsonl") == want["errors.jsonl"]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in read(out / "feedback.jsonl")] == \
        [{k: v for k, v in r.items() if k != "seconds"} for r in read(ref / "feedback.jsonl")]


# ----------------------------------------------------------------------------- defect 3: outputs of another run


@pytest.mark.parametrize("how", ["new directory", "emptied directory", "files removed", "another run's files"])
def test_a_restart_into_outputs_the_checkpoint_did_not_see_is_refused_and_pads_nothing(checkpointed, tmp_path, how):
    src, out, ckpt, _ = checkpointed
    target = out
    if how == "new directory":
        target = tmp_path / "fresh"
    elif how == "emptied directory":
        for name in OUTPUT_FILES.values():
            (out / name).write_bytes(b"")
    elif how == "files removed":
        shutil.rmtree(out)
    else:  # same sizes, other bytes
        for name in OUTPUT_FILES.values():
            data = (out / name).read_bytes()
            (out / name).write_bytes(data.replace(b'"s"', b'"t"'))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match="cannot resume") as exc:
        run(str(src), str(target), CONFIG, str(ckpt))
    assert str(target) in str(exc.value) or "not the file the checkpoint saw" in str(exc.value)
    # Refused before anything was written: no NUL padding, no new files, the checkpoint untouched.
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert not any(b"\0" in data for data in before.values() if not str(data[:4]).startswith("b'PK"))


@pytest.mark.parametrize("encoding", ["leaves", "none"])  # "none": an empty encodings.jsonl in the checkpoint
def test_the_cli_says_why_a_restart_into_a_new_directory_is_refused(tmp_path, encoding):
    src, out, ckpt = write_lines(tmp_path / "in.jsonl", toy_lines()), tmp_path / "out", tmp_path / "ckpt"
    cmd = [*CLI, "run", "--input", str(src), "--checkpoint-dir", str(ckpt), "--encoding", encoding, *ARGS]
    subprocess.run([*cmd, "--output", str(out)], check=True)
    res = subprocess.run([*cmd, "--output", str(tmp_path / "fresh")], capture_output=True, text=True)
    assert res.returncode == 1 and "Traceback" not in res.stderr and "Errno" not in res.stderr
    assert "new or emptied output directory" in res.stderr and "--output" in res.stderr
    assert not (tmp_path / "fresh").exists()


def test_a_restart_into_the_same_directory_continues_exactly(checkpointed):
    src, out, ckpt, ref = checkpointed
    run(str(src), str(out), CONFIG, str(ckpt))
    same_as_reference(out, ref)


# ----------------------------------------------------------------------------- defect 4: checkpoints trust too much


@pytest.mark.parametrize(("change", "named"), [
    (dict(forest={**TINY, "random_state": 1}), "forest random_state: 0 then, 1 now"),
    (dict(encoding="paths"), "encoding: 'leaves' then, 'paths' now"),
    (dict(n_components=2**11), "n_components: 1024 then, 2048 now"),
    (dict(forest={**TINY, "trees_per_generation": 5}), "forest trees_per_generation: 3 then, 5 now"),
])
def test_a_restart_with_another_configuration_is_refused_naming_what_differs(checkpointed, change, named):
    src, out, ckpt, _ = checkpointed
    config = EngineConfig(**{"forest": dict(TINY), "encoding": "leaves", "n_components": 2**10, **change})
    before = outputs(out)
    with pytest.raises(ValueError, match="another engine configuration") as exc:
        run(str(src), str(out), config, str(ckpt))
    assert named in str(exc.value)
    assert outputs(out) == before


def test_a_replaced_or_edited_input_is_refused(checkpointed, tmp_path):
    src, out, ckpt, _ = checkpointed
    lines = input_lines()
    edited = list(lines)
    edited[0] = edited[0].replace(b'"label":1', b'"label":0', 1)
    assert edited[0] != lines[0]
    write_lines(src, edited)  # same path, other content before the checkpoint's position
    with pytest.raises(ValueError, match="replaced or edited"):
        run(str(src), str(out), CONFIG, str(ckpt))
    write_lines(src, lines[:3])  # cut short
    with pytest.raises(ValueError, match="fewer than"):
        run(str(src), str(out), CONFIG, str(ckpt))
    moved = write_lines(tmp_path / "elsewhere.jsonl", lines)  # the same content under another path
    with pytest.raises(ValueError, match=r"it covers the input .*in\.jsonl, not .*elsewhere\.jsonl"):
        run(str(moved), str(out), CONFIG, str(ckpt))


def test_the_manifest_records_the_configuration_and_the_input_identity(checkpointed):
    src, _, ckpt, _ = checkpointed
    manifest = json.loads((ckpt / MANIFEST).read_text())
    assert manifest["config"] == json.loads(json.dumps(CONFIG.to_json()))
    assert manifest["input"]["path"] == str(src.resolve())
    assert set(manifest["input"]) == {"path", "offset", "head_sha256", "tail_sha256"}
    assert manifest["output"]["kind"] == "directory" and set(manifest["output"]["tail_sha256"]) == set(
        OUTPUT_FILES.values())


def corrupt(path, how):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if how == "truncated" else data[:40] + b"\x00garbage\xff" + data[60:])


@pytest.mark.parametrize("how", ["truncated", "garbled"])
@pytest.mark.parametrize("what", ["manifest", "stream file"])
def test_a_corrupt_checkpoint_falls_back_to_the_previous_one_and_ends_like_an_uninterrupted_run(
        checkpointed, capsys, how, what):
    src, out, ckpt, ref = checkpointed
    manifest = json.loads((ckpt / MANIFEST).read_text())
    previous = json.loads((ckpt / PREVIOUS).read_text())
    assert previous["seq"] == manifest["seq"] - 1
    if what == "manifest":
        corrupt(ckpt / MANIFEST, how)
    else:
        changed = [f for s, f in manifest["streams"].items() if previous["streams"].get(s) != f]
        corrupt(ckpt / changed[0], how)
    run(str(src), str(out), CONFIG, str(ckpt))
    err = capsys.readouterr().err
    assert "resuming from the previous checkpoint" in err and "allow_pickle" not in err
    same_as_reference(out, ref)
    # The next restart finds good checkpoints again.
    _, latest = Checkpointer(ckpt).load()
    assert latest["position"]["offset"] == src.stat().st_size


def test_no_readable_checkpoint_is_a_clear_error_not_a_traceback(checkpointed, tmp_path):
    src, out, ckpt, _ = checkpointed
    for name in (MANIFEST, PREVIOUS):
        corrupt(ckpt / name, "truncated")
    with pytest.raises(CheckpointError, match="no readable checkpoint"):
        Checkpointer(ckpt).load()
    for f in ckpt.glob("stream-*.npz"):
        corrupt(f, "garbled")
    (ckpt / MANIFEST).write_text(json.dumps({"format": "streamforest.checkpoint", "version": 1, "seq": 3,
                                             "position": {}, "outputs": {},
                                             "streams": {"s": next(ckpt.glob("stream-*.npz")).name}}))
    for argv in (["run", "--input", str(src), "--output", str(out), "--checkpoint-dir", str(ckpt), *ARGS],
                 ["inspect", str(ckpt)]):
        res = subprocess.run([*CLI, *argv], capture_output=True, text=True)
        assert res.returncode == 1, res.stderr
        assert "Traceback" not in res.stderr and "allow_pickle" not in res.stderr
        assert "corrupt or truncated" in res.stderr


# ----------------------------------------------------------------------------- stdout: at least once


def test_stdout_is_at_least_once_a_replay_repeats_the_records_after_the_last_checkpoint(tmp_path):
    lines = toy_lines()
    src, ckpt = write_lines(tmp_path / "in.jsonl", lines), tmp_path / "ckpt"
    cmd = [*CLI, "run", "--input", str(src), "--output", "-", "--checkpoint-dir", str(ckpt), "--encoding", "none",
           *ARGS]
    first = subprocess.run(cmd, capture_output=True, check=True).stdout
    # A crash before the last checkpoint: the previous generation is what a restart finds.
    shutil.copy(ckpt / PREVIOUS, ckpt / MANIFEST)
    resumed_at = json.loads((ckpt / MANIFEST).read_text())["position"]["line"]
    again = subprocess.run(cmd, capture_output=True, check=True)
    assert f"resuming after line {resumed_at}" in again.stderr.decode() and "at-least-once" in again.stderr.decode()
    records = [orjson.loads(x) for x in first.splitlines()]
    repeated = [orjson.loads(x) for x in again.stdout.splitlines()]
    assert repeated, "the replay wrote records again"
    strip = lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs]  # noqa: E731
    assert strip(records[-len(repeated):]) == strip(repeated)  # exactly the tail, again: nothing lost


# ----------------------------------------------------------------------------- defect 5: input edge cases


def test_a_byte_order_mark_on_the_first_line_is_read(tmp_path):
    lines = toy_lines()
    ref, out = tmp_path / "ref", tmp_path / "out"
    run(str(write_lines(tmp_path / "ref.jsonl", lines)), str(ref), CONFIG)
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + b"".join(line + b"\n" for line in lines))
    run(str(src), str(out), CONFIG)
    same_as_reference(out, ref)


def test_a_csv_given_to_run_is_refused_with_a_hint(tmp_path):
    src = tmp_path / "data.csv"
    src.write_text("a,b,target\n1,2,0\n3,4,1\n")
    res = subprocess.run([*CLI, "run", "--input", str(src), "--output", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "not JSONL messages" in res.stderr and "streamforest produce" in res.stderr
    assert not (tmp_path / "out").exists()


def test_an_over_long_line_is_one_small_dead_letter_and_the_rest_goes_on(tmp_path):
    lines = toy_lines()
    huge = b'{"v": 1, "type": "feature", "stream": "s", "name": "big", "ids": [' + b'"0", ' * 200_000 + b'"1"]}'
    src = write_lines(tmp_path / "in.jsonl", [*lines[:2], huge, *lines[2:]])
    config = EngineConfig(forest=dict(TINY), encoding="leaves", n_components=2**10, max_message_bytes=100_000)
    run(str(src), str(tmp_path / "out"), config)
    errors = read(tmp_path / "out" / "errors.jsonl")
    big = [e for e in errors if e["source"].endswith(":3")]
    assert len(big) == 1 and big[0]["original_bytes"] == len(huge) and big[0]["truncated"]
    assert "over the limit of 100000 bytes" in big[0]["reason"]
    assert len(big[0]["original"]) == 4096 and huge.startswith(big[0]["original"].encode())
    assert len(read(tmp_path / "out" / "feedback.jsonl")) == 4  # the rest of the stream went on


def test_caps_on_message_labels_and_categories_refuse_without_changing_anything():
    e = engine()
    e.process(dumps(samples("s", [(str(i), i % 2) for i in range(10)])))
    before = state_bytes(e)
    for msg in (samples("s", [("x", "l" * 257)]), label("s", "3", "l" * 300),
                feature("s", "c", [str(i) for i in range(10)], ["c" * 1025] * 10)):
        out = e.process(dumps(msg))
        assert [r["type"] for r in out] == ["error"] and "longer than" in out[0]["reason"]
        assert state_bytes(e) == before


# ----------------------------------------------------------------------------- class keys


@pytest.mark.parametrize(("labels", "keys"), [
    ([0, 1], ["0", "1"]), ([0.0, 1.0], ["0", "1"]), ([1, 2.5], ["1", "2.5"]), ([False, True], ["false", "true"]),
    (["no", "yes"], ["no", "yes"]),
])
def test_class_keys_of_predictions_are_the_labels_as_json_writes_them(labels, keys):
    e = engine()
    ids = [str(i) for i in range(30)]
    e.process(dumps(samples("s", [(i, labels[k % 2] if k < 24 else None) for k, i in enumerate(ids)])))
    out = e.process(dumps(feature("s", "f", ids, [float(k % 2) + 0.1 * (k % 5) for k in range(30)])))
    preds = [r for r in out if r["type"] == "prediction"]
    assert preds and all(list(r["proba"]) == keys for r in preds)


def test_waiting_feedback_and_truncated_dead_letters_validate_against_the_schemas():
    from jsonschema import Draft202012Validator

    schemas = {k: Draft202012Validator(json.loads((REPO / "docs" / "schemas" / f"{k}.schema.json").read_text()))
               for k in ("feedback", "error")}
    e = engine()
    e.process(dumps(samples("s", [("0", 1), ("1", 1), ("2", None)])))
    waiting = e.process(dumps(feature("s", "f", ["0", "1", "2"], [1.0, 2.0, 3.0])))
    long = e.process(b'{"v": 1, "type": "samples", "stream": "s", "samples": "' + "é".encode() * 5000 + b'"}')
    grown = e.process(dumps(label("s", "2", 0)))
    assert [r["status"] for r in waiting] == ["waiting"] and long[0]["truncated"]
    assert len(long[0]["original"].encode()) <= 4096  # cut at a character boundary
    for r in [*waiting, *long, *[r for r in grown if r["type"] == "feedback"]]:
        assert not list(schemas[r["type"]].iter_errors(r)), r
    bad = dict(waiting[0], generation=3)  # a waiting record has no generation
    assert list(schemas["feedback"].iter_errors(bad))


def test_one_bad_first_line_among_messages_is_a_dead_letter_not_a_refused_input(tmp_path):
    src = write_lines(tmp_path / "in.jsonl", [b"not json", *toy_lines()])
    run(str(src), str(tmp_path / "out"), CONFIG)
    errors = read(tmp_path / "out" / "errors.jsonl")
    assert errors[0]["source"].endswith(":1") and len(read(tmp_path / "out" / "feedback.jsonl")) == 4


@pytest.fixture(scope="module")
def checkpoint_files(tmp_path_factory):
    """The files of a two-generation checkpoint directory (name -> bytes)."""
    d = tmp_path_factory.mktemp("ck")
    lines = input_lines()
    src = write_lines(d / "in.jsonl", lines[:10])
    run(str(src), str(d / "out"), CONFIG, str(d / "ckpt"), checkpoint_every=2)
    return {p.name: p.read_bytes() for p in (d / "ckpt").iterdir()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pick=st.integers(0, 2**16), how=st.sampled_from(["flip", "cut", "zero"]), where=st.floats(0, 1),
       flip=st.integers(1, 255))
def test_any_corruption_of_a_checkpoint_falls_back_or_is_a_clear_error(checkpoint_files, tmp_path, pick, how, where,
                                                                       flip):
    """Flip, cut or overwrite bytes of any checkpoint file: loading gives the newest intact generation (the
    previous one when the newest is hit) or a CheckpointError, never another exception or a silent wrong state."""
    d = tmp_path / f"ck{pick}-{how}-{where}-{flip}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    for name, content in checkpoint_files.items():
        (d / name).write_bytes(content)
    good = Checkpointer(d).load()[1]
    names = sorted(checkpoint_files)
    name = names[pick % len(names)]
    content = bytearray(checkpoint_files[name])
    at = min(int(where * len(content)), len(content) - 1)
    if how == "flip":
        content[at] ^= flip
    elif how == "cut":
        content = content[:at]
    else:
        content[at:at + 64] = bytes(len(content[at:at + 64]))
    (d / name).write_bytes(bytes(content))
    c = Checkpointer(d)
    try:
        _, manifest = c.load()
    except CheckpointError as exc:
        assert "allow_pickle" not in str(exc)
        return
    current = json.loads(checkpoint_files[MANIFEST])
    if manifest["seq"] == current["seq"]:  # the newest generation still reads: the damage missed what it needs
        assert manifest["position"] == good["position"] and not c.warnings
    else:
        assert manifest["seq"] == current["seq"] - 1 and c.warnings


def test_a_manifest_edited_into_other_valid_json_is_caught_by_its_checksum(checkpoint_files, tmp_path):
    for name, content in checkpoint_files.items():
        (tmp_path / name).write_bytes(content)
    manifest = json.loads(checkpoint_files[MANIFEST])
    offset = manifest["position"]["offset"]
    (tmp_path / MANIFEST).write_bytes(checkpoint_files[MANIFEST].replace(
        f'"offset": {offset}'.encode(), f'"offset": {offset - 1}'.encode()))  # one digit off: still valid JSON
    c = Checkpointer(tmp_path)
    _, loaded = c.load()
    assert loaded["seq"] == manifest["seq"] - 1 and "checksum does not match" in c.warnings[0]
