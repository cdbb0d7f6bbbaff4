"""The embedded runtime: messages from a JSONL file or stdin, records to a directory of JSONL files or stdout.

The runner moves messages from a source through the :class:`~streamforest.engine.core.Engine` to sinks and
checkpoints: after every model change and every ``checkpoint_every`` messages it flushes the outputs, writes the
changed streams and the input position. On start it restores the last checkpoint, cuts the output files back to the
sizes that checkpoint saw and resumes the input after the position it covers, so a crash loses nothing and applies
nothing twice (into an output directory: exactly once; to stdout, which cannot be cut back, the records written
after the last checkpoint are written again after a crash: at least once).

A restart is refused, before anything is read or written, when the checkpoint does not fit it: another engine
configuration, another input (its resolved path, or its content before the checkpoint's position: a hash of the
first and of the last 64 KiB before it), or outputs that are not the ones the checkpoint covers (a new or emptied
output directory, a file shorter than the checkpoint saw or with other bytes at its end, a directory where stdout
was, or the reverse). The message names what differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from streamforest.compilation import COMPILE_NOTICE, kernels_compiled
from streamforest.engine.checkpoint import Checkpointer
from streamforest.engine.core import Engine, EngineConfig
from streamforest.engine.progress import Progress
from streamforest.engine.records import RecordBatch, json_lines

BOM = b"\xef\xbb\xbf"
#: How much of the input before a checkpoint's position, and of each output file, identifies them.
IDENTITY_BYTES = 2**16

OUTPUT_FILES = {"feedback": "feedback.jsonl", "prediction": "predictions.jsonl", "encoding": "encodings.jsonl",
                "error": "errors.jsonl"}


class JsonlSource:
    """Lines of a file (seekable, resumable by byte offset) or of stdin (resumable by skipping lines)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = "stdin" if path == "-" else str(path)

    def read(self, offset: int = 0, line: int = 0) -> Iterator[tuple[bytes, int, int]]:
        """Yield ``(raw line, byte offset after it, line number after it)``; blank lines are skipped."""
        for raw, pos, n, _ in self.lines(offset, line):
            yield raw, pos, n

    def lines(self, offset: int = 0, line: int = 0, limit: int | None = None
              ) -> Iterator[tuple[bytes, int, int, int]]:
        """Like :meth:`read`, with each line's length in bytes; a line longer than ``limit`` is not read whole:
        its first ``limit + 1`` bytes come instead (memory stays bounded whatever the input). A UTF-8 byte order
        mark at the start of the input is skipped."""
        stream: IO[bytes]
        if self.path == "-":
            stream, skip = sys.stdin.buffer, line
            pos, n = 0, 0
        else:
            stream, skip = open(self.path, "rb"), 0
            stream.seek(offset)
            pos, n = offset, line
        chunk = -1 if limit is None else limit + 2  # the line's end (\r\n) does not count
        try:
            while True:
                raw = stream.readline(chunk)
                if not raw:
                    return
                size = len(raw)
                ending = len(raw) - len(raw.rstrip(b"\r\n"))
                if not raw.endswith(b"\n") and limit is not None and size == chunk:
                    rest = raw
                    while True:  # an over-long line: count the rest, keep none of it
                        tail, rest = rest, stream.readline(2**20)
                        size += len(rest)
                        if not rest or rest.endswith(b"\n"):
                            break
                    ending = len(tail + rest) - len((tail + rest).rstrip(b"\r\n"))
                first = pos == 0
                pos += size
                n += 1
                if n <= skip:
                    continue
                if first and raw.startswith(BOM):
                    raw, size = raw[len(BOM):], size - len(BOM)
                if raw.strip():
                    yield raw.rstrip(b"\r\n"), pos, n, size - ending
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()


class DirectorySink:
    """One JSONL file per record type in a directory; sizes are what checkpoints record."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.files = {kind: open(self.directory / name, "ab") for kind, name in OUTPUT_FILES.items()}

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        lines = json_lines(records)
        if isinstance(records, RecordBatch):
            self.files[records.type].write(lines.blob)
            return
        for r, line in zip(records, lines.lines(), strict=True):
            self.files[r["type"]].write(line)

    def flush(self) -> dict[str, int]:
        sizes = {}
        for kind, fh in self.files.items():
            fh.flush()
            os.fsync(fh.fileno())
            sizes[OUTPUT_FILES[kind]] = fh.tell()
        return sizes

    def truncate(self, sizes: dict[str, int]) -> None:
        """Cut outputs back to a checkpoint's sizes (what was written after it will be written again)."""
        for kind, fh in self.files.items():
            size = sizes.get(OUTPUT_FILES[kind], 0)
            fh.flush()
            fh.truncate(size)
            fh.seek(size)

    def close(self) -> None:
        for fh in self.files.values():
            fh.close()


