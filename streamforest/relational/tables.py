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

    def subset(self, rows: np.ndarray) -> Database:
        """The database restricted to some target rows (in the given order) and the child rows below them.

        A child row stays when one of its parents stays; links to dropped parents become -1.

        Examples
        --------
        >>> from streamforest.relational.synthetic import make_relational
        >>> db = make_relational(n_targets=50, seed=0)
        >>> sub = db.subset(np.array([3, 1]))
        >>> n_orders = int(np.isin(db.tables["order"].links[0].index, [1, 3]).sum())
        >>> sub.ids.tolist(), sub.tables["order"].n_rows == n_orders
        (['3', '1'], True)
        """
        rows = np.asarray(rows, dtype=np.int64)
        new_index = {self.target: _renumber(rows, self.tables[self.target].n_rows)}
        kept = {self.target: rows}
        todo = [c for c, _ in self.children(self.target)]
        while todo:
            name = todo.pop(0)
            if name in kept:
                continue
            t = self.tables[name]
            if any(lk.parent not in kept for lk in t.links):
                todo.append(name)  # a parent is still to do (tables form a DAG below the target)
                continue
            keep = np.zeros(t.n_rows, dtype=bool)
            for lk in t.links:
                keep |= (lk.index >= 0) & (new_index[lk.parent][np.maximum(lk.index, 0)] >= 0)
            kept[name] = np.flatnonzero(keep)
            new_index[name] = _renumber(kept[name], t.n_rows)
            todo += [c for c, _ in self.children(name)]
        tables = {}
        for name, t in self.tables.items():
            r = kept.get(name, np.arange(t.n_rows))
            cols = {c: Column(c, col.values[r], col.categories) for c, col in t.columns.items()}
            links = []
            for lk in t.links:
                idx = lk.index[r]
                if lk.parent in new_index:
                    idx = np.where(idx >= 0, new_index[lk.parent][np.maximum(idx, 0)], -1)
                links.append(Link(lk.column, lk.parent, idx))
            tables[name] = Table(name, r.size, cols, links, None if t.time is None else t.time[r], t.time_column)
        return Database(tables, self.target, self.label, self.ids[rows], self.labels[rows],
                        None if self.cutoff is None else self.cutoff[rows], self.key)

    def children(self, table: str) -> list[tuple[str, str]]:
        """``(child table, foreign-key column)`` pairs pointing at ``table``, in a stable order."""
        return sorted((t.name, lk.column) for t in self.tables.values() for lk in t.links if lk.parent == table)


def _renumber(rows: np.ndarray, n: int) -> np.ndarray:
    """Old row -> new row (-1 for rows left out)."""
    out = np.full(n, -1, dtype=np.int64)
    out[rows] = np.arange(rows.size)
    return out
