"""Columnar relational tables: what the loader, the converter and the synthetic generator all produce.

A numeric column is a float64 array (NaN = missing); a nominal one is an int32 array of codes (-1 = missing) into
its sorted categories. Keys never appear as strings beyond the target table's ids: every foreign key is stored as
the array of its parent's row indices (-1 when the cell is empty), so that walking a path is integer indexing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Column:
    """One data column of a table.

    Examples
    --------
    >>> c = nominal_column("element", np.array(["c", "o", "", "c"]))
    >>> c.categories, c.values.tolist(), c.nominal
    (('c', 'o'), [0, 1, -1, 0], True)
    """

    name: str
    values: np.ndarray
    categories: tuple[str, ...] | None = None

    @property
    def nominal(self) -> bool:
        return self.categories is not None

    def missing(self) -> np.ndarray:
        return self.values < 0 if self.nominal else np.isnan(self.values)


def nominal_column(name: str, cells: np.ndarray) -> Column:
    """Codes of text cells (empty = missing) into their sorted distinct values."""
    cells = np.asarray(cells, dtype=str)
    cats, codes = np.unique(cells, return_inverse=True)
    codes = codes.astype(np.int32)
    if cats.size and cats[0] == "":
        codes -= 1
        cats = cats[1:]
    return Column(name, codes.reshape(-1), tuple(str(c) for c in cats))


@dataclass
class Link:
    """A foreign key: ``column`` of the child table points to a row of ``parent`` (``index``; -1 = no parent)."""

    column: str
    parent: str
    index: np.ndarray


@dataclass
class Table:
    """A table: data columns, its links to parent tables and, optionally, a time column (float, NaN = unknown)."""

    name: str
    n_rows: int
    columns: dict[str, Column] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    time: np.ndarray | None = None
    time_column: str | None = None

    def link(self, column: str) -> Link:
        for lk in self.links:
            if lk.column == column:
                return lk
        raise KeyError(f"table {self.name!r} has no foreign key {column!r}")


@dataclass
class Database:
    """Tables around one target table whose rows are the samples to learn and score.

    ``ids`` are the target rows' keys (strings, unique); ``labels`` the label cells as given (``""`` = unlabelled);
    ``cutoff`` (float, NaN = none) the time up to which a target row may look at child rows.
    """

    tables: dict[str, Table]
    target: str
    label: str
    ids: np.ndarray
    labels: np.ndarray
    cutoff: np.ndarray | None = None
    key: str = "id"

    def __post_init__(self) -> None:
        t = self.tables[self.target]
        if len(self.ids) != t.n_rows or len(self.labels) != t.n_rows:
            raise ValueError(f"target table {self.target!r}: ids and labels must have one entry per row")
        for tab in self.tables.values():
            for lk in tab.links:
                if lk.parent not in self.tables:
                    raise ValueError(f"table {tab.name!r}: column {lk.column!r} points to unknown table {lk.parent!r}")
                if lk.index.shape != (tab.n_rows,):
                    raise ValueError(f"table {tab.name!r}: link {lk.column!r} needs one parent index per row")
                if lk.index.size and lk.index.max() >= self.tables[lk.parent].n_rows:
                    raise ValueError(f"table {tab.name!r}: link {lk.column!r} points past table {lk.parent!r}")

    @property
    def labelled(self) -> np.ndarray:
        """Mask of the target rows with a label (the only ones learning and selection may look at)."""
        return self.labels != ""

    def label_values(self) -> list:
        """Labels for the engine: integers, floats or strings as the cells read; ``None`` for unlabelled rows."""
        cells = self.labels.tolist()
        given = [c for c in cells if c != ""]
        for cast in (int, float):
            try:
                [cast(c) for c in given]
            except ValueError:
                continue
            return [cast(c) if c != "" else None for c in cells]
        return [c if c != "" else None for c in cells]

    def children(self, table: str) -> list[tuple[str, str]]:
        """``(child table, foreign-key column)`` pairs pointing at ``table``, in a stable order."""
        return sorted((t.name, lk.column) for t in self.tables.values() for lk in t.links if lk.parent == table)