class StdoutSink:
    """All records, one JSON object per line, to stdout."""

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        sys.stdout.buffer.write(json_lines(records).blob)

    def flush(self) -> dict[str, int]:
        sys.stdout.flush()
        return {}

    def truncate(self, sizes: dict[str, int]) -> None:
        pass

    def close(self) -> None:
        sys.stdout.flush()


def check_input(path: str) -> None:
    """Refuse an input that cannot be messages, before anything is read or written: a missing file, a
    directory, or a file whose first two lines are not JSON objects (a CSV given to ``run`` instead of
    ``produce``)."""
    if path == "-":
        return
    p = Path(path)
    if not p.exists():
        raise ValueError(f"no input file {path}")
    if p.is_dir():
        raise ValueError(f"{path} is a directory, not a file of JSONL messages")
    with open(p, "rb") as fh:
        head = fh.read(IDENTITY_BYTES)
    lines = [ln.strip() for ln in head.removeprefix(BOM).splitlines() if ln.strip()][:2]
    first = lines[0] if lines else b""
    # One bad line among messages is a dead letter; a file that starts with two lines of something else is not
    # messages at all.
    if lines and not any(ln.startswith(b"{") for ln in lines):
        shown = first[:60].decode("utf-8", "replace")
        hint = (" It looks like a CSV file: turn it into messages with `streamforest produce "
                f"{path} --target COLUMN --stream NAME > messages.jsonl` first.") if b"," in first else ""
        raise ValueError(f"{path} is not JSONL messages (one JSON object per line): its first line is "
                         f"{shown!r}.{hint}")


def input_identity(path: str, offset: int) -> dict[str, Any]:
    """What identifies the input a checkpoint covers: its resolved path and hashes of its first and of its last
    :data:`IDENTITY_BYTES` before ``offset`` (stdin: only ``"-"``)."""
    if path == "-":
        return {"path": "-"}
    with open(path, "rb") as fh:
        head = fh.read(min(offset, IDENTITY_BYTES))
        fh.seek(max(0, offset - IDENTITY_BYTES))
        tail = fh.read(offset - max(0, offset - IDENTITY_BYTES))
    return {"path": str(Path(path).resolve()), "offset": offset, "head_sha256": hashlib.sha256(head).hexdigest(),
            "tail_sha256": hashlib.sha256(tail).hexdigest()}


def _tail_hash(path: Path, size: int) -> str:
    with open(path, "rb") as fh:
        fh.seek(max(0, size - 4096))
        return hashlib.sha256(fh.read(size - max(0, size - 4096))).hexdigest()


def _mismatch(manifest: dict[str, Any], checkpoint_dir: str, input_path: str, output: str,
              config: EngineConfig) -> str | None:
    """Why this checkpoint does not fit this run, or ``None``."""
    then = json.loads(json.dumps(manifest.get("config")))
    now = json.loads(json.dumps(config.to_json()))
    if then != now:
        diffs = []
        for key in sorted(set(then or {}) | set(now)):
            a, b = (then or {}).get(key), now.get(key)
            if isinstance(a, dict) and isinstance(b, dict):
                diffs += [f"forest {k}: {a.get(k)!r} then, {b.get(k)!r} now" for k in sorted(set(a) | set(b))
                          if a.get(k) != b.get(k)]
            elif a != b:
                diffs.append(f"{key}: {a!r} then, {b!r} now")
        return f"it was made with another engine configuration ({'; '.join(diffs)})"
    position = manifest["position"]
    recorded = manifest.get("input")
    if recorded is None:  # a checkpoint of an older version: the path as given is all it knows
        if position.get("source") != ("stdin" if input_path == "-" else input_path):
            return f"it covers the input {position.get('source')!r}, not {input_path!r}"
    elif recorded["path"] == "-" or input_path == "-":
        if recorded["path"] != ("-" if input_path == "-" else None):
            return f"it covers the input {recorded['path'] if recorded['path'] != '-' else 'stdin'!r}, not " \
                   f"{'stdin' if input_path == '-' else input_path!r}"
    else:
        resolved = str(Path(input_path).resolve())
        if recorded["path"] != resolved:
            return f"it covers the input {recorded['path']}, not {resolved}"
        size = os.path.getsize(input_path)
        if size < position["offset"]:
            return (f"the input {input_path} has {size} bytes, fewer than the {position['offset']} the checkpoint "
                    "already read (the file was replaced or cut)")
        if input_identity(input_path, position["offset"]) != recorded:
            return (f"the input {input_path} differs from the one checkpointed in its first {position['offset']} "
                    "bytes (the file was replaced or edited before the checkpoint's position)")
    kind = "stdout" if output == "-" else "directory"
    then_kind = manifest.get("output", {}).get("kind") or ("directory" if manifest["outputs"] else "stdout")
    if then_kind != kind:
        return f"its run wrote to {then_kind}, this one to {kind}"
    if output != "-":
        tails = manifest.get("output", {}).get("tail_sha256", {})
        for name, size in sorted(manifest["outputs"].items()):
            path = Path(output) / name
            have = path.stat().st_size if path.exists() else 0
            if have < size:
                return (f"the output directory {output} does not hold what the checkpoint covers: {name} has "
                        f"{have} bytes, the checkpoint saw {size} (a new or emptied output directory?); resume with "
                        "the checkpointed run's --output")
            if size and name in tails and _tail_hash(path, size) != tails[name]:
                return f"{path} is not the file the checkpoint saw (other bytes before its position {size})"
    return None


