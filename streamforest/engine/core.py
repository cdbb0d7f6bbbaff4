"""The engine: decoded messages in, output records out. Pure: no files, no sockets; its records depend only on
the configuration and the input, except the ``seconds`` a feedback record reports.

:meth:`Engine.process` takes the raw bytes of one message and where they came from and returns the records to
publish. A bad message never escapes as an exception: it becomes an ``error`` record (a dead letter) and the state
is left exactly as it was: every handler validates before it changes anything, and it changes a *fork* of the
stream (:meth:`StreamState.fork`: column arrays and the forest replaced, never written into; per-sample lists
appended to under an undo journal), which becomes the stream only once the message was fully applied and its
records built. An exception anywhere in between (the forest refusing a column, a bug of ours) rolls the fork back
and leaves the engine's state as it was, byte for byte; metrics are updated at that commit too.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamforest.encoder import EncodeOptions
from streamforest.encoding import DEFAULT_N_COMPONENTS
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
from streamforest.inputs import Binned, is_int

PUBLISH_POLICIES = ("unlabelled", "all", "none")
#: When and how a stream's forest starts (see :class:`EngineConfig`).
STARTS = ("arrival", "control")
#: Samples per republication batch: a few MB of records with hundreds of trees, and large enough that the
#: per-batch costs (a numba call, a file write) are spread over thousands of records.
CHUNK_SIZE = 4096
#: Most encoding entries per batch (about 25 bytes each, as arrays and as JSON): paths encodings of deep forests
#: hold thousands of entries per sample, so their batches have fewer samples.
CHUNK_ENTRIES = 2**21
ENCODINGS = ("leaves", "paths", "none")
#: Levels a path is assumed to have, when sizing a batch of encodings, in trees whose depth is not bounded
#: (``max_depth=None``): an estimate of the usual depth, not a limit (the kernels' own limits are in
#: :mod:`streamforest.tree`); a deeper path only makes that batch larger than :data:`CHUNK_ENTRIES`.
ASSUMED_DEPTH = 32
#: Widest hashed encoding a config accepts: CSR indices of 32 bits, what downstream sparse libraries expect.
MAX_N_COMPONENTS = 2**31 - 1
#: Default cap on one message's size: large feature columns come in parts (``produce --chunk``); Kafka's own
#: default is 1 MB.
MAX_MESSAGE_BYTES = 16 * 2**20


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
        Width (1 to ``2**31 - 1``) and values of the published hashed encodings.
    max_message_bytes
        Messages longer than this many bytes are refused unread (dead letters keep a truncated copy); large
        feature columns are sent in parts.
    start
        When a stream's forest starts. ``"arrival"``: as soon as the stream has a feature and labels of two values,
        a generation per feature it has, in arrival order (a feedback record each). ``"control"``: on a ``control``
        ``start`` message, as the offline forest on every feature it has then
        (:meth:`~streamforest.FeatureStreamForest.fit`: one generation of ``trees_per_generation`` trees, one
        feedback record with no feature); until then features and labels only gather. A stream that needs the
        model its features make together (a final scoring) pays for one generation rather than one per feature.
        Either way, features that come after the start grow their generations, and ``control start`` starts a
        stream that has not started (by fit) and republishes one that has.
    """

    forest: dict[str, Any] = field(default_factory=lambda: {"random_state": 0})
    publish: str = "unlabelled"
    encoding: str = "leaves"
    n_components: int = DEFAULT_N_COMPONENTS
    encoding_values: str = "binary"
    max_message_bytes: int = MAX_MESSAGE_BYTES
    start: str = "arrival"

    def __post_init__(self) -> None:
        if self.start not in STARTS:
            raise ValueError(f"start must be one of {STARTS}, got {self.start!r}")
        if self.publish not in PUBLISH_POLICIES:
            raise ValueError(f"publish must be one of {PUBLISH_POLICIES}, got {self.publish!r}")
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {self.encoding!r}")
        self.encode_options.check()
        if self.n_components > MAX_N_COMPONENTS:
            raise ValueError(f"n_components must be at most 2**31 - 1 = {MAX_N_COMPONENTS}, got {self.n_components}")
        if not is_int(self.max_message_bytes, numpy=False) or self.max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be a positive integer, got {self.max_message_bytes!r}")
        if not isinstance(self.forest, dict):
            raise TypeError(f"forest must be a dict of FeatureStreamForest parameters, got {self.forest!r}")
        seed = self.forest.get("random_state")
        if seed is not None and (not is_int(seed, numpy=False) or not 0 <= seed < 2**63):
            raise ValueError(f"random_state (the seed) must be an integer in 0..2**63-1, got {seed!r}")
        try:  # refuse bad forest parameters now, not at the first feature
            FeatureStreamForest(**self.forest)
        except TypeError as exc:
            raise ValueError(f"bad forest parameters: {exc}") from None

    @property
    def encode_options(self) -> EncodeOptions:
        """The arguments of the published encodings (for :meth:`streamforest.encoder.Encoder.encode`)."""
        return EncodeOptions(self.n_components, self.encoding_values, leaves_only=self.encoding == "leaves")

    def to_json(self) -> dict[str, Any]:
        """What decides the engine's outputs (checkpoints record it; a restart with another is refused)."""
        out = {"forest": self.forest, "publish": self.publish, "encoding": self.encoding,
               "n_components": self.n_components, "encoding_values": self.encoding_values}
        if self.start != "arrival":  # the checkpoints written before the option stay valid for its default
            out["start"] = self.start
        return out


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

    def __init__(self, config: EngineConfig | None = None, metrics: EngineMetrics | None = None,
                 chunk_size: int = CHUNK_SIZE) -> None:
        if not is_int(chunk_size, numpy=False) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        self.config = config or EngineConfig()
        self.metrics = metrics or EngineMetrics()
        #: Samples per batch of a republication: what bounds its memory.
        self.chunk_size = chunk_size
        self._pending: tuple | None = None
        self.streams: dict[str, StreamState] = {}
        #: Streams changed since the runner last checkpointed (it clears the set).
        self.dirty: set[str] = set()
        # The message being applied: forks of the streams it changes (None: dropped), metrics made at its commit.
        self._work: dict[str, StreamState | None] = {}
        self._after: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ entry point

    def process(self, raw: bytes | str, source: str = "", size: int | None = None) -> list[dict[str, Any]]:
        """Handle one message; returns the output records (an ``error`` record if it was refused).

        All of :meth:`process_batches` in one list: for small uses and tests (a republication of many samples
        is better read batch by batch).
        """
        return [r for batch in self.process_batches(raw, source, size) for r in batch]

    def process_batches(self, raw: bytes | str, source: str = "",
                        size: int | None = None) -> Iterator[Sequence[dict[str, Any]]]:
        """Handle one message; yields its output records in batches of bounded size.

        The message is validated and applied before the first batch is yielded: the first batch holds the
        feedback records (or the one ``error`` record of a refused message); then the republication follows,
        predictions then encodings, each in :class:`~streamforest.engine.records.RecordBatch` es of at most
        ``chunk_size`` samples, predicted and encoded as they are read, so that memory holds one chunk at a time.
        A republication reads the committed state of its own message: later messages only append samples and
        replace column arrays, so the rows and values it reads stay those of its model version.
        ``size`` is the message's length in bytes when ``raw`` is only its beginning (a source that did not read
        an over-long line whole).
        """
        self._pending = None
        if size is None:
            size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
        if size > self.config.max_message_bytes:
            self.metrics.consumed("unknown")
            yield self._refuse(raw, source, f"message of {size} bytes is over the limit of "
                               f"{self.config.max_message_bytes} bytes (max_message_bytes): send large feature "
                               "columns in parts", "unknown", size=size)
            return
        try:
            msg = decode(raw)
        except Refused as exc:
            self.metrics.consumed("unknown")
            yield self._refuse(raw, source, str(exc), "unknown")
            return
        kind = type(msg).__name__.removesuffix("Message").lower()
        self.metrics.consumed(kind)
        try:
            out = self.handle(msg)
        except Refused as exc:
            yield self._refuse(raw, source, str(exc), kind, msg.stream)
            return
        except Exception as exc:  # a bug of ours must not stop the stream: dead-letter it with the cause
            yield self._refuse(raw, source, f"internal error: {type(exc).__name__}: {exc}", kind, msg.stream)
            return
        finally:
            pending, self._pending = self._pending, None
        self.dirty.add(msg.stream)
        for r in out:
            self.metrics.produced(r["type"])
        if out:
            yield out
        if pending is None:
            return
        try:
            for batch in self._republication(*pending):
                self.metrics.produced(batch.type, len(batch))
                yield batch
        except Exception as exc:  # the message was applied: only its republication is cut short
            yield self._refuse(raw, source, f"internal error while republishing: {type(exc).__name__}: {exc}",
                               kind, msg.stream)

    def _refuse(self, raw: bytes | str, source: str, reason: str, kind: str, stream: str = "",
                size: int | None = None) -> list[dict]:
        self.metrics.failed(kind)
        self.metrics.produced("error")
        return [records.error(raw, source, reason, stream, size=size)]

    def handle(self, msg: Message) -> list[dict[str, Any]]:
        """Apply one decoded message, all or nothing: on any exception the streams are as they were."""
        self._work, self._after = {}, []
        try:
            if isinstance(msg, SamplesMessage):
                out = self._samples(msg)
            elif isinstance(msg, FeatureMessage):
                out = self._feature(msg)
            elif isinstance(msg, LabelMessage):
                out = self._label(msg)
            else:
                out = self._control(msg)
        except BaseException:
            for st in self._work.values():
                if st is not None:
                    st.rollback()
            raise
        # Commit: nothing below can fail.
        for name, st in self._work.items():
            if st is None:
                self.streams.pop(name, None)
            else:
                st.commit()
                self.streams[name] = st
        for update in self._after:
            update()
        return out

    def _later(self, update: Callable[..., None], *args: Any) -> None:
        """A metrics update, made when the message commits."""
        self._after.append(lambda: update(*args))

    # ------------------------------------------------------------------ handlers

    def _state(self, stream: str, create: bool) -> StreamState:
        """The fork of ``stream`` this message changes (committed by :meth:`handle` if it is accepted)."""
        st = self.streams.get(stream)
        if st is None:
            if not create:
                raise Refused(f"unknown stream {stream!r}: send its samples first")
            st = StreamState(stream)
        else:
            st = st.fork()
        self._work[stream] = st
        return st

    def _samples(self, msg: SamplesMessage) -> list[dict[str, Any]]:
        st = self._state(msg.stream, create=True)
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
        # Validated: apply (to the fork).
        fresh = [s.id for s in msg.samples if s.id not in st.index]
        if fresh:
            st.add_rows(fresh)  # every column becomes a new, longer array
        else:
            for name in {k for s in msg.samples for k in s.x}:
                st.columns[name] = st.columns[name].copy()  # the committed stream still holds the old array
        labelled = False
        for s in msg.samples:
            row = st.index[s.id]
            if row in in_train:
                continue
            for k, v in s.x.items():
                col = st.columns[k]
                col[row] = np.nan if (v is None and col.dtype.kind == "f") else v
            st.set_label(row, s.label)
            labelled |= s.label is not None
            if s.label is not None and st.forest is not None:
                new_train.append(row)
        self._later(self.metrics.samples, msg.stream, st.n_samples)
        out: list[dict[str, Any]] = []
        if st.forest is None:
            out += self._try_start(st, tell=labelled)
        elif new_train:
            out += self._add_training(st, new_train)
        return out

    def _check_labels(self, st: StreamState, labels: list[Any]) -> None:
        """Labels of one stream share one type (numbers, booleans or strings) and, once learning, its classes; a
        regression stream's are numbers."""
        given = [lab for lab in labels if lab is not None]
        known = next((lab for lab in st.labels if lab is not None), None)
        if len({_label_type(lab) for lab in given + ([] if known is None else [known])}) > 1:
            raise Refused("labels mix strings, booleans and numbers in one stream")
        if self.config.forest.get("task") == "regression":
            bad = [lab for lab in given if _label_type(lab) != "number"]
            if bad:
                raise Refused(f"a regression stream's labels are numbers, got {bad[0]!r}")
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
        st.set_label(row, msg.label)
        if st.forest is None:
            return self._try_start(st, tell=True)
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
            if first.parts != msg.parts or first.kind != msg.kind or first.paired_null != msg.paired_null:
                raise Refused(f"feature {msg.name!r}: part {msg.part} disagrees with earlier parts on "
                              "parts/kind/paired_null")
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
        return self._arrive(st, msg.name, msg.kind, ids, values, msg.paired_null)

    def _arrive(self, st: StreamState, name: str, kind: str | None, ids: list[str], values: list[Any],
                paired_null: bool = False):
        st.set_column(name, kind, ids, values)
        self._later(self.metrics.feature_arrived, st.name)
        if st.forest is None:
            return self._try_start(st, tell=True)
        start = time.perf_counter()
        col = st.columns[name][np.asarray(st.train_rows)]
        forest = copy.deepcopy(st.forest)  # the committed stream keeps the old one whatever add_feature does
        try:
            report = forest.add_feature(name, col, kind=st.kinds[name], paired_null=paired_null)
        except (ValueError, TypeError) as exc:
            raise Refused(f"feature {name!r}: {exc}") from None
        st.forest = forest
        self._later(self.metrics.generation, st.name, report, forest.n_trees_)
        self._later(self.metrics.training_seconds.observe, time.perf_counter() - start)
        return [records.feedback(st.name, report, forest.model_version_), *self._publish(st)]

    def _try_start(self, st: StreamState, tell: bool = False, by_fit: bool = False) -> list[dict[str, Any]]:
        """Grow the forest once there are features and labelled samples of two values (and, under ``start =
        "control"``, only when asked: ``by_fit``). Until then, a message that brought a feature or labels to a
        stream that has features gets a ``waiting`` feedback saying why (when ``tell``)."""
        rows = st.labelled_rows()
        values = {st.labels[r] for r in rows}
        if not st.columns or len(values) < 2 or (self.config.start == "control" and not by_fit):
            if not (tell and st.columns):
                return []
            what = "target" if self.config.forest.get("task") == "regression" else "label"
            if not rows:
                why = f"no labelled sample yet; the forest starts with labels of two {what} values"
            elif len(values) < 2:
                why = (f"all {len(rows)} labelled samples have the {what} {next(iter(values))!r}; the forest "
                       f"starts when a second {what} value arrives")
            else:
                why = "the forest starts on a control start message (the engine's start is 'control')"
            return [records.waiting(st.name, st.features, why)]
        forest = FeatureStreamForest(**self.config.forest)
        forest.encoder.without_deltas()  # the engine publishes whole encodings: dead generations need not stay
        y = np.array([st.labels[r] for r in rows])
        out = []
        start = time.perf_counter()
        if by_fit:
            try:
                forest.fit({name: st.columns[name][rows] for name in st.columns}, y, kinds=st.kinds)
            except (ValueError, TypeError) as exc:
                raise Refused(f"cannot start the forest: {exc}") from None
            forest.encoder.without_deltas()  # fit starts the forest afresh, its encoder too
            reports = [dataclasses.replace(forest.newest_report(), seconds=time.perf_counter() - start)]
        else:
            reports = []
            for k, name in enumerate(st.columns):
                try:
                    reports.append(forest.add_feature(name, st.columns[name][rows], y=y if k == 0 else None,
                                                      kind=st.kinds[name]))
                except (ValueError, TypeError) as exc:
                    raise Refused(f"cannot start the forest: {exc}") from None
        for report in reports:
            out.append(records.feedback(st.name, report, forest.model_version_))
            self._later(self.metrics.generation, st.name, report, forest.n_trees_)
        self._later(self.metrics.training_seconds.observe, time.perf_counter() - start)
        st.forest = forest
        st.train_rows = list(rows)
        return out + self._publish(st)

    def _add_training(self, st: StreamState, rows: list[int]) -> list[dict[str, Any]]:
        rows_arr = np.asarray(rows)
        start = time.perf_counter()
        forest = copy.deepcopy(st.forest)  # the committed stream keeps the old one whatever add_samples does
        try:
            forest.add_samples(st.rows_matrix(rows_arr), np.array([st.labels[r] for r in rows]))
        except (ValueError, TypeError) as exc:
            raise Refused(f"cannot train on these samples: {exc}") from None
        st.forest = forest
        st.add_training_rows(rows)
        self._later(self.metrics.training_seconds.observe, time.perf_counter() - start)
        return self._publish(st)

    def _control(self, msg: ControlMessage) -> list[dict[str, Any]]:
        st = self._state(msg.stream, create=False)
        if msg.op == "drop":
            self._work[msg.stream] = None
            self._later(self.metrics.stream_dropped, msg.stream)
            return []
        if msg.op == "start" and st.forest is None:
            return self._try_start(st, tell=True, by_fit=True)
        return self._publish(st)  # snapshot, or start of a started stream

    # ------------------------------------------------------------------ outputs

    def _publish(self, st: StreamState) -> list[dict[str, Any]]:
        """Schedule the republication of the scoring set under the current model version.

        It is built by :meth:`process_batches` once the message is applied, chunk by chunk; handlers get no
        records from here.
        """
        rows = st.scoring_rows(self.config.publish)
        if st.forest is not None and rows.size:
            self._pending = (st, st.forest, st.forest.model_version_, rows)
        return []

    def _republication(self, st: StreamState, forest: FeatureStreamForest, version: int,
                       rows: np.ndarray) -> Iterator[records.RecordBatch]:
        """Predictions of ``rows`` chunk by chunk, then their encodings chunk by chunk (the order of one batch)."""

        id_of_row = st.id_array()
        # Binned once, in the predictions' pass, for the encodings' too: a byte per feature and row.
        bins = np.empty((forest.n_features_in_, rows.size), dtype=np.uint8)

        def chunks(step: int) -> Iterator[tuple[list[str], slice]]:
            for a in range(0, rows.size, step):
                part = slice(a, min(a + step, rows.size))
                yield id_of_row[rows[part]].tolist(), part

        for ids, part in chunks(self.chunk_size):
            bins[:, part] = forest.binned(st.rows_matrix(rows[part]))
            X = Binned(bins[:, part])
            if forest.task == "regression":
                yield records.RecordBatch.of_values(st.name, ids, version, forest.predict(X))
            else:
                yield records.RecordBatch.of_predictions(st.name, ids, version, forest.classes_,
                                                         forest.predict_proba(X))
        if self.config.encoding == "none":
            return
        options = self.config.encode_options
        # Entries per sample: one per tree for leaves, at most one per level of each tree for paths.
        per_sample = forest.n_trees_ * (1 if options.leaves_only else (forest.max_depth or ASSUMED_DEPTH) + 1)
        seconds = 0.0
        for ids, part in chunks(max(1, min(self.chunk_size, CHUNK_ENTRIES // max(per_sample, 1)))):
            start = time.perf_counter()
            E = forest.encoder.encode(Binned(bins[:, part]), options)
            seconds += time.perf_counter() - start
            yield records.RecordBatch.of_encodings(st.name, ids, version, E)
        self.metrics.encoding_seconds.observe(seconds)


def _label_type(label: Any) -> str:
    """Booleans, numbers and strings are different label types (True == 1 in Python, not here)."""
    return "bool" if isinstance(label, bool) else "str" if isinstance(label, str) else "number"


def _same(a: Any, b: Any) -> bool:
    if b is None:
        return a is None or (isinstance(a, float) and np.isnan(a))
    return a == b
