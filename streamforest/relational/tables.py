"""Columnar relational tables: what the loader, the converter and the synthetic generator all produce.

A numeric column is a float64 array (NaN = missing); a nominal one is an int32 array of codes (-1 = missing) into
its sorted categories. Keys never appear as strings beyond the target table's ids: every foreign key is stored as
the array of its parent's row indices (-1 when the cell is empty), so that walking a path is integer indexing.
"""

from __future__ import annotations

from collections.abc import Iterator
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


class LookedUpColumn(Column):
    """A column of a table that a many-to-one link reaches (a lookup): each row's value is its parent row's, gathered
    when read (nothing of the child's length is kept). Missing where the link is empty.

    Examples
    --------
    >>> kind = nominal_column("category", np.array(["toys", "food"]))
    >>> c = LookedUpColumn("products.category", kind, np.array([1, -1, 0, 1]))
    >>> c.values.tolist(), c.categories
    ([0, -1, 1, 0], ('food', 'toys'))
    """

    def __init__(self, name: str, source: Column, index: np.ndarray) -> None:
        self.name = name
        self.source = source
        self.index = index
        self.categories = source.categories

    @property
    def values(self) -> np.ndarray:  # type: ignore[override]
        source, missing = self.source.values, -1 if self.nominal else np.nan
        if not source.size:
            return np.full(self.index.size, missing, dtype=source.dtype)
        v = source[np.maximum(self.index, 0)]
        v[self.index < 0] = missing
        return v


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
        self._check_reach()

    def _check_reach(self) -> None:
        below = check_reach(self.target, self._parents(),
                            {name: t.time_column or "time" for name, t in self.tables.items() if t.time is not None})
        for name in below:  # a looked-up name that a column of the table has already
            self._columns_of(name, below)

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
        below = self.below()  # the tables looked up keep every row
        todo = [c for c, _ in self.children(self.target)]
        waited = 0
        while todo:
            name = todo.pop(0)
            if name in kept:
                continue
            t = self.tables[name]
            steps = [lk for lk in t.links if lk.parent in below]
            if any(lk.parent not in kept for lk in steps) and waited <= len(todo):
                todo.append(name)  # a parent is still to do
                waited += 1
                continue
            # every table left waits for another (a link to the table itself, say an order's previous order): the
            # rows stay by the parents kept so far
            waited = 0
            keep = np.zeros(t.n_rows, dtype=bool)
            for lk in steps:
                if lk.parent in kept:
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

    def below(self) -> set[str]:
        """The tables the target reaches down one-to-many links (the ones aggregates run over), the target too."""
        return tables_below(self.target, self._parents())

    def _parents(self) -> dict[str, list[str]]:
        return {name: [lk.parent for lk in t.links] for name, t in self.tables.items()}

    def columns_of(self, table: str) -> dict[str, Column]:
        """``table``'s columns as features see them: its own, then those of the rows its lookups point to, named
        ``parent.column`` (``parent[link].column`` when two links reach the same parent), and theirs in turn.

        Examples
        --------
        >>> cat = nominal_column("category", np.array(["food", "toys"]))
        >>> db = Database({"c": Table("c", 1), "o": Table("o", 3, links=[Link("c_id", "c", np.zeros(3, np.int64)),
        ...                Link("p_id", "p", np.array([1, 0, -1]))]), "p": Table("p", 2, {"category": cat})},
        ...               "c", "y", np.array(["1"]), np.array(["0"]))
        >>> {k: v.values.tolist() for k, v in db.columns_of("o").items()}
        {'p.category': [1, 0, -1]}
        """
        return self._columns_of(table, self.below())

    def _columns_of(self, table: str, below: set[str]) -> dict[str, Column]:
        t = self.tables[table]
        out = dict(t.columns)
        lookups = [lk for lk in t.links if lk.parent not in below]
        for lk in lookups:  # no cycle: check_reach
            twice = sum(1 for other in lookups if other.parent == lk.parent) > 1
            prefix = f"{lk.parent}[{lk.column}]" if twice else lk.parent
            for name, col in self._columns_of(lk.parent, below).items():
                full = f"{prefix}.{name}"
                if full in out:
                    raise ValueError(f"table {table!r}: column {full!r} is named twice (its own, and looked up "
                                     f"through {lk.column!r})")
                out[full] = LookedUpColumn(full, col, lk.index)
        return out


def tables_below(target: str, parents: dict[str, list[str]]) -> set[str]:
    """The target and the tables whose parents lead up to it (``parents``: each table's parent tables)."""
    below, todo = {target}, [target]
    while todo:
        t = todo.pop()
        for child in sorted(name for name, ps in parents.items() if t in ps and name not in below):
            below.add(child)
            todo.append(child)
    return below


def check_reach(target: str, parents: dict[str, list[str]], times: dict[str, str]) -> set[str]:
    """Every table is below the target (its parents lead up to it) or looked up (a parent of one that is, or of
    one looked up); one only looked up has no time (``times``: table -> its time column); lookups make no cycle and
    the target has no parent below it. ``parents``: each table's parent tables (one per link). Returns the tables
    below the target (:func:`tables_below`)."""
    below = tables_below(target, parents)
    for p in parents[target]:
        if p in below:
            raise ValueError(f"the target table {target!r} points to table {p!r}, which is below it (a cycle)")

    def lookups(table: str, chain: tuple[str, ...]) -> Iterator[str]:
        for p in parents[table]:
            if p in below:
                continue
            if p in chain:
                raise ValueError(f"the lookups {' -> '.join((*chain, p))} form a cycle")
            yield p
            yield from lookups(p, (*chain, p))

    looked = {p for t in sorted(below) for p in lookups(t, (t,))}
    for name in sorted(parents):
        if name not in below and name not in looked:
            raise ValueError(f"table {name!r} is neither below the target {target!r} (its parents lead up to it) "
                             "nor looked up by a table that is: no feature could use it")
        if name in looked and name not in below and name in times:
            raise ValueError(f"table {name!r} is only looked up (the target does not reach it down one-to-many "
                             f"links): its time column {times[name]!r} has no cutoff to meet; leave it out of 'time'")
    return below


def _renumber(rows: np.ndarray, n: int) -> np.ndarray:
    """Old row -> new row (-1 for rows left out)."""
    out = np.full(n, -1, dtype=np.int64)
    out[rows] = np.arange(rows.size)
    return out
