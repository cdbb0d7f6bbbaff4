"""The engine: decoded messages in, output records out. Pure: no files, no sockets; its records depend only on
the configuration and the input, except the ``seconds`` a feedback record reports.

:meth:`Engine.process` takes the raw bytes of one message and where they came from and returns the records to
publish. A bad message never escapes as an exception: it becomes an ``error`` record (a dead letter) and the state
is left exactly as it was, because every handler validates before it changes anything.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamforest.encoding import DEFAULT_N_COMPONENTS, check_arguments
from streamforest.engine import records
from streamforest.engine.messages import (
    ControlMessage,
    FeatureMessage,
    LabelMessage,
    Message,
    Refused,
    SamplesMessage,
    decode,
)
from streamforest.engine.metrics import EngineMetrics
from streamforest.engine.state import StreamState
from streamforest.forest import FeatureStreamForest

PUBLISH_POLICIES = ("unlabelled", "all", "none")
ENCODINGS = ("leaves", "paths", "none")


@dataclass
class EngineConfig:
    """How the engine learns and what it republishes.

    Parameters
    ----------
    forest
        Keyword arguments of every stream's :class:`~streamforest.FeatureStreamForest` (``random_state``
        included: the same config and input give the same outputs).
    publish
        Which samples get predictions and encodings after each model change: ``"unlabelled"`` (the scoring set),
        ``"all"`` or ``"none"``.
    encoding
        What encodings to publish: ``"leaves"`` (the leaf each sample reaches in each tree: compact, one entry
        per tree), ``"paths"`` (every node on the way, Vens & Costa's encoding: about depth times larger) or
        ``"none"``.
    n_components, encoding_values
        Width and values of the published hashed encodings.
    """

    forest: dict[str, Any] = field(default_factory=lambda: {"random_state": 0})
    publish: str = "unlabelled"
    encoding: str = "leaves"
    n_components: int = DEFAULT_N_COMPONENTS
    encoding_values: str = "binary"

    def __post_init__(self) -> None:
        if self.publish not in PUBLISH_POLICIES:
            raise ValueError(f"publish must be one of {PUBLISH_POLICIES}, got {self.publish!r}")
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {self.encoding!r}")
        check_arguments(self.n_components, self.encoding_values, "default")
        FeatureStreamForest(**self.forest)  # refuse bad forest parameters now, not at the first feature

    def to_json(self) -> dict[str, Any]:
        return {"forest": self.forest, "publish": self.publish, "encoding": self.encoding,
                "n_components": self.n_components, "encoding_values": self.encoding_values}


class Engine:
    """Many streams, each with its own forest; messages in, records out.

    Examples
    --------
    >>> import orjson
    >>> e = Engine(EngineConfig(forest={"trees_per_generation": 5, "random_state": 0}, encoding="none"))
    >>> samples = [{"id": str(i), "label": i % 2 if i < 80 else None} for i in range(100)]
    >>> out = e.process(orjson.dumps({"v": 1, "type": "samples", "stream": "s", "samples": samples}))
    >>> msg = {"v": 1, "type": "feature", "stream": "s", "name": "x", "ids": [str(i) for i in range(100)],
    ...        "values": [float(i % 2) for i in range(100)]}
    >>> out = e.process(orjson.dumps(msg))
    >>> sorted({r["type"] for r in out})
    ['feedback', 'prediction']
    >>> e.process(b'{"v": 1, "type": "nonsense", "stream": "s"}')[0]["reason"]
    "unknown message type 'nonsense' (expected one of ['control', 'feature', 'label', 'samples'])"
    """

    def __init__(self, config: EngineConfig | None = None, metrics: EngineMetrics | None = None) -> None:
        self.config = config or EngineConfig()
        self.metrics = metrics or EngineMetrics()
        self.streams: dict[str, StreamState] = {}
        #: Streams changed since the runner last checkpointed (it clears the set).
        self.dirty: set[str] = set()

    # ------------------------------------------------------------------ entry point

    def process(self, raw: bytes | str, source: str = "") -> list[dict[str, Any]]:
        """Handle one message; returns the output records (an ``error`` record if it was refused)."""
        try:
            msg = decode(raw)
        except Refused as exc:
            self.metrics.consumed("unknown")
            return self._refuse(raw, source, str(exc), "unknown")
        kind = type(msg).__name__.removesuffix("Message").lower()
        self.metrics.consumed(kind)
        try:
            out = self.handle(msg)
        except Refused as exc:
            return self._refuse(raw, source, str(exc), kind, msg.stream)
        except Exception as exc:  # a bug of ours must not stop the stream: dead-letter it with the cause
            return self._refuse(raw, source, f"internal error: {type(exc).__name__}: {exc}", kind, msg.stream)
        self.dirty.add(msg.stream)
        for r in out:
            self.metrics.produced(r["type"])
        return out

    def _refuse(self, raw: bytes | str, source: str, reason: str, kind: str, stream: str = "") -> list[dict]:
        self.metrics.failed(kind)
        self.metrics.produced("error")
        return [records.error(raw, source, reason, stream)]

    def handle(self, msg: Message) -> list[dict[str, Any]]:
        if isinstance(msg, SamplesMessage):
            return self._samples(msg)
        if isinstance(msg, FeatureMessage):
            return self._feature(msg)
        if isinstance(msg, LabelMessage):
            return self._label(msg)
        return self._control(msg)

    # ------------------------------------------------------------------ handlers

    def _state(self, stream: str, create: bool) -> StreamState:
        st = self.streams.get(stream)
        if st is None:
            if not create:
                raise Refused(f"unknown stream {stream!r}: send its samples first")
            st = self.streams[stream] = StreamState(stream)
        return st

    def _samples(self, msg: SamplesMessage) -> list[dict[str, Any]]:
        st = self.streams.get(msg.stream) or StreamState(msg.stream)
        unknown = sorted({k for s in msg.samples for k in s.x if k not in st.columns})
        if unknown:
            raise Refused(f"x names features this stream has not received: {unknown[:5]}")
        in_train = set(st.train_rows)
        new_train: list[int] = []
        for s in msg.samples:
            row = st.index.get(s.id)
            if row is not None and row in in_train:
                if s.label is None or s.label != st.labels[row] or any(
                        not _same(st.columns[k][row], v) for k, v in s.x.items()):
                    raise Refused(f"sample {s.id!r} is already in the training set with other values or label")
        for s in msg.samples:
            for k, v in s.x.items():
                if st.columns[k].dtype.kind == "f" and (isinstance(v, (str, bool))):
                    raise Refused(f"sample {s.id!r}: feature {k!r} is numeric, got {v!r}")
        self._check_labels(st, [s.label for s in msg.samples])
        # Validated: apply.
        self.streams[msg.stream] = st
        fresh = [s.id for s in msg.samples if s.id not in st.index]
        st.add_rows(fresh)
        for s in msg.samples:
            row = st.index[s.id]
            if row in in_train:
                continue
            for k, v in s.x.items():
                col = st.columns[k]
                col[row] = np.nan if (v is None and col.dtype.kind == "f") else v
            st.labels[row] = s.label
            if s.label is not None and st.forest is not None:
                new_train.append(row)
        self.metrics.samples(msg.stream, st.n_samples)
        out: list[dict[str, Any]] = []
        if st.forest is None:
            out += self._try_start(st)
        elif new_train:
            out += self._add_training(st, new_train)
        return out

    def _check_labels(self, st: StreamState, labels: list[Any]) -> None:
        """Labels of one stream share one type (numbers or strings) and, once learning, its classes."""
        given = [lab for lab in labels if lab is not None]
        known = [lab for lab in st.labels if lab is not None]
        if len({_label_type(lab) for lab in given + known[:1]}) > 1:
            raise Refused("labels mix strings, booleans and numbers in one stream")
        forest = st.forest
        if forest is None or forest.classes_ is None or forest.task == "regression":
            return
        known = set(forest.classes_.tolist())
        bad = sorted({str(lab) for lab in labels if lab is not None and lab not in known})
        if bad:
            raise Refused(f"labels {bad[:5]} are not among the stream's classes {sorted(map(str, known))}")

    def _label(self, msg: LabelMessage) -> list[dict[str, Any]]:
        st = self._state(msg.stream, create=False)
        row = st.index.get(msg.id)
        if row is None:
            raise Refused(f"unknown sample id {msg.id!r} in stream {msg.stream!r}")
        if row in set(st.train_rows):
            if st.labels[row] == msg.label:
                return []  # a replay
            raise Refused(f"sample {msg.id!r} is already in the training set with label {st.labels[row]!r}")
        self._check_labels(st, [msg.label])
        previous = st.labels[row]
        st.labels[row] = msg.label
        if st.forest is None:
            try:
                return self._try_start(st)
            except Refused:
                st.labels[row] = previous
                raise
        return self._add_training(st, [row])

    def _feature(self, msg: FeatureMessage) -> list[dict[str, Any]]:
        st = self._state(msg.stream, create=False)
        unknown = [i for i in msg.ids if i not in st.index]
        if unknown:
            raise Refused(f"feature {msg.name!r} names unknown sample ids {unknown[:5]}: send their samples first")
        if msg.name in st.columns:
            if st.matches(msg.name, msg.ids, msg.values, whole=msg.parts == 1):
                return []  # a replay (of the feature or of one of its parts)
            raise Refused(f"feature {msg.name!r} already arrived with other values")
        parts = st.pending.get(msg.name, {})
        if parts:
            first = next(iter(parts.values()))
            if first.parts != msg.parts or first.kind != msg.kind:
                raise Refused(f"feature {msg.name!r}: part {msg.part} disagrees with earlier parts on parts/kind")
            if msg.part in parts:
                if parts[msg.part] == msg:
                    return []
                raise Refused(f"feature {msg.name!r}: part {msg.part} arrived twice with other values")
            taken = {i for p in parts.values() for i in p.ids}
            clash = [i for i in msg.ids if i in taken]
            if clash:
                raise Refused(f"feature {msg.name!r}: ids {clash[:5]} already came in another part")
        if len(parts) + 1 < msg.parts:
            st.pending[msg.name] = {**parts, msg.part: msg}
            return []
        whole = [*parts.values(), msg]
        ids = [i for p in sorted(whole, key=lambda p: p.part) for i in p.ids]
        values = [v for p in sorted(whole, key=lambda p: p.part) for v in p.values]
        st.pending.pop(msg.name, None)
        return self._arrive(st, msg.name, msg.kind, ids, values)

    def _arrive(self, st: StreamState, name: str, kind: str | None, ids: list[str], values: list[Any]):
        st.set_column(name, kind, ids, values)
        self.metrics.feature_arrived(st.name)
        if st.forest is None:
            try:
                return self._try_start(st)
            except Refused:
                st.drop_column(name)
                raise
        start = time.perf_counter()
        col = st.columns[name][np.asarray(st.train_rows)]
        try:
            report = st.forest.add_feature(name, col, kind=st.kinds[name])
        except (ValueError, TypeError) as exc:
            st.drop_column(name)
            raise Refused(f"feature {name!r}: {exc}") from None
        self.metrics.generation(st.name, report, st.forest.n_trees_)
        self.metrics.training_seconds.observe(time.perf_counter() - start)
        return [records.feedback(st.name, report, st.forest.model_version_), *self._publish(st)]

    def _try_start(self, st: StreamState) -> list[dict[str, Any]]:
        """Grow the forest once there are features and labelled samples of at least two classes."""
        rows = st.labelled_rows()
        if not st.columns or len({st.labels[r] for r in rows}) < 2:
            return []
        forest = FeatureStreamForest(**self.config.forest)
        y = np.array([st.labels[r] for r in rows])
        out = []
        start = time.perf_counter()
        for k, name in enumerate(st.columns):
            try:
                report = forest.add_feature(name, st.columns[name][rows], y=y if k == 0 else None,
                                            kind=st.kinds[name])
            except (ValueError, TypeError) as exc:
                raise Refused(f"cannot start the forest: {exc}") from None
            out.append(records.feedback(st.name, report, forest.model_version_))
            self.metrics.generation(st.name, report, forest.n_trees_)
        self.metrics.training_seconds.observe(time.perf_counter() - start)
        st.forest = forest
        st.train_rows = list(rows)
        return out + self._publish(st)

    def _add_training(self, st: StreamState, rows: list[int]) -> list[dict[str, Any]]:
        rows_arr = np.asarray(rows)
        start = time.perf_counter()
        st.forest.add_samples(st.rows_matrix(rows_arr), np.array([st.labels[r] for r in rows]))
        st.train_rows.extend(rows)
        self.metrics.training_seconds.observe(time.perf_counter() - start)
        return self._publish(st)

    def _control(self, msg: ControlMessage) -> list[dict[str, Any]]:
        st = self._state(msg.stream, create=False)
        if msg.op == "drop":
            del self.streams[msg.stream]
            self.metrics.stream_dropped(msg.stream)
            return []
        return self._publish(st)  # snapshot

    # ------------------------------------------------------------------ outputs

    def _publish(self, st: StreamState) -> list[dict[str, Any]]:
        """Predictions and encodings of the scoring set under the current model version, in one batch each."""
        rows = st.scoring_rows(self.config.publish)
        if st.forest is None or rows.size == 0:
            return []
        X = st.rows_matrix(rows)
        version = st.forest.model_version_
        ids = [st.ids[r] for r in rows]
        if st.forest.task == "regression":
            out = records.values(st.name, ids, version, st.forest.predict(X))
        else:
            out = records.predictions(st.name, ids, version, st.forest.classes_, st.forest.predict_proba(X))
        if self.config.encoding != "none":
            start = time.perf_counter()
            E = st.forest.encode(X, n_components=self.config.n_components, values=self.config.encoding_values,
                                 leaves_only=self.config.encoding == "leaves")
            self.metrics.encoding_seconds.observe(time.perf_counter() - start)
            out += records.encodings(st.name, ids, version, E)
        return out


def _label_type(label: Any) -> str:
    """Booleans, numbers and strings are different label types (True == 1 in Python, not here)."""
    return "bool" if isinstance(label, bool) else "str" if isinstance(label, str) else "number"


def _same(a: Any, b: Any) -> bool:
    if b is None:
        return a is None or (isinstance(a, float) and np.isnan(a))
    return a == b
