"""The state of one stream: its samples, labels, raw feature columns, pending feature parts and its forest.

Raw values are kept for every known sample (training and scoring alike) so that scoring rows can be predicted and
encoded after every model change, and so that a delayed label can move a scoring row into the training set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from streamforest.engine.messages import NUMBER_TYPES, FeatureMessage
from streamforest.forest import FeatureStreamForest
from streamforest.inputs import is_number


class Journal(NamedTuple):
    """What a fork must undo, on :meth:`StreamState.rollback`, in the containers it shares with its parent."""

    #: Samples (ids, index, labels) the parent had: the fork's own are appended after them.
    n_samples: int
    #: Training rows the parent had, and its list of them (the fork may replace its own by a new list).
    n_train: int
    train_rows: list[int]
    #: The parent's label of every row the fork relabelled, from before its first change.
    labels: dict[int, Any]


@dataclass
class StreamState:
    """Everything the engine knows about one stream."""

    name: str
    ids: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    labels: list[Any] = field(default_factory=list)
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    kinds: dict[str, str | None] = field(default_factory=dict)
    pending: dict[str, dict[int, FeatureMessage]] = field(default_factory=dict)
    forest: FeatureStreamForest | None = None
    train_rows: list[int] = field(default_factory=list)
    # A fork's undo journal (None: not a fork, or committed).
    _journal: Journal | None = field(default=None, repr=False, compare=False)

    @property
    def n_samples(self) -> int:
        return len(self.ids)

    @property
    def features(self) -> list[str]:
        return list(self.columns)

    def fork(self) -> StreamState:
        """The state to change while one message is applied: the engine makes it the stream's state once the
        message is applied whole, or calls :meth:`rollback` and keeps this one.

        Per-feature containers (columns, kinds, pending parts) are copied, and column arrays and the forest are
        replaced, never written into. The per-sample containers (ids, index, labels, training rows) would cost
        O(samples) to copy on every message, so they are shared: the fork only appends to them and sets labels
        through :meth:`set_label`, and keeps the :class:`Journal` that :meth:`rollback` undoes.
        """
        child = StreamState(self.name, self.ids, self.index, self.labels, dict(self.columns), dict(self.kinds),
                            dict(self.pending), self.forest, self.train_rows)
        child._journal = Journal(len(self.ids), len(self.train_rows), self.train_rows, {})
        return child

    def commit(self) -> None:
        """This fork is the stream's state now: what it appended stays, and nothing is left to undo."""
        self._journal = None

    def rollback(self) -> None:
        """Undo what this fork did to the containers it shares with the state it was forked from."""
        journal = self._journal
        if journal is None:
            return
        n = journal.n_samples
        for sid in self.ids[n:]:
            del self.index[sid]
        del self.ids[n:]
        del self.labels[n:]
        for row, label in journal.labels.items():
            self.labels[row] = label
        del journal.train_rows[journal.n_train:]
        self._journal = None

    def set_label(self, row: int, label: Any) -> None:
        if self._journal is not None and row < self._journal.n_samples:
            self._journal.labels.setdefault(row, self.labels[row])
        self.labels[row] = label

    def add_training_rows(self, rows: list[int]) -> None:
        self.train_rows.extend(rows)

    def labelled_rows(self) -> list[int]:
        return np.flatnonzero(~self._unlabelled()).tolist()

    def _unlabelled(self) -> np.ndarray:
        """Whether each sample has no label (an elementwise test in numpy, not a loop over the samples)."""
        return np.equal(np.fromiter(self.labels, dtype=object, count=len(self.labels)), None)

    def id_array(self) -> np.ndarray:
        """The sample ids as an object array (to take those of many rows at once)."""
        return np.fromiter(self.ids, dtype=object, count=len(self.ids))

    def scoring_rows(self, policy: str) -> np.ndarray:
        """Rows to republish after a model change: the unlabelled ones, all, or none."""
        if policy == "none":
            return np.zeros(0, dtype=np.int64)
        if policy == "all":
            return np.arange(self.n_samples)
        scored = self._unlabelled()
        scored[np.asarray(self.train_rows, dtype=np.int64)] = False
        return np.flatnonzero(scored)

    def add_rows(self, ids: list[str]) -> None:
        """New samples (unlabelled, all values missing until set); every column is replaced by a longer array."""
        if not ids:
            return
        for sid in ids:
            self.index[sid] = len(self.ids)
            self.ids.append(sid)
            self.labels.append(None)
        grow = len(ids)
        for name, col in self.columns.items():
            filler = np.full(grow, np.nan) if col.dtype.kind == "f" else np.full(grow, None, dtype=object)
            self.columns[name] = np.concatenate([col, filler])

    def set_column(self, name: str, kind: str | None, ids: list[str], values: list[Any]) -> None:
        rows = np.fromiter(map(self.index.__getitem__, ids), dtype=np.int64, count=len(ids))
        # The types first, in one C-level pass (a value per sample); one by one only for what they do not settle.
        numeric = kind != "nominal" and (set(map(type, values)) <= NUMBER_TYPES
                                         or all(v is None or is_number(v, numpy=False) for v in values))
        if numeric:
            col = np.full(self.n_samples, np.nan)
            col[rows] = np.array(values, dtype=np.float64)  # a null becomes NaN
        else:
            col = np.full(self.n_samples, None, dtype=object)
            col[rows] = np.array(values, dtype=object)
            kind = "nominal"
        self.columns[name] = col
        self.kinds[name] = kind

    def matches(self, name: str, ids: tuple[str, ...] | list[str], values: tuple | list, whole: bool) -> bool:
        """Whether these (id, value) pairs are what the stored column holds (1 and 1.0 are the same value);
        for a ``whole`` column, also that it holds no other present value."""
        col = self.columns[name]
        rows = np.fromiter((self.index[i] for i in ids), dtype=np.int64, count=len(ids))
        if whole:
            present = np.count_nonzero(~np.isnan(col)) if col.dtype.kind == "f" else sum(v is not None for v in col)
            if present != sum(v is not None for v in values):
                return False
        if col.dtype.kind == "f":
            if any(isinstance(v, (str, bool)) for v in values):
                return False
            given = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
            stored = col[rows]
            return bool(np.all((given == stored) | (np.isnan(given) & np.isnan(stored))))
        return all(a == b or (a is None and b is None) for a, b in zip(col[rows].tolist(), values, strict=True))

    def rows_matrix(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The raw values of these rows, by feature name (the forest's mapping input)."""
        return {name: col[rows] for name, col in self.columns.items()}
