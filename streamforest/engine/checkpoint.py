"""Checkpoints: every stream's state as arrays + JSON (no pickle), with the input position and output sizes.

One routine, in Quix Streams' order: the runner flushes its outputs, then each changed stream is written to a new
file, then ``manifest.json`` (the only file read to restore) is replaced atomically, then stale files are removed.
A crash at any point leaves the previous manifest and every file it names intact.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from streamforest.engine.messages import FeatureMessage
from streamforest.engine.state import StreamState
from streamforest.forest import FeatureStreamForest
from streamforest.persistence import forest_arrays, read_npz, restore_forest, write_npz_atomic

MANIFEST = "manifest.json"
FORMAT = "streamforest.checkpoint"
VERSION = 1


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and np.isnan(v):
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


def stream_arrays(st: StreamState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    arrays: dict[str, np.ndarray] = {}
    columns = []
    for k, (name, col) in enumerate(st.columns.items()):
        if col.dtype.kind == "f":
            arrays[f"col{k}"] = col
            columns.append({"name": name, "kind": st.kinds[name], "stored": "array"})
        else:
            columns.append({"name": name, "kind": st.kinds[name], "stored": "json",
                            "values": [_json_value(v) for v in col.tolist()]})
    arrays["train_rows"] = np.asarray(st.train_rows, dtype=np.int64)
    header: dict[str, Any] = {
        "stream": st.name, "ids": st.ids, "labels": [_json_value(v) for v in st.labels], "columns": columns,
        "pending": {name: [{"part": p.part, "parts": p.parts, "kind": p.kind, "ids": list(p.ids),
                            "values": list(p.values)} for p in parts.values()]
                    for name, parts in st.pending.items()},
        "forest": None,
    }
    if st.forest is not None:
        f_arrays, f_header = forest_arrays(st.forest)
        arrays.update({f"forest/{k}": v for k, v in f_arrays.items()})
        header["forest"] = f_header
    return arrays, header


def restore_stream(arrays: dict[str, np.ndarray], header: dict[str, Any]) -> StreamState:
    st = StreamState(header["stream"])
    st.ids = list(header["ids"])
    st.index = {sid: i for i, sid in enumerate(st.ids)}
    st.labels = list(header["labels"])
    for k, c in enumerate(header["columns"]):
        if c["stored"] == "array":
            st.columns[c["name"]] = np.asarray(arrays[f"col{k}"], dtype=np.float64)
        else:
            st.columns[c["name"]] = np.array(c["values"], dtype=object)
        st.kinds[c["name"]] = c["kind"]
    st.pending = {
        name: {p["part"]: FeatureMessage(st.name, name, tuple(p["ids"]), tuple(p["values"]), p["kind"],
                                         p["part"], p["parts"]) for p in parts}
        for name, parts in header["pending"].items()
    }
    st.train_rows = [int(r) for r in arrays["train_rows"]]
    if header["forest"] is not None:
        f_arrays = {k.removeprefix("forest/"): v for k, v in arrays.items() if k.startswith("forest/")}
        st.forest = restore_forest(FeatureStreamForest, f_arrays, header["forest"])
    return st


def _stream_file(stream: str, seq: int) -> str:
    return f"stream-{hashlib.blake2b(stream.encode(), digest_size=10).hexdigest()}-{seq}.npz"


class Checkpointer:
    """Writes and reads the checkpoints of one engine in ``directory``."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.files: dict[str, str] = {}
        self.seq = 0

    def load(self) -> tuple[dict[str, StreamState], dict[str, Any]] | None:
        """The last checkpoint's streams and manifest, or ``None`` when there is none."""
        path = self.directory / MANIFEST
        if not path.exists():
            return None
        manifest = json.loads(path.read_text())
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise ValueError(f"{path}: not a streamforest checkpoint of version {VERSION}")
        streams = {}
        for name, fname in manifest["streams"].items():
            arrays, header = read_npz(self.directory / fname)
            streams[name] = restore_stream(arrays, header)
        self.files = dict(manifest["streams"])
        self.seq = int(manifest["seq"])
        return streams, manifest

    def save(self, streams: dict[str, StreamState], dirty: set[str], position: dict[str, Any],
             outputs: dict[str, int], config: dict[str, Any]) -> None:
        """Write the changed streams, then the manifest that makes them current, then drop stale files."""
        self.seq += 1
        stale = []
        for name in sorted(dirty):
            if name in self.files:
                stale.append(self.files.pop(name))
            if name not in streams:
                continue
            fname = _stream_file(name, self.seq)
            arrays, header = stream_arrays(streams[name])
            write_npz_atomic(self.directory / fname, arrays, header)
            self.files[name] = fname
        manifest = {"format": FORMAT, "version": VERSION, "seq": self.seq, "position": position,
                    "outputs": outputs, "streams": self.files, "config": config}
        tmp = self.directory / f".{MANIFEST}.tmp"
        with open(tmp, "w") as fh:
            json.dump(manifest, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.directory / MANIFEST)
        for fname in stale:
            (self.directory / fname).unlink(missing_ok=True)
