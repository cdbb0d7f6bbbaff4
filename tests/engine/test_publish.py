"""Republication in batches: bounded chunks, the same records and the same bytes whatever the chunk size."""

from __future__ import annotations

import orjson
import pytest

from streamforest.engine.core import CHUNK_SIZE, Engine, EngineConfig
from streamforest.engine.records import RecordBatch
from streamforest.engine.runtime import OUTPUT_FILES, run

from .support import TINY, dumps, feature, label, samples, task, task_messages, untimed


def regression_messages(n: int = 50) -> list[dict]:
    t = task(n=n)
    msgs = task_messages(t)
    msgs[0] = samples("s", [(sid, None if lab is None else float(i) / 7) for i, (sid, lab) in
                            enumerate(zip(t["ids"], t["labels"], strict=True))])
    return msgs


def multiclass_messages(n: int = 50) -> list[dict]:
    t = task(n=n)
    msgs = task_messages(t)
    names = ["r\u00f8d", 'gr"een', "blue"]
    msgs[0] = samples("s", [(sid, None if lab is None else names[i % 3]) for i, (sid, lab) in
                            enumerate(zip(t["ids"], t["labels"], strict=True))])
    return msgs


def toy_messages() -> list[dict]:
    t = task(n=50)
    return [*task_messages(t), label("s", t["ids"][-1], 1), {"v": 1, "type": "control", "stream": "s",
                                                              "op": "snapshot"}]


CASES = {
    "leaves": (toy_messages, {"encoding": "leaves"}),
    "paths-weighted-all": (toy_messages, {"encoding": "paths", "encoding_values": "weighted", "publish": "all"}),
    "regression": (regression_messages, {"encoding": "leaves"}),
    "multiclass": (multiclass_messages, {"encoding": "paths"}),
}


def make(case: str, chunk_size: int) -> Engine:
    _, options = CASES[case]
    return Engine(EngineConfig(forest=dict(TINY), n_components=2**10, **options), chunk_size=chunk_size)


def lines(records: list[dict]) -> list[bytes]:
    return [orjson.dumps(r) for r in untimed(records)]


@pytest.mark.parametrize("case", list(CASES))
def test_chunked_outputs_equal_unchunked_outputs(case):
    msgs = [dumps(m) for m in CASES[case][0]()]
    outs = []
    for chunk in (1, 7, CHUNK_SIZE):
        e = make(case, chunk)
        outs.append([lines(e.process(m)) for m in msgs])
    assert any(len(o) > 20 for o in outs[0]), "the case republishes more than one chunk"
    assert outs[0] == outs[1] == outs[2]


def test_the_message_is_applied_before_the_first_batch_and_batches_are_bounded():
    t = task(n=50)
    msgs = [dumps(m) for m in task_messages(t)]
    e = make("leaves", 4)
    for m in msgs[:-1]:
        e.process(m)
    produced = e.metrics.records_produced.labels("encoding")
    before = produced._value.get()
    batches = e.process_batches(msgs[-1])
    first = next(batches)
    assert [r["type"] for r in first] == ["feedback"]
    st = e.streams["s"]
    assert "cat" in st.columns and first[0]["model_version"] == st.forest.model_version_
    rest = list(batches)
    assert all(isinstance(b, RecordBatch) and 1 <= len(b) <= 4 for b in rest)
    kinds = [b.type for b in rest]
    assert kinds == sorted(kinds, key=["prediction", "encoding"].index), "predictions, then encodings"
    n_scoring = sum(lab is None for lab in t["labels"])
    assert sum(len(b) for b in rest) == 2 * n_scoring
    assert produced._value.get() - before == n_scoring


