"""Checkpoints: every stream's state as arrays + JSON (no pickle); restoring gives the same state and the same future.

The SIGKILL-and-restart test of the embedded runtime is in ``test_runtime.py``; ``streamforest inspect`` is tested
in ``tests/test_cli.py``.
"""

from __future__ import annotations

import copy
import json
import zipfile

import numpy as np
import pytest

from streamforest.engine.checkpoint import MANIFEST, PREVIOUS, Checkpointer, restore_stream, stream_arrays

from .support import control, engine, feature, feed, label, samples, snapshot, task, task_messages, untimed

POSITION = {"source": "input.jsonl", "offset": 123, "line": 4}


@pytest.fixture(scope="module")
def _busy():
    return _build_busy_engine()


@pytest.fixture
def busy(_busy):
    """A fresh copy of the busy engine (tests change it)."""
    built, t = _busy
    e = engine(encoding="leaves")
    e.streams = copy.deepcopy(built.streams)
    e.dirty = set(built.dirty)
    return e, t


def _build_busy_engine():
    """A stream with a forest, numeric and nominal columns with missing values, a delayed label, features waiting
    for their parts (one of them asking for its paired null), a stream without a forest yet, and string labels."""
    t = task()
    e = engine(encoding="leaves")
    msgs = task_messages(t)
    col = msgs[2]
    rest = [
        label("s", t["ids"][-1], 1),
        feature("s", "late", t["ids"][:25], [f"v{k % 4}" for k in range(25)], "nominal", 2, 3),
        feature("s", "late", t["ids"][25:50], [f"v{k % 3}" for k in range(25)], "nominal", 0, 3),
        {**feature("s", "twin", t["ids"][:20], list(range(20)), "numeric", 1, 2), "paired_null": True},
        samples("quiet", [("a", "yes"), ("b", None)]),
        samples("strings", [(i, "yes" if lab else "no") for i, lab in zip(t["ids"], t["y"], strict=True)]),
        feature("strings", "b", col["ids"], col["values"]),
    ]
    feed(e, msgs + rest)
    return e, t


def save(e, directory, position=POSITION, outputs=None) -> Checkpointer:
    c = Checkpointer(directory)
    c.save(e.streams, set(e.dirty), position, outputs or {"feedback.jsonl": 10}, e.config.to_json())
    e.dirty.clear()
    return c


def test_stream_state_round_trips_through_arrays_and_json(busy):
    e, _ = busy
    for name, st in e.streams.items():
        arrays, header = stream_arrays(st)
        assert all(a.dtype != object for a in arrays.values()), name
        json.dumps(header, allow_nan=False)  # plain JSON
        restored = engine(encoding="leaves")
        restored.streams = {name: restore_stream(arrays, header)}
        single = engine(encoding="leaves")
        single.streams = {name: st}
        assert snapshot(restored) == snapshot(single)


def test_restored_engine_has_the_same_state(busy, tmp_path):
    e, _ = busy
    save(e, tmp_path)
    streams, manifest = Checkpointer(tmp_path).load()
    restored = engine(encoding="leaves")
    restored.streams = streams
    assert snapshot(restored) == snapshot(e)
    assert manifest["position"] == POSITION and manifest["outputs"] == {"feedback.jsonl": 10}
    assert manifest["config"] == e.config.to_json()
    assert sorted(manifest["streams"]) == ["quiet", "s", "strings"]


def test_restored_engine_continues_exactly_like_the_original(busy, tmp_path):
    e, t = busy
    save(e, tmp_path)
    restored = engine(encoding="leaves")
    restored.streams = Checkpointer(tmp_path).load()[0]
    more = [
        feature("s", "late", t["ids"][50:], ["v0"] * 10, "nominal", 1, 3),  # completes the waiting feature
        label("s", t["ids"][-2], 0),
        samples("s", [("new", None)]),
        control("s", "snapshot"),
        samples("quiet", [("b", "no")]),
        feature("quiet", "z", ["a", "b"], [1.0, 2.0]),
        feature("strings", "a", t["ids"], t["columns"]["a"]),
        feature("s", "b", t["ids"], t["columns"]["b"]),  # a replay
    ]
    expected, got = feed(e, more), feed(restored, more)
    assert [r["type"] for r in got].count("feedback") == 3
    assert untimed(got) == untimed(expected)
    assert snapshot(restored) == snapshot(e)


