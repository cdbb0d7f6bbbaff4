"""Helpers of the engine tests: message builders, a small task, a comparable snapshot of an engine's state.

The engine is tested the Bytewax way: no broker, no mocks; raw message bytes go into :meth:`Engine.process` (or
through the embedded runtime) and the records that come out are checked.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from streamforest.engine.core import Engine, EngineConfig
from streamforest.engine.metrics import EngineMetrics

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "streamforest" / "data"
MAGIC = DATA / "MagicTelescope_1120.csv"
DIABETES = DATA / "diabetes_37.csv"
CLI = [sys.executable, "-m", "streamforest.cli"]

#: A forest small enough that a handful of messages cost milliseconds.
TINY = {"trees_per_generation": 3, "max_depth": 4, "random_state": 0}


def engine(publish: str = "unlabelled", encoding: str = "none", metrics: EngineMetrics | None = None,
           n_components: int = 2**10, **forest: Any) -> Engine:
    return Engine(EngineConfig(forest={**TINY, **forest}, publish=publish, encoding=encoding,
                               n_components=n_components), metrics)


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def samples(stream: str, rows: list[tuple[Any, Any]] | list[dict[str, Any]]) -> dict[str, Any]:
    """A ``samples`` message; rows are ``(id, label)`` pairs or ready sample objects."""
    out = [r if isinstance(r, dict) else {"id": r[0], "label": r[1]} for r in rows]
    return {"v": 1, "type": "samples", "stream": stream, "samples": out}


def feature(stream: str, name: str, ids: list[str], values: list[Any], kind: str | None = None,
            part: int | None = None, parts: int | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"v": 1, "type": "feature", "stream": stream, "name": name, "ids": list(ids),
                           "values": list(values)}
    if kind is not None:
        msg["kind"] = kind
    if parts is not None:
        msg.update(part=part, parts=parts)
    return msg


def label(stream: str, sid: str, lab: Any) -> dict[str, Any]:
    return {"v": 1, "type": "label", "stream": stream, "id": sid, "label": lab}


def control(stream: str, op: str) -> dict[str, Any]:
    return {"v": 1, "type": "control", "stream": stream, "op": op}


def task(n: int = 60, n_test: int = 15, seed: int = 0) -> dict[str, Any]:
    """A small binary task: ids "0".."n-1", the last ``n_test`` unlabelled, two informative numeric columns,
    a noise column and a nominal one (with missing values)."""
    rng = np.random.default_rng(seed)
    a, b, noise = rng.normal(size=(3, n))
    cat = rng.choice(["red", "green", "blue"], n).astype(object)
    y = ((a + 0.7 * b + 0.5 * (cat == "red")) > 0.2).astype(int)
    cat[rng.uniform(size=n) < 0.1] = None
    ids = [str(i) for i in range(n)]
    labels = [int(y[i]) if i < n - n_test else None for i in range(n)]
    b = [None if i % 11 == 3 else round(float(v), 4) for i, v in enumerate(b)]
    return {
        "ids": ids, "y": y.tolist(), "labels": labels,
        "columns": {"a": [round(float(v), 4) for v in a], "b": b, "noise": [round(float(v), 4) for v in noise],
                    "cat": cat.tolist()},
        "kinds": {"a": "numeric", "b": "numeric", "noise": "numeric", "cat": "nominal"},
    }


def task_messages(t: dict[str, Any], stream: str = "s") -> list[dict[str, Any]]:
    """The task as messages: one ``samples`` message, then one ``feature`` message per column."""
    msgs = [samples(stream, list(zip(t["ids"], t["labels"], strict=True)))]
    msgs += [feature(stream, name, t["ids"], col, t["kinds"][name]) for name, col in t["columns"].items()]
    return msgs


def feed(e: Engine, msgs: list[Any], source: str = "") -> list[dict[str, Any]]:
    """Process messages (dicts are serialized, bytes and str pass as they are); all records in order."""
    out: list[dict[str, Any]] = []
    for m in msgs:
        out += e.process(m if isinstance(m, (bytes, str)) else dumps(m), source)
    return out


def of_type(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == kind]


def untimed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records without the wall-clock ``seconds`` of feedback (the only field that may differ between runs)."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def _cell(v: Any) -> Any:
    if isinstance(v, float) and np.isnan(v):
        return "NaN"
    if isinstance(v, np.generic):
        return v.item()
    return v


def snapshot(e: Engine) -> dict[str, Any]:
    """Everything observable about an engine's streams, as plain comparable values.

    The forest is compared by its version, generations and the probabilities it gives every known sample.
    """
    out: dict[str, Any] = {}
    for name in sorted(e.streams):
        st = e.streams[name]
        snap: dict[str, Any] = {
            "ids": list(st.ids),
            "index": dict(st.index),
            "labels": [_cell(v) for v in st.labels],
            "columns": [(k, str(c.dtype), [_cell(v) for v in c.tolist()]) for k, c in st.columns.items()],
            "kinds": dict(st.kinds),
            "pending": {k: sorted((p.part, p.parts, p.kind, p.ids, p.values, p.paired_null) for p in parts.values())
                        for k, parts in sorted(st.pending.items())},
            "train_rows": list(st.train_rows),
            "forest": None,
        }
        f = st.forest
        if f is not None:
            rows = np.arange(st.n_samples)
            X = st.rows_matrix(rows)
            snap["forest"] = {
                "version": f.model_version_, "n_samples": f.n_samples_, "features": list(f.feature_names_in_),
                "generations": [(g["id"], g["forced"], g["log_weight"], g["n_trees"]) for g in f.generations_],
                "proba": f.predict_proba(X).tolist() if f.task != "regression" else f.predict(X).tolist(),
                "classes": None if f.classes_ is None else f.classes_.tolist(),
            }
        out[name] = snap
    return out


def state_bytes(e: Engine) -> bytes:
    """The engine's streams serialized as checkpoints write them (:func:`stream_arrays`): equal bytes, equal state."""
    import json

    from streamforest.engine.checkpoint import stream_arrays

    out = []
    for name in sorted(e.streams):
        arrays, header = stream_arrays(e.streams[name])
        out.append(json.dumps(header, sort_keys=True).encode())
        for k in sorted(arrays):
            a = np.ascontiguousarray(arrays[k])
            out += [k.encode(), str(a.dtype).encode(), repr(a.shape).encode(), a.tobytes()]
    return b"\0".join(out)
