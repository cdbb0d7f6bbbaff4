"""What ``streamforest run`` tells its user while it works, on stderr.

On a terminal, a progress bar over the input bytes; elsewhere (a log, a pipe, CI) one status line every few
seconds and a last line when the run ends; or nothing. The first use of the forest compiles numba kernels for
a minute or two, so a run that starts without them says so.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any

MODES = ("auto", "bar", "lines", "none")


class Progress:
    """Reports a run's position: ``mode`` is ``"bar"``, ``"lines"`` (a status line every ``interval`` seconds),
    ``"none"``, or ``"auto"`` (a bar if ``out`` is a terminal, lines otherwise).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> ticks = iter([0.0, 2.0])  # a clock: started, then closed
    >>> p = Progress("lines", "in.jsonl", total_bytes=100, out=out, interval=3600, clock=ticks.__next__)
    >>> p.update(50, 3, records=3, feedback=1, errors=1)
    >>> p.close()
    >>> print(out.getvalue().strip())
    streamforest run: reading in.jsonl (100 B)
    streamforest run: done in 2 s: in.jsonl line 3 (50% of 100 B), 1 messages -> 3 records (1 feedback, 1 dead letters)
    """

    def __init__(self, mode: str, source: str, total_bytes: int | None = None, offset: int = 0,
                 out: IO[str] | None = None, interval: float = 10.0, clock=time.monotonic) -> None:
        if mode not in MODES:
            raise ValueError(f"progress mode must be one of {MODES}, got {mode!r}")
        self.out = out if out is not None else sys.stderr
        if mode == "auto":
            mode = "bar" if self.out.isatty() else "lines"
        self.mode, self.source, self.total, self.offset = mode, source, total_bytes, offset
        self.clock, self.started = clock, clock()
        self.line = self.messages = self.records = self.feedback = self.errors = 0
        self._bar: Any = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=total_bytes, initial=offset, unit="B", unit_scale=True, desc="input",
                             file=self.out)
        elif mode == "lines":
            size = f" ({_size(total_bytes)}{f', resuming at byte {offset}' if offset else ''})" if total_bytes else ""
            print(f"streamforest run: reading {source}{size}", file=self.out, flush=True)
        if mode == "lines" and interval > 0:
            self._thread = threading.Thread(target=self._tick, args=(interval,), daemon=True)
            self._thread.start()

    def note(self, text: str) -> None:
        """A one-off line (e.g. that kernels are compiling), shown in every mode but ``none``."""
        if self.mode == "none":
            return
        if self._bar is not None:
            self._bar.write(f"streamforest run: {text}", file=self.out)
        else:
            print(f"streamforest run: {text}", file=self.out, flush=True)

    def update(self, offset: int, line: int, records: int, feedback: int = 0, errors: int = 0) -> None:
        """After one message: its position in the input and how many records, feedback and errors it produced."""
        with self._lock:
            self.line, self.messages = line, self.messages + 1
            self.records += records
            self.feedback += feedback
            self.errors += errors
            if self._bar is not None:
                self._bar.update(offset - self._bar.n)
            self.offset = offset

    def status(self) -> str:
        with self._lock:
            where = f"{self.source} line {self.line}"
            if self.total:
                where += f" ({100 * self.offset / self.total:.0f}% of {_size(self.total)})"
            return (f"{where}, {self.messages} messages -> {self.records} records "
                    f"({self.feedback} feedback, {self.errors} dead letters)")

    def _tick(self, interval: float) -> None:
        while not self._stop.wait(interval):
            elapsed = self.clock() - self.started
            print(f"streamforest run: {elapsed:.0f} s: {self.status()}", file=self.out, flush=True)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.close()
        if self.mode == "lines":
            elapsed = self.clock() - self.started
            print(f"streamforest run: done in {elapsed:.0f} s: {self.status()}", file=self.out, flush=True)


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