def run(
    input_path: str,
    output: str,
    config: EngineConfig | None = None,
    checkpoint_dir: str | None = None,
    checkpoint_every: int = 1000,
    engine: Engine | None = None,
    progress: bool | str = False,
    status_every: float = 10.0,
) -> Engine:
    """Run the engine over ``input_path`` ("-" for stdin) into ``output`` (a directory, or "-" for stdout).

    ``ValueError`` before anything is read or written when the input is not messages or the checkpoint does not
    fit this run (see the module). ``progress`` says what stderr shows while it runs
    (:class:`~streamforest.engine.progress.Progress`): a mode ``"auto"``, ``"bar"``, ``"lines"`` (a status line
    every ``status_every`` seconds) or ``"none"``; ``True`` is ``"bar"``, ``False`` ``"none"``.
    """
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
    engine = engine or Engine(config)
    check_input(input_path)
    source = JsonlSource(input_path)
    checkpointer = Checkpointer(checkpoint_dir) if checkpoint_dir else None
    offset, line = 0, 0
    restored = checkpointer.load() if checkpointer is not None else None
    if restored is not None:
        why = _mismatch(restored[1], checkpoint_dir, input_path, output, engine.config)
        if why:
            raise ValueError(f"cannot resume from the checkpoint in {checkpoint_dir}: {why}. Use the same "
                             "input, output and options, or another --checkpoint-dir to start afresh")
        for warning in checkpointer.warnings:
            print(f"streamforest: {warning}", file=sys.stderr)
    sink: DirectorySink | StdoutSink = StdoutSink() if output == "-" else DirectorySink(output)
    if restored is None:
        sink.truncate({})  # a fresh run: outputs of an earlier run in the same place are replaced, not appended to
    else:
        streams, manifest = restored
        engine.streams = streams
        offset, line = manifest["position"]["offset"], manifest["position"]["line"]
        sink.truncate(manifest["outputs"])
        if output == "-" and line:
            print(f"streamforest: resuming after line {line} of {source.name}; records written to stdout after "
                  "the last checkpoint are written again (stdout is at-least-once)", file=sys.stderr)
    since = 0
    mode = ("bar" if progress else "none") if isinstance(progress, bool) else progress
    total = os.path.getsize(input_path) if input_path != "-" else None
    reporter = Progress(mode, source.name, total, offset, interval=status_every)
    if kernels_compiled() is False:
        reporter.note(COMPILE_NOTICE)
    try:
        for raw, pos, n, size in source.lines(offset, line, engine.config.max_message_bytes):
            offset, line = pos, n
            n_records = n_feedback = n_errors = 0
            # Batch by batch, so that a republication is never whole in memory; the checkpoint below comes after
            # the message's last batch, so a crash halfway through a republication replays the message.
            for batch in engine.process_batches(raw, f"{source.name}:{line}", size=size):
                sink.write(batch)
                n_records += len(batch)
                if not isinstance(batch, RecordBatch):  # feedback and errors come as plain lists
                    kinds = [r["type"] for r in batch]
                    n_feedback += kinds.count("feedback")
                    n_errors += kinds.count("error")
            since += 1
            reporter.update(offset, line, n_records, n_feedback, n_errors)
            model_changed = n_feedback > 0
            if checkpointer is not None and (model_changed or since >= checkpoint_every):
                _checkpoint(checkpointer, engine, sink, source, offset, line)
                since = 0
        if checkpointer is not None:
            _checkpoint(checkpointer, engine, sink, source, offset, line)
        else:
            sink.flush()
    finally:
        reporter.close()
        sink.close()
    return engine


def _checkpoint(checkpointer: Checkpointer, engine: Engine, sink: Any, source: JsonlSource, offset: int,
                line: int) -> None:
    """Outputs first, then the changed streams and the position (Quix Streams' order), with what identifies the
    configuration, the input and the outputs."""
    sizes = sink.flush()
    if isinstance(sink, DirectorySink):
        out = {"kind": "directory", "tail_sha256": {name: _tail_hash(sink.directory / name, size)
                                                    for name, size in sizes.items()}}
    else:
        out = {"kind": "stdout"}
    checkpointer.save(engine.streams, engine.dirty, {"source": source.name, "offset": offset, "line": line}, sizes,
                      engine.config.to_json(), input=input_identity(source.path, offset), output=out)
    engine.dirty.clear()
