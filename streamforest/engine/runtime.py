"""The embedded runtime: messages from a JSONL file or stdin, records to a directory of JSONL files or stdout.

The runner moves messages from a source through the :class:`~streamforest.engine.core.Engine` to sinks and
checkpoints: after every model change and every ``checkpoint_every`` messages it flushes the outputs, writes the
changed streams and the input position. On start it restores the last checkpoint, cuts the output files back to the
sizes that checkpoint saw and resumes the input after the position it covers, so a crash loses nothing and applies
nothing twice.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from streamforest.compilation import COMPILE_NOTICE, kernels_compiled
from streamforest.engine.checkpoint import Checkpointer
from streamforest.engine.core import Engine, EngineConfig
from streamforest.engine.progress import Progress

OUTPUT_FILES = {"feedback": "feedback.jsonl", "prediction": "predictions.jsonl", "encoding": "encodings.jsonl",
                "error": "errors.jsonl"}


class JsonlSource:
    """Lines of a file (seekable, resumable by byte offset) or of stdin (resumable by skipping lines)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = "stdin" if path == "-" else str(path)

    def read(self, offset: int = 0, line: int = 0) -> Iterator[tuple[bytes, int, int]]:
        """Yield ``(raw line, byte offset after it, line number after it)``; blank lines are skipped."""
        if self.path == "-":
            stream: IO[bytes] = sys.stdin.buffer
            pos, n = 0, 0
            for raw in stream:
                pos += len(raw)
                n += 1
                if n <= line:
                    continue
                if raw.strip():
                    yield raw.rstrip(b"\r\n"), pos, n
            return
        with open(self.path, "rb") as fh:
            fh.seek(offset)
            pos, n = offset, line
            for raw in fh:
                pos += len(raw)
                n += 1
                if raw.strip():
                    yield raw.rstrip(b"\r\n"), pos, n


class DirectorySink:
    """One JSONL file per record type in a directory; sizes are what checkpoints record."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.files = {kind: open(self.directory / name, "ab") for kind, name in OUTPUT_FILES.items()}

    def write(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            self.files[r["type"]].write(orjson.dumps(r) + b"\n")

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

    def write(self, records: list[dict[str, Any]]) -> None:
        out = sys.stdout.buffer
        for r in records:
            out.write(orjson.dumps(r) + b"\n")

    def flush(self) -> dict[str, int]:
        sys.stdout.flush()
        return {}

    def truncate(self, sizes: dict[str, int]) -> None:
        pass

    def close(self) -> None:
        sys.stdout.flush()


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

    ``progress`` says what stderr shows while it runs (:class:`~streamforest.engine.progress.Progress`): a mode
    ``"auto"``, ``"bar"``, ``"lines"`` (a status line every ``status_every`` seconds) or ``"none"``; ``True`` is
    ``"bar"``, ``False`` ``"none"``.
    """
    engine = engine or Engine(config)
    sink: DirectorySink | StdoutSink = StdoutSink() if output == "-" else DirectorySink(output)
    source = JsonlSource(input_path)
    checkpointer = Checkpointer(checkpoint_dir) if checkpoint_dir else None
    offset, line = 0, 0
    restored = checkpointer.load() if checkpointer is not None else None
    if restored is None:
        sink.truncate({})  # a fresh run: outputs of an earlier run in the same place are replaced, not appended to
    else:
        streams, manifest = restored
        if manifest["position"].get("source") != source.name:
            raise ValueError(
                f"checkpoint in {checkpoint_dir} covers {manifest['position'].get('source')!r}, "
                f"not {source.name!r}: use another --checkpoint-dir"
            )
        engine.streams = streams
        offset, line = manifest["position"]["offset"], manifest["position"]["line"]
        sink.truncate(manifest["outputs"])
    since = 0
    mode = ("bar" if progress else "none") if isinstance(progress, bool) else progress
    total = os.path.getsize(input_path) if input_path != "-" else None
    reporter = Progress(mode, source.name, total, offset, interval=status_every)
    if kernels_compiled() is False:
        reporter.note(COMPILE_NOTICE)
    try:
        for raw, pos, n in source.read(offset, line):
            offset, line = pos, n
            out = engine.process(raw, f"{source.name}:{line}")
            sink.write(out)
            since += 1
            reporter.update(offset, line, out)
            model_changed = any(r["type"] == "feedback" for r in out)
            if checkpointer is not None and (model_changed or since >= checkpoint_every):
                _checkpoint(checkpointer, engine, sink, source.name, offset, line)
                since = 0
        if checkpointer is not None:
            _checkpoint(checkpointer, engine, sink, source.name, offset, line)
        else:
            sink.flush()
    finally:
        reporter.close()
        sink.close()
    return engine


def _checkpoint(checkpointer: Checkpointer, engine: Engine, sink: Any, source: str, offset: int, line: int) -> None:
    """Outputs first, then the changed streams and the position (Quix Streams' order)."""
    sizes = sink.flush()
    checkpointer.save(engine.streams, engine.dirty, {"source": source, "offset": offset, "line": line}, sizes,
                      engine.config.to_json())
    engine.dirty.clear()
