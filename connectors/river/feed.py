"""The engine's ``encoding`` records, joined with labels, as ``(x, y)`` pairs for any River model.

The engine (:mod:`streamforest.engine`) republishes the hashed encoding of every scored sample after each model
change: one ``encoding`` record per sample and model version (``docs/messages.md``), in the embedded runtime's
``encodings.jsonl`` or on a compacted Kafka topic keyed by ``stream/id``. A River model downstream learns from
those encodings once the samples' labels are known::

    from river import linear_model
    model = linear_model.LogisticRegression()
    for x, y in iter_encodings(read_records("out/"), labels):
        model.learn_one(x, y)

``x`` is ``{column: value}`` (the hashed node columns of the record), ``y`` the sample's label.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from streamforest.engine.runtime import OUTPUT_FILES

#: Where the embedded runtime writes encodings in its output directory.
ENCODINGS_FILE = OUTPUT_FILES["encoding"]


def read_records(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """The records of a JSONL file, or of the ``encodings.jsonl`` of an output directory, in file order."""
    path = Path(path)
    if path.is_dir():
        path = path / ENCODINGS_FILE
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                yield orjson.loads(line)


def labels_from_messages(messages: Iterable[Mapping[str, Any] | bytes | str]) -> dict[str, Any]:
    """Labels given by engine input messages (``samples`` and ``label``), keyed by ``stream/id``; the last wins.

    Examples
    --------
    >>> labels_from_messages([
    ...     {"v": 1, "type": "samples", "stream": "s", "samples": [{"id": "a", "label": 1}, {"id": 7}]},
    ...     '{"v": 1, "type": "label", "stream": "s", "id": 7, "label": 0}',
    ... ])
    {'s/a': 1, 's/7': 0}
    """
    out: dict[str, Any] = {}
    for m in messages:
        if isinstance(m, (bytes, str)):
            m = orjson.loads(m)
        if m.get("type") == "samples":
            for s in m.get("samples", []):
                if s.get("label") is not None:
                    out[f"{m['stream']}/{s['id']}"] = s["label"]
        elif m.get("type") == "label" and m.get("label") is not None:
            out[f"{m['stream']}/{m['id']}"] = m["label"]
    return out


def _label(labels: Mapping[Hashable, Any], record: Mapping[str, Any]) -> tuple[bool, Any]:
    for k in (record["key"], record["id"]):
        if k in labels:
            return True, labels[k]
    return False, None


def iter_encodings(
    records: Iterable[Mapping[str, Any] | bytes | str],
    labels: Mapping[Hashable, Any],
    latest: bool = True,
    stream: str | None = None,
    unlabelled: str = "skip",
) -> Iterator[tuple[dict[int, float], Any]]:
    """``(x, y)`` pairs from ``encoding`` records and the samples' labels.

    Parameters
    ----------
    records
        Engine output records (dicts, or JSON lines as bytes or str); records of other types are ignored.
    labels
        Sample labels keyed by the record key (``"stream/id"``) or by the sample id alone.
    latest
        ``True``: one pair per sample, from its latest encoding (the highest model version, as a compacted topic
        keeps it), in the order of those records; this reads every record first. ``False``: one pair per record,
        as the records come (a model downstream that keeps learning as the engine republishes).
    stream
        Only records of this stream.
    unlabelled
        What to do with a record whose sample has no label: ``"skip"`` it or ``"raise"`` ``KeyError``.

    Examples
    --------
    >>> recs = [
    ...     {"v": 1, "type": "encoding", "key": "s/a", "stream": "s", "id": "a", "model_version": 1, "dim": 8,
    ...      "indices": [1, 5], "values": [1.0, 1.0]},
    ...     {"v": 1, "type": "encoding", "key": "s/a", "stream": "s", "id": "a", "model_version": 2, "dim": 8,
    ...      "indices": [2, 5], "values": [1.0, 2.0]},
    ...     {"v": 1, "type": "encoding", "key": "s/b", "stream": "s", "id": "b", "model_version": 2, "dim": 8,
    ...      "indices": [0], "values": [1.0]},
    ... ]
    >>> list(iter_encodings(recs, {"a": True}))
    [({2: 1.0, 5: 2.0}, True)]
    >>> len(list(iter_encodings(recs, {"s/a": True, "s/b": False}, latest=False)))
    3
    """
    if unlabelled not in ("skip", "raise"):
        raise ValueError(f"unlabelled must be 'skip' or 'raise', got {unlabelled!r}")

    def encodings() -> Iterator[Mapping[str, Any]]:
        for r in records:
            if isinstance(r, (bytes, str)):
                r = orjson.loads(r)
            if r.get("type") == "encoding" and (stream is None or r.get("stream") == stream):
                yield r

    chosen: Iterable[Mapping[str, Any]] = encodings()
    if latest:
        newest: dict[str, Mapping[str, Any]] = {}
        for r in chosen:
            old = newest.get(r["key"])
            if old is None or r["model_version"] >= old["model_version"]:
                newest.pop(r["key"], None)  # re-inserted: the order is that of the latest records
                newest[r["key"]] = r
        chosen = newest.values()
    for r in chosen:
        found, y = _label(labels, r)
        if not found:
            if unlabelled == "raise":
                raise KeyError(f"no label for sample {r['key']!r}")
            continue
        yield dict(zip(r["indices"], (float(v) for v in r["values"]), strict=True)), y