def test_a_republication_read_after_the_next_message_is_the_snapshot_of_its_own_model():
    # A message changes a fork of its stream and commits it: the state an unread republication reads is never
    # written into, so reading it late gives what reading it in time gives.
    t = task(n=50)
    msgs = [dumps(m) for m in task_messages(t)]
    in_time = make("leaves", 4)
    for m in msgs:
        expected = in_time.process(m)
    e = make("leaves", 4)
    for m in msgs[:-1]:
        e.process(m)
    pending = e.process_batches(msgs[-1])
    first = [r for batch in (next(pending), next(pending)) for r in batch]
    late = e.process(dumps(feature("s", "late", t["ids"], [float(i % 3) for i in range(50)])))
    assert any(r["type"] == "feedback" for r in late)
    got = first + [r for batch in pending for r in batch]

    def timeless(rs):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rs]

    assert timeless(got) == timeless(expected)


def test_runtime_files_are_the_bytes_of_the_records_whatever_the_chunk(tmp_path):
    src = tmp_path / "in.jsonl"
    msgs = [dumps(m) for m in CASES["multiclass"][0]()] + [b'{"v": 1, "type": "nonsense"}']
    src.write_bytes(b"".join(m + b"\n" for m in msgs))
    files = []
    for chunk in (3, CHUNK_SIZE):
        out = tmp_path / f"out{chunk}"
        run(str(src), str(out), engine=make("multiclass", chunk))
        files.append({name: (out / name).read_bytes() for name in OUTPUT_FILES.values() if name != "feedback.jsonl"})
    # The dict records of Engine.process, serialized one by one as the runtime did before batches.
    e = make("multiclass", CHUNK_SIZE)
    records = [r for i, m in enumerate(msgs) for r in e.process(m, f"{src}:{i + 1}")]
    expected = {name: b"".join(orjson.dumps(r) + b"\n" for r in records if r["type"] == kind)
                for kind, name in OUTPUT_FILES.items() if kind != "feedback"}
    assert files[0] == files[1] == expected
    assert expected["encodings.jsonl"] and expected["errors.jsonl"]


class Crash(Exception):
    pass


def test_a_crash_in_the_middle_of_a_republication_replays_the_message(tmp_path, monkeypatch):
    import streamforest.engine.runtime as runtime

    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(dumps(m) + b"\n" for m in toy_messages()))
    whole = tmp_path / "whole"
    run(str(src), str(whole), engine=make("leaves", 4), checkpoint_dir=str(tmp_path / "ck-whole"))

    out, ck = tmp_path / "out", str(tmp_path / "ck")
    write = runtime.DirectorySink.write
    seen = []

    def crashing(self, batch):
        seen.append(batch)
        if len(seen) == 30:  # inside the republication of a later feature
            assert isinstance(batch, RecordBatch)
            raise Crash
        write(self, batch)

    monkeypatch.setattr(runtime.DirectorySink, "write", crashing)
    with pytest.raises(Crash):
        run(str(src), str(out), engine=make("leaves", 4), checkpoint_dir=ck)
    monkeypatch.setattr(runtime.DirectorySink, "write", write)
    run(str(src), str(out), engine=make("leaves", 4), checkpoint_dir=ck)
    for name in OUTPUT_FILES.values():
        got, want = (out / name).read_bytes(), (whole / name).read_bytes()
        if name == "feedback.jsonl":
            got, want = ([untimed([orjson.loads(x)]) for x in b.splitlines()] for b in (got, want))
        assert got == want, name


def test_paths_encodings_come_in_batches_of_bounded_entries(monkeypatch):
    import streamforest.engine.core as core

    msgs = [dumps(m) for m in toy_messages()]
    plain = make("paths-weighted-all", CHUNK_SIZE)
    expected = [lines(plain.process(m)) for m in msgs]
    monkeypatch.setattr(core, "CHUNK_ENTRIES", 200)
    e = make("paths-weighted-all", CHUNK_SIZE)
    got, sizes = [], []
    for m in msgs:
        out = []
        for batch in e.process_batches(m):
            if isinstance(batch, RecordBatch) and batch.type == "encoding":
                sizes.append(len(batch))
                assert sum(len(r["indices"]) for r in batch) <= 200
            out += batch
        got.append(lines(out))
    assert got == expected
    assert sizes and max(sizes) < 50, "fewer samples per batch than the publish set"
