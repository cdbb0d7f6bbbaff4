"""Record batches: the dicts of today's record builders, and their JSON lines written in bulk byte for byte."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

from streamforest.engine import records
from streamforest.engine.records import RecordBatch

IDS = ["0", "a/b", 'q"uote', "back\\slash", "tab\t", "ünï", "😀", "\u2028", "x" * 300, ""]


def jsonl(recs: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in recs)


def check(batch: RecordBatch, reference: list[dict]) -> None:
    """The batch's dicts are the reference builder's, and its lines are orjson's bytes of them."""
    blob, ends = batch.lines()
    assert jsonl(list(batch)) == jsonl(reference)
    assert blob == jsonl(reference)
    assert ends[0] == 0 and ends[-1] == len(blob)
    for k, r in enumerate(batch):
        assert blob[ends[k]:ends[k + 1]] == orjson.dumps(r) + b"\n"
    assert batch.keys() == [r["key"] for r in batch]
    assert batch.json_values() == [orjson.dumps(r) for r in reference]


@pytest.mark.parametrize("classes", [np.array([0, 1]), np.array(["no", "yes", 'm"aybe']), np.array([True, False]),
                                     np.array([1.5, -2.0, 3.25, 7.0])])
def test_prediction_lines_are_orjsons_bytes(classes):
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(classes.size), size=len(IDS))
    proba[0] = 0.0
    proba[1, 0] = np.nan
    proba[2, 0] = 1e-300
    proba[3, 0] = -0.0
    batch = RecordBatch.of_predictions("str\u00e9am/1", IDS, 7, classes, proba)
    check(batch, records.predictions("str\u00e9am/1", IDS, 7, classes, proba))


def test_value_lines_are_orjsons_bytes():
    predicted = np.array([0.1, -3.0, 1e20, 1e-7, np.inf, 2.5, 0.0, -0.0, 123456789.125, np.nan])
    batch = RecordBatch.of_values("s", IDS, 0, predicted)
    check(batch, records.values("s", IDS, 0, predicted))


@pytest.mark.parametrize("weighted", [False, True])
def test_encoding_lines_are_orjsons_bytes(weighted):
    rng = np.random.default_rng(1)
    dense = (rng.random((len(IDS), 50)) < 0.3).astype(np.float32)
    dense[4] = 0.0  # an empty row
    if weighted:
        dense *= rng.choice(np.array([0.1, 0.37, 2.0, 1e-9], dtype=np.float32), size=dense.shape)
    E = sp.csr_matrix(dense)
    E.resize(len(IDS), 2**31 - 1)
    batch = RecordBatch.of_encodings("s", IDS, 2**40, E)
    check(batch, records.encodings("s", IDS, 2**40, E))


def test_an_empty_batch_has_no_lines():
    batch = RecordBatch.of_encodings("s", [], 1, sp.csr_matrix((0, 8), dtype=np.float32))
    assert len(batch) == 0 and batch.jsonl() == b"" and list(batch) == []


@pytest.mark.parametrize("ids", [["1", "22", "abc", ""], ["1", 'a"b'], ["a\x01", "b"], ["a\\", "b"], ["é", "b"]])
def test_ids_are_escaped_as_orjson_does_in_one_piece_or_one_by_one(ids):
    proba = np.full((len(ids), 2), 0.5)
    batch = RecordBatch.of_predictions("s", ids, 1, np.array([0, 1]), proba)
    check(batch, records.predictions("s", ids, 1, np.array([0, 1]), proba))
