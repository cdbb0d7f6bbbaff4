"""Output records, version 1: ``prediction``, ``encoding``, ``feedback`` and ``error`` (dead letters).

Records are plain dicts ready for JSON; each carries ``"v": 1``, its ``type`` and a ``key`` (the Kafka message key:
the stream for feedback, ``stream/sample`` for per-sample records, so that a compacted topic keeps the latest).
"""

from __future__ import annotations

import base64
import gc
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import scipy.sparse as sp

from streamforest.forest import FeatureReport

VERSION = 1


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while records are built: they hold no cycles, and the collector
    would otherwise walk every list built so far, again and again (it tripled the cost of 30k encoding records)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def raw_text(raw: bytes | str) -> str:
    """The original message for a dead letter: its text when it is UTF-8, base64 otherwise."""
    if isinstance(raw, str):
        # A str may hold lone surrogates that no JSON encoder accepts: keep their bytes instead.
        raw = raw.encode("utf-8", "surrogatepass")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(raw).decode("ascii")


def error(raw: bytes | str, source: str, reason: str, stream: str = "") -> dict[str, Any]:
    """A dead letter: the original message, where it came from, why it was refused (keyed by its stream)."""
    return {"v": VERSION, "type": "error", "key": stream, "source": source, "reason": reason,
            "original": raw_text(raw)}


def feedback(stream: str, report: FeatureReport, model_version: int) -> dict[str, Any]:
    return {
        "v": VERSION, "type": "feedback", "key": stream, "stream": stream, "feature": report.feature,
        "model_version": model_version, "generation": report.generation, "weight_share": report.weight_share,
        "log_weight": report.log_weight, "n_trees": report.n_trees, "importance": report.importance,
        "oob_metric": report.oob_metric, "oob_before": _finite(report.oob_before),
        "oob_after": _finite(report.oob_after), "pruned": report.pruned, "merged": report.merged,
        "seconds": report.seconds,
    }


def predictions(stream: str, ids: list[str], model_version: int, classes: np.ndarray,
                proba: np.ndarray) -> list[dict[str, Any]]:
    names = [str(c) for c in classes.tolist()]
    rows = proba.tolist()
    with _collector_paused():
        return [
            {"v": VERSION, "type": "prediction", "key": f"{stream}/{sid}", "stream": stream, "id": sid,
             "model_version": model_version, "proba": dict(zip(names, row, strict=True))}
            for sid, row in zip(ids, rows, strict=True)
        ]


def values(stream: str, ids: list[str], model_version: int, predicted: np.ndarray) -> list[dict[str, Any]]:
    with _collector_paused():
        return [
            {"v": VERSION, "type": "prediction", "key": f"{stream}/{sid}", "stream": stream, "id": sid,
             "model_version": model_version, "value": v}
            for sid, v in zip(ids, predicted.tolist(), strict=True)
        ]


def encodings(stream: str, ids: list[str], model_version: int, E: sp.csr_matrix) -> list[dict[str, Any]]:
    indptr = E.indptr.tolist()
    indices = E.indices.tolist()
    # Binary encodings are mostly ones: one shared float then, instead of a Python float per entry.
    unit = bool((E.data == 1).all())
    data = None if unit else E.data.tolist()
    one = [1.0]
    with _collector_paused():
        return [
            {"v": VERSION, "type": "encoding", "key": f"{stream}/{sid}", "stream": stream, "id": sid,
             "model_version": model_version, "dim": E.shape[1], "indices": indices[indptr[k]:indptr[k + 1]],
             "values": one * (indptr[k + 1] - indptr[k]) if unit else data[indptr[k]:indptr[k + 1]]}
            for k, sid in enumerate(ids)
        ]
