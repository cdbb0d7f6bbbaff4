"""The loop's side of the engine's protocol: it writes ``samples`` and ``feature`` messages and reads ``feedback``
and ``prediction`` records, over a pluggable transport.

:class:`EngineClient` is the one code path; a transport only moves messages and records:

* :class:`InProcess` -- an :class:`~streamforest.engine.core.Engine` in this process (``Engine.process``);
* :class:`JsonlProcess` -- ``streamforest run --input - --output -`` as a child process: JSON lines to its stdin,
  records back from its stdout (the embedded runtime, as any other client would drive it).

A Kafka transport is the same two methods over the input and output topics: ``KafkaTransport`` in
``streamforest.connectors.kafka.transport`` (the connectors layer, above this one).
"""

from __future__ import annotations

import collections
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import orjson

#: About the most bytes of one ``samples`` message that carries feature values (the engine refuses 16 MiB).
SAMPLES_MESSAGE_BYTES = 4 * 2**20


def _wire(values: np.ndarray, nominal: bool) -> list[Any]:
    """Feature values as the protocol has them: numbers (None = missing), nominal codes as text."""
    missing = ~np.isfinite(values)
    if nominal:
        wire = np.where(missing, 0, values).astype(np.int64).astype(str).astype(object)
    else:
        wire = values.astype(object)
    wire[missing] = None
    return wire.tolist()


class Transport(Protocol):
    def send(self, message: dict[str, Any]) -> None:
        """Deliver one input message to the engine."""

    def receive(self, timeout: float) -> list[dict[str, Any]]:
        """Records the engine produced since the last call (waits up to ``timeout`` s for at least one)."""

    def close(self) -> None:
        """Release the engine (or the connection to it)."""


def engine_options(config: dict[str, Any]) -> list[str]:
    """The engine options (``streamforest run``, ``streamforest kafka run``) of an engine configuration given as
    ``EngineConfig`` arguments (its ``forest``, ``publish``, ``encoding`` and ``start``).

    Examples
    --------
    >>> engine_options({"forest": {"random_state": 3, "split_features": None}, "encoding": "none"})
    ['--seed', '3', '--forest-param', 'split_features=null', '--encoding', 'none']
    """
    forest = dict(config.get("forest", {}))
    out = []
    if "random_state" in forest:
        out += ["--seed", str(forest.pop("random_state"))]
    for k, v in forest.items():
        out += ["--forest-param", f"{k}={orjson.dumps(v).decode()}"]
    for k in ("publish", "encoding", "start"):
        if k in config:
            out += [f"--{k}", str(config[k])]
    return out


class InProcess:
    """An engine in this process.

    Examples
    --------
    >>> t = InProcess({"forest": {"trees_per_generation": 5, "random_state": 0}})
    >>> t.send({"v": 1, "type": "samples", "stream": "s", "samples": [{"id": "a", "label": 1}]})
    >>> t.receive(0.0)
    []
    """

    def __init__(self, config: dict[str, Any] | None = None, engine: Any = None) -> None:
        from streamforest.engine.core import Engine, EngineConfig

        self.engine = engine or Engine(EngineConfig(**(config or {})))
        self._out: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self._out.extend(self.engine.process(orjson.dumps(message), "relational"))

    def receive(self, timeout: float) -> list[dict[str, Any]]:
        out, self._out = self._out, []
        return out

    def close(self) -> None:
        pass


class JsonlProcess:
    """``streamforest run`` as a child process speaking JSON lines on stdin/stdout.

    ``log`` (a directory) keeps a copy of the messages sent (``messages.jsonl``) and of the records received
    (``records.jsonl``), so that the exchange can be replayed with ``streamforest run``.
    """

    def __init__(self, config: dict[str, Any] | None = None, log: str | Path | None = None,
                 command: Sequence[str] | None = None) -> None:
        cmd = list(command or [sys.executable, "-u", "-m", "streamforest.cli", "run", "--input", "-",
                               "--output", "-"])
        cmd += engine_options(config or {})
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env)
        self._queue: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._log_in = self._log_out = None
        if log is not None:
            Path(log).mkdir(parents=True, exist_ok=True)
            self._log_in = open(Path(log) / "messages.jsonl", "wb")
            self._log_out = open(Path(log) / "records.jsonl", "wb")

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.strip():
                self._queue.put(line)
        self._queue.put(None)  # the engine's output ended

    def send(self, message: dict[str, Any]) -> None:
        raw = orjson.dumps(message) + b"\n"
        if self._log_in is not None:
            self._log_in.write(raw)
        try:
            self.proc.stdin.write(raw)
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"the engine process ended: {self._stderr()}") from None

    def receive(self, timeout: float) -> list[dict[str, Any]]:
        out = []
        try:
            line = self._queue.get(timeout=timeout)
            while True:
                if line is None:
                    raise RuntimeError(f"the engine process ended: {self._stderr()}")
                if self._log_out is not None:
                    self._log_out.write(line)
                out.append(orjson.loads(line))
                line = self._queue.get_nowait()
        except queue.Empty:
            pass
        return out

    def _stderr(self) -> str:
        try:
            self.proc.wait(timeout=5)
            return self.proc.stderr.read().decode(errors="replace")[-2000:]
        except subprocess.TimeoutExpired:
            return "(still running)"

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fh in (self._log_in, self._log_out):
            if fh is not None:
                fh.close()


