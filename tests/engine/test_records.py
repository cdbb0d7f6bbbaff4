"""The record serializer (``records.json_lines``), the one every sink uses: for every record kind its lines are
``orjson.dumps`` of the record's dict form byte for byte, and parse to what ``json.dumps`` of the dict parses to."""

from __future__ import annotations

import json
import math

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

from streamforest.engine import records, render
from streamforest.engine.records import RecordBatch
from streamforest.forest import FeatureReport

IDS = ["0", "a/b", 'q"uote', "back\\slash", "tab\t", "ünï", "😀", "\u2028", "x" * 300, ""]
STREAMS = ["s", "str\u00e9am/1", "流れ", 'q"\\\n']


@pytest.fixture(autouse=True, params=["serial", "blocks"])
def lines_in_blocks(request, monkeypatch):
    """Every test twice: the lines written on one thread, and in parallel blocks of a line or two each (the bytes
    must not depend on how the lines were split)."""
    if request.param == "blocks":
        monkeypatch.setattr(render, "PARALLEL_FROM", 0)


def as_json(value):
    """What ``json.loads(json.dumps(value))`` gives with JSON's own rule for non-finite numbers (``null``, as the
    protocol writes them; ``json.dumps`` alone would write ``NaN``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    return json.loads(json.dumps(value))


def check(batch, reference: list[dict]) -> None:
    """``json_lines(batch)`` is orjson's bytes of the reference dicts, one line each, and parses as ``json`` reads
    ``json.dumps`` of them; a batch's own dicts are the reference's."""
    blob, ends = records.json_lines(batch)
    assert blob == b"".join(orjson.dumps(r) + b"\n" for r in reference)
    assert ends.tolist() == [0, *np.cumsum([len(orjson.dumps(r)) + 1 for r in reference]).tolist()]
    lines = records.json_lines(batch)
    assert lines.values() == [orjson.dumps(r) for r in reference]
    assert lines.lines() == [orjson.dumps(r) + b"\n" for r in reference]
    for value, r in zip(lines.values(), reference, strict=True):
        assert json.loads(value) == as_json(r)
    assert [orjson.dumps(r) for r in batch] == [orjson.dumps(r) for r in reference]
    if isinstance(batch, RecordBatch):
        assert batch.keys() == [r["key"] for r in reference]
        assert batch.jsonl() == blob


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("classes", [np.array([0, 1]), np.array(["no", "yes", 'm"aybe']), np.array([True, False]),
                                     np.array([1.5, -2.0, 3.25, 7.0]), np.array([2**62, -(2**62)])])
def test_prediction_lines(classes, stream):
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(classes.size), size=len(IDS))
    proba[0] = 0.0
    proba[1, 0] = np.nan
    proba[2, 0] = 1e-300
    proba[3, 0] = -0.0
    proba[4, 0] = np.inf
    batch = RecordBatch.of_predictions(stream, IDS, 7, classes, proba)
    check(batch, records.predictions(stream, IDS, 7, classes, proba))


@pytest.mark.parametrize("stream", STREAMS)
def test_value_lines(stream):
    predicted = np.array([0.1, -3.0, 1e20, 1e-7, np.inf, 2.5, 0.0, -0.0, 123456789.125, np.nan])
    batch = RecordBatch.of_values(stream, IDS, 2**53 + 1, predicted)
    check(batch, records.values(stream, IDS, 2**53 + 1, predicted))


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("weighted", [False, True])
def test_encoding_lines(weighted, stream):
    rng = np.random.default_rng(1)
    dense = (rng.random((len(IDS), 50)) < 0.3).astype(np.float32)
    dense[4] = 0.0  # an empty encoding
    if weighted:
        dense *= rng.choice(np.array([0.1, 0.37, 2.0, 1e-9], dtype=np.float32), size=dense.shape)
    E = sp.csr_matrix(dense)
    E.resize(len(IDS), 2**31 - 1)
    E.indices[E.indptr[5]:E.indptr[6]] += 2**31 - 60  # indices near the largest width
    batch = RecordBatch.of_encodings(stream, IDS, 2**40, E)
    check(batch, records.encodings(stream, IDS, 2**40, E))


def test_encoding_lines_of_only_empty_encodings():
    E = sp.csr_matrix((3, 8), dtype=np.float32)
    batch = RecordBatch.of_encodings("s", ["a", "b", "c"], 1, E)
    check(batch, records.encodings("s", ["a", "b", "c"], 1, E))
    assert all(r["indices"] == [] and r["values"] == [] for r in batch)


def test_an_empty_batch_has_no_lines():
    batch = RecordBatch.of_encodings("s", [], 1, sp.csr_matrix((0, 8), dtype=np.float32))
    assert len(batch) == 0 and records.json_lines(batch).blob == b"" and list(batch) == []
    assert records.json_lines([]).ends.tolist() == [0]


@pytest.mark.parametrize("ids", [["1", "22", "abc", ""], ["1", 'a"b'], ["a\x01", "b"], ["a\\", "b"], ["é", "b"]])
def test_ids_are_escaped_as_orjson_does_in_one_piece_or_one_by_one(ids):
    proba = np.full((len(ids), 2), 0.5)
    batch = RecordBatch.of_predictions("s", ids, 1, np.array([0, 1]), proba)
    check(batch, records.predictions("s", ids, 1, np.array([0, 1]), proba))


@pytest.mark.parametrize("stream", STREAMS)
def test_feedback_and_error_lines(stream):
    report = FeatureReport(feature="f\u00e9\"1", generation=2**40, log_weight=-1e300, weight_share=float("nan"),
                           n_trees=50, pruned=[1, 2], merged=[], importance=0.25, oob_metric="auc",
                           oob_before=float("nan"), oob_after=float("inf"), seconds=0.125)
    batch = [records.feedback(stream, report, 2**62),
             records.waiting(stream, ["a", "流"], "no labels yet"),
             records.error(b"\xff\xfe not utf-8", "in.jsonl:3", "not valid JSON", stream),
             records.error("lone \ud800 surrogate", "in.jsonl:4", "bad", stream),
             records.error(b"x" * (records.MAX_ORIGINAL_BYTES + 10), "t:0:1", "too long")]
    check(batch, batch)
    assert json.loads(records.json_lines(batch).values()[0])["weight_share"] is None
