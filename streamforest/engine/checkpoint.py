"""Checkpoints: every stream's state as arrays + JSON (no pickle), with the input position and output sizes.

One routine, in Quix Streams' order: the runner flushes its outputs, then each changed stream is written to a new
file, then the manifest (the only file read to restore) is replaced atomically (temporary file, fsync, rename,
fsync of the directory), then files no kept manifest names are removed.

Two generations are kept: ``manifest.json`` and the one before it, ``manifest.prev.json``, with every stream file
either names. :meth:`Checkpointer.load` restores the newest generation that reads whole; when the newest is
corrupt or truncated (a disk fault, a copy cut short) it says so in :attr:`Checkpointer.warnings` and falls back to
the previous one, whose position is earlier: the runner replays the input from there. Nothing read back is a
pickle, and no reading error escapes as anything but a :class:`CheckpointError` naming the file and the cause.
Damage is detected, not guessed at: a manifest carries the sha256 of its own content, and stream files are zip
members whose CRC-32 numpy checks on reading.

The manifest also records what the runner asks it to (the engine configuration, the input's identity, the output
sizes); the runner refuses to resume when they differ from the restarted run's (see ``runtime.py``).
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
PREVIOUS = "manifest.prev.json"
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
                            "values": list(p.values), **({"paired_null": True} if p.paired_null else {})}
                           for p in parts.values()]
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
                                         p["part"], p["parts"], p.get("paired_null", False)) for p in parts}
        for name, parts in header["pending"].items()
    }
    st.train_rows = [int(r) for r in arrays["train_rows"]]
    if header["forest"] is not None:
        f_arrays = {k.removeprefix("forest/"): v for k, v in arrays.items() if k.startswith("forest/")}
        st.forest = restore_forest(FeatureStreamForest, f_arrays, header["forest"])
        st.forest.encoder.without_deltas()  # as the engine grows them (Engine: no deltas, no dead generations)
    return st


def _stream_file(stream: str, seq: int) -> str:
    return f"stream-{hashlib.blake2b(stream.encode(), digest_size=10).hexdigest()}-{seq}.npz"


class CheckpointError(ValueError):
    """No checkpoint generation could be read; ``str(exc)`` says which files and why."""


class Checkpointer:
    """Writes and reads the checkpoints of one engine in ``directory`` (two generations, see the module)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.files: dict[str, str] = {}
        self.seq = 0
        #: What :meth:`load` had to skip (a corrupt newest generation), for the runner to report.
        self.warnings: list[str] = []
        self._current_good = True  # manifest.json is the generation in use (not a corrupt one we fell back from)
        self._previous_files: set[str] = set()

    def _read(self, name: str) -> tuple[dict[str, StreamState], dict[str, Any]]:
        path = self.directory / name
        try:
            manifest = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise CheckpointError(f"{path}: not a streamforest checkpoint of version {VERSION}")
        if "sha256" in manifest and manifest.pop("sha256") != _digest(manifest):
            raise CheckpointError(f"{path}: corrupt (its checksum does not match its content)")
        streams = {}
        try:
            for stream, fname in manifest["streams"].items():
                try:
                    arrays, header = read_npz(self.directory / fname)
                    streams[stream] = restore_stream(arrays, header)
                except Exception as exc:  # a corrupt file may fail anywhere in numpy, zipfile or the restore
                    raise CheckpointError(f"{self.directory / fname} (stream {stream!r}, named by {name}) is "
                                          f"corrupt or truncated ({type(exc).__name__})") from None
            int(manifest["seq"]), manifest["position"], manifest["outputs"]
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{path}: incomplete manifest ({type(exc).__name__}: {exc})") from None
        return streams, manifest

    def load(self) -> tuple[dict[str, StreamState], dict[str, Any]] | None:
        """The newest readable checkpoint's streams and manifest, or ``None`` when there is none;
        :class:`CheckpointError` when there are manifests but none reads whole."""
        self.warnings = []
        names = [n for n in (MANIFEST, PREVIOUS) if (self.directory / n).exists()]
        if not names:
            return None
        problems = []
        for name in names:
            try:
                streams, manifest = self._read(name)
            except CheckpointError as exc:
                problems.append(str(exc))
                continue
            self.warnings = [f"{p}; resuming from the previous checkpoint ({name}, seq {manifest['seq']})"
                             for p in problems]
            self._current_good = name == MANIFEST
            self.files = dict(manifest["streams"])
            # The generation kept as the previous one after the next save: this one if we fell back to it.
            self._previous_files = set() if name == MANIFEST else set(self.files.values())
            if name == MANIFEST and (self.directory / PREVIOUS).exists():
                try:
                    self._previous_files = set(json.loads((self.directory / PREVIOUS).read_bytes())["streams"]
                                               .values())
                except (OSError, ValueError, KeyError, TypeError, AttributeError):
                    self._previous_files = set()
            self.seq = max(int(manifest["seq"]), self.seq)
            return streams, manifest
        raise CheckpointError("no readable checkpoint in {}: {}".format(self.directory, "; ".join(problems)))

    def save(self, streams: dict[str, StreamState], dirty: set[str], position: dict[str, Any],
             outputs: dict[str, int], config: dict[str, Any], **extra: Any) -> None:
        """Write the changed streams, then the manifest that makes them current (the one it replaces becomes the
        previous generation), then remove the files neither names. ``extra`` goes into the manifest as it is."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.seq += 1
        files = dict(self.files)
        for name in sorted(dirty):
            files.pop(name, None)
            if name not in streams:
                continue
            fname = _stream_file(name, self.seq)
            arrays, header = stream_arrays(streams[name])
            write_npz_atomic(self.directory / fname, arrays, header)
            files[name] = fname
        manifest = {"format": FORMAT, "version": VERSION, "seq": self.seq, "position": position,
                    "outputs": outputs, "streams": files, "config": config, **extra}
        manifest["sha256"] = _digest(manifest)  # stream files are zip members, checked by their CRC-32
        tmp = self.directory / f".{MANIFEST}.tmp"
        with open(tmp, "w") as fh:
            json.dump(manifest, fh)
            fh.flush()
            os.fsync(fh.fileno())
        current = self.directory / MANIFEST
        if self._current_good and current.exists():
            os.replace(current, self.directory / PREVIOUS)  # a crash right here leaves only the previous: it loads
            self._previous_files = set(self.files.values())
        os.replace(tmp, current)
        _fsync_directory(self.directory)
        self._current_good = True
        self.files = files
        keep = set(files.values()) | self._previous_files
        for path in self.directory.glob("stream-*.npz"):
            if path.name not in keep:
                path.unlink(missing_ok=True)


def _digest(manifest: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()


def _fsync_directory(directory: Path) -> None:
    """Make the renames durable (POSIX: a rename is in the directory's data)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