def test_only_changed_streams_are_rewritten_and_stale_files_removed(busy, tmp_path):
    e, t = busy
    c = save(e, tmp_path)
    first = json.loads((tmp_path / MANIFEST).read_text())["streams"]
    feed(e, [label("s", t["ids"][-3], 0)])
    assert e.dirty == {"s"}
    c.save(e.streams, set(e.dirty), POSITION, {}, e.config.to_json())
    second = json.loads((tmp_path / MANIFEST).read_text())
    assert second["seq"] == 2
    assert second["streams"]["quiet"] == first["quiet"] and second["streams"]["s"] != first["s"]
    on_disk = sorted(p.name for p in tmp_path.iterdir())
    # Two generations: the previous manifest and its files stay (a corrupt newest one falls back to them).
    assert on_disk == sorted({MANIFEST, PREVIOUS, *second["streams"].values(), *first.values()})
    feed(e, [label("s", t["ids"][-4], 0)])
    c.save(e.streams, set(e.dirty), POSITION, {}, e.config.to_json())
    third = json.loads((tmp_path / MANIFEST).read_text())
    on_disk = sorted(p.name for p in tmp_path.iterdir())
    assert on_disk == sorted({MANIFEST, PREVIOUS, *third["streams"].values(), *second["streams"].values()})


def test_a_dropped_stream_leaves_the_checkpoint(busy, tmp_path):
    e, _ = busy
    c = save(e, tmp_path)
    feed(e, [control("quiet", "drop")])
    c.save(e.streams, set(e.dirty), POSITION, {}, e.config.to_json())
    streams, manifest = Checkpointer(tmp_path).load()
    assert sorted(streams) == sorted(manifest["streams"]) == ["s", "strings"]
    c.save(e.streams, set(), POSITION, {}, e.config.to_json())  # one generation later its file is gone
    assert len(list(tmp_path.glob("*.npz"))) == 2


def test_checkpoint_files_hold_no_pickles(busy, tmp_path):
    e, _ = busy
    save(e, tmp_path)
    for path in tmp_path.glob("*.npz"):
        with np.load(path, allow_pickle=False) as z:
            for k in z.files:
                assert z[k].dtype != object
        with zipfile.ZipFile(path) as z:
            assert all(n.endswith(".npy") for n in z.namelist())


def test_a_new_checkpointer_continues_the_sequence(busy, tmp_path):
    e, t = busy
    save(e, tmp_path)
    c = Checkpointer(tmp_path)
    streams, _ = c.load()
    restored = engine(encoding="leaves")
    restored.streams = streams
    feed(restored, [label("s", t["ids"][-4], 1)])
    c.save(restored.streams, set(restored.dirty), POSITION, {}, restored.config.to_json())
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    previous = json.loads((tmp_path / PREVIOUS).read_text())
    assert manifest["seq"] == 2 and previous["seq"] == 1
    assert sorted(p.name for p in tmp_path.glob("*.npz")) == sorted({*manifest["streams"].values(),
                                                                     *previous["streams"].values()})
    again = engine(encoding="leaves")
    again.streams = Checkpointer(tmp_path).load()[0]
    assert snapshot(again) == snapshot(restored)


def test_load_of_an_empty_directory_is_none_and_of_a_foreign_manifest_an_error(tmp_path):
    assert Checkpointer(tmp_path / "new").load() is None
    (tmp_path / MANIFEST).write_text(json.dumps({"format": "something else", "version": 1}))
    with pytest.raises(ValueError, match="not a streamforest checkpoint"):
        Checkpointer(tmp_path).load()
