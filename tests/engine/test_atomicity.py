"""A refused message leaves the engine's state byte-identical (validate everything, then apply).

The state is compared as checkpoints serialize it (``checkpoint.stream_arrays``), before and after every refused
message, over many bad messages: malformed ones, ones wrong for the state they meet, ones the forest itself
refuses, and faults injected into the forest halfway through its own update.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamforest.forest import FeatureStreamForest

from .support import dumps, engine, feature, label, samples, snapshot, state_bytes
from .test_core import plausible_messages, prelude

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
IDS = [str(i) for i in range(16)]


def check_refusals(e, msgs) -> int:
    """Feed ``msgs``; every refused one must leave the state's bytes as they were. Returns the refusals."""
    refused = 0
    for k, m in enumerate(msgs):
        raw = m if isinstance(m, bytes) else dumps(m)
        before = state_bytes(e)
        out = e.process(raw, f"t:{k}")
        if any(r["type"] == "error" for r in out):
            assert len(out) == 1, out
            assert state_bytes(e) == before, f"refused ({out[0]['reason']}) but the state changed"
            refused += 1
    return refused


@FUZZ
@given(start=st.booleans(), msgs=st.lists(plausible_messages(), min_size=1, max_size=12),
       task=st.sampled_from(["classification", "regression"]))
def test_refused_messages_leave_the_serialized_state_byte_identical(start, msgs, task):
    """Labels drawn among numbers, strings, booleans and nulls: a regression stream meets text targets too."""
    check_refusals(engine(encoding="leaves", task=task), (prelude() if start else []) + msgs)


# Messages a regression stream must refuse, at every stage of its life (before and after its forest starts).
REGRESSION_BAD = [
    samples("r", [("0", "high"), ("1", "low")]),  # text targets
    samples("r", [("50", "x")]),  # a new sample with a text target
    samples("r", [("0", True)]),  # a boolean target
    label("r", "15", "high"),
    samples("r", [{"id": "3", "label": 1.5, "x": {"f0": "text"}}]),
]


@FUZZ
@given(order=st.permutations(range(6)), bad=st.lists(st.sampled_from(REGRESSION_BAD), min_size=1, max_size=4),
       at=st.integers(0, 6))
def test_a_regression_stream_refuses_non_numeric_targets_and_changes_nothing(order, bad, at):
    good = [samples("r", [(i, None) for i in IDS]), feature("r", "f0", IDS, [float(i) for i in range(16)]),
            samples("r", [(i, float(k) / 3) for k, i in enumerate(IDS[:5])]), label("r", "5", 2.5),
            samples("r", [(i, float(k)) for k, i in enumerate(IDS[6:14])]), label("r", "14", -1.0)]
    good = [good[0], *[good[k] for k in order if k]]  # the stream exists first, then any order
    e = engine(task="regression")
    msgs = good[:at] + bad + good[at:]
    assert check_refusals(e, msgs) == len(bad)  # the bad ones, and only them
    assert e.streams["r"].forest is not None


@pytest.mark.parametrize("where", ["_add_generation", "_clear_oob", "_bump_version"])
def test_a_forest_failing_halfway_through_its_update_changes_nothing(monkeypatch, where):
    """Faults injected into the forest after it started changing itself (a bug, memory): the message becomes an
    internal-error dead letter and the engine's state is exactly the one before it."""
    e = engine(encoding="leaves")
    for m in prelude():
        e.process(dumps(m))
    before = state_bytes(e)
    real = getattr(FeatureStreamForest, where)

    def broken(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise MemoryError("injected")

    monkeypatch.setattr(FeatureStreamForest, where, broken)
    msgs = [feature("s", "f1", IDS, [float(int(i) % 5) for i in IDS]), label("s", "12", 1),
            samples("s", [("new", 1), ("13", 0), ("other", None), ("14", 1)])]
    refused = 0
    for m in msgs:
        before, seen = state_bytes(e), snapshot(e)
        out = e.process(dumps(m))
        if any(r["type"] == "error" for r in out):
            assert len(out) == 1 and "internal error: MemoryError: injected" in out[0]["reason"]
            assert state_bytes(e) == before and snapshot(e) == seen  # ids, index, labels, training rows too
            refused += 1
    assert refused >= 1  # the fault was met
    monkeypatch.undo()
    # With the fault in the out-of-bag reset, which only add_samples makes, the feature got through.
    assert len(e.streams["s"].forest.generations_) == (2 if where == "_clear_oob" else 1)