class EngineClient:
    """Samples and features out, feedback and predictions back, whatever the transport.

    Parameters
    ----------
    transport
        Where the engine is.
    timeout
        Seconds to wait for the feedback of a feature before giving up.

    Examples
    --------
    >>> c = EngineClient(InProcess({"forest": {"trees_per_generation": 5, "random_state": 0}, "encoding": "none"}))
    >>> ids = [str(i) for i in range(40)]
    >>> c.samples("s", ids, [i % 2 for i in range(30)] + [None] * 10)
    >>> fb = c.feature("s", "x", ids, np.arange(40) % 2 + 0.5)
    >>> fb["feature"], fb["model_version"], len(c.predictions("s"))
    ('x', 1, 10)
    """

    def __init__(self, transport: Transport, timeout: float = 600.0) -> None:
        self.transport = transport
        self.timeout = timeout
        self._predictions: dict[str, dict[str, tuple[int, dict[str, float]]]] = {}
        # Feedback records not read yet: a message's answer may come back while the client sends the next one.
        self._unread: collections.deque[dict[str, Any]] = collections.deque()

    def samples(self, stream: str, ids: Sequence[str], labels: Sequence[Any],
                features: Sequence[tuple[str, np.ndarray, bool]] = ()) -> None:
        """Declare samples (label None = unlabelled: scored, never learned from), with the values of ``features``
        (name, one value per sample, nominal) the stream already has, if any: a message per few megabytes."""
        columns = [(name, _wire(values, nominal)) for name, values, nominal in features]
        per_sample = 40 + sum(len(name) + 30 for name, _ in columns)
        step = max(1, SAMPLES_MESSAGE_BYTES // per_sample) if columns else max(1, len(ids))
        for a in range(0, max(len(ids), 1), step):
            part = []
            for j, (i, lab) in enumerate(zip(ids[a:a + step], labels[a:a + step], strict=True)):
                sample: dict[str, Any] = {"id": i, "label": lab}
                if columns:
                    sample["x"] = {name: vals[a + j] for name, vals in columns}
                part.append(sample)
            self.transport.send({"v": 1, "type": "samples", "stream": stream, "samples": part})
            self._take(self.transport.receive(0.0))

    def feature(self, stream: str, name: str, ids: Sequence[str], values: np.ndarray,
                nominal: bool = False, paired_null: bool = False, waiting_ok: bool = False) -> dict[str, Any]:
        """Send a feature; returns the engine's feedback record for it (with ``paired_null``, also the score with
        its generation's permuted twin in its place: ``oob_null``, ``oob_paired_se``). ``waiting_ok``: the stream's
        forest may not start yet (an engine whose ``start`` is ``"control"``), and the ``waiting`` record naming
        the feature is an answer too (otherwise it is an error)."""
        msg = {"v": 1, "type": "feature", "stream": stream, "name": name, "kind": "nominal" if nominal else "numeric",
               "ids": list(ids), "values": _wire(values, nominal)}
        if paired_null:
            msg["paired_null"] = True
        self.transport.send(msg)
        return self._feedback(stream, {name}, waiting_ok=waiting_ok)

    def start(self, stream: str, waiting: bool) -> dict[str, Any] | None:
        """``control start``: a stream whose forest is ``waiting`` starts (the offline forest on every feature it
        has) and its feedback record is returned; a started one republishes its predictions (None)."""
        self.transport.send({"v": 1, "type": "control", "stream": stream, "op": "start"})
        if waiting:
            return self._feedback(stream, {""})
        self._take(self.transport.receive(0.0))
        return None

    def _feedback(self, stream: str, names: set[str], waiting_ok: bool = False) -> dict[str, Any]:
        """The stream's next feedback record on one of ``names`` (or the ``waiting`` one, when ``waiting_ok``)."""
        deadline = time.monotonic() + self.timeout
        while True:
            while self._unread:
                r = self._unread.popleft()
                if r["stream"] != stream:
                    continue
                # Waiting for a start (""), any waiting record is the answer: the start could not happen.
                if r.get("status") == "waiting" and ("" in names or names & set(r["features"])):
                    if waiting_ok:
                        return r
                    raise ValueError(f"the engine cannot start stream {stream!r}: {r['reason']}")
                if r.get("feature") in names:
                    return r
            if time.monotonic() >= deadline:
                break
            self._take(self.transport.receive(min(1.0, self.timeout)))
        raise TimeoutError(f"no feedback for feature {' or '.join(map(repr, sorted(names)))} of stream {stream!r} "
                           f"within {self.timeout} s")

    def wait_predictions(self, stream: str, n: int, version: int) -> dict[str, dict[str, float]]:
        """Wait until ``n`` samples of the stream have predictions of model version ``version`` or later."""
        deadline = time.monotonic() + self.timeout
        while True:
            seen = self._predictions.get(stream, {})
            if sum(v >= version for v, _ in seen.values()) >= n:
                return self.predictions(stream)
            if time.monotonic() > deadline:
                raise TimeoutError(f"predictions of stream {stream!r} (version {version}) did not come")
            self._take(self.transport.receive(min(1.0, self.timeout)))

    def drop(self, stream: str) -> None:
        self.transport.send({"v": 1, "type": "control", "stream": stream, "op": "drop"})
        self._take(self.transport.receive(0.0))
        self._predictions.pop(stream, None)

    def predictions(self, stream: str) -> dict[str, dict[str, float]]:
        """The latest prediction of every scored sample of the stream (by model version)."""
        self._take(self.transport.receive(0.0))
        return {i: p for i, (_, p) in sorted(self._predictions.get(stream, {}).items())}

    def _take(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in records:
            if r["type"] == "error":
                raise RuntimeError(f"the engine refused a message: {r['reason']}")
            if r["type"] == "feedback":
                self._unread.append(r)
            if r["type"] == "prediction":
                seen = self._predictions.setdefault(r["stream"], {})
                old = seen.get(r["id"])
                if old is None or old[0] <= r["model_version"]:
                    seen[r["id"]] = (r["model_version"], r["proba"] if "proba" in r else {"value": r["value"]})
        return records

    def close(self) -> None:
        self.transport.close()
