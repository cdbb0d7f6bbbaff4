"""The candidate space over a schema graph: features as small expressions, their definitions, their values.

A feature is one of

* :class:`Attribute` -- a column of the target table itself: ``molecule.logp``;
* :class:`Aggregate` -- a reduction of a child column (or of an inner aggregate, or a count) along a path of
  one-to-many steps, optionally over the rows meeting a :class:`Condition`:
  ``MEAN(atom.charge WHERE atom.element = 'o')``, ``COUNT(atom.bond WHERE bond.bond_type = 7)``,
  ``MEAN(atom.MAX(bond.charge))`` (an aggregate of aggregates); in the extended space (:class:`Generator`'s
  ``extended``) also ``SHARE(atom WHERE atom.element = 'n')`` (the proportion of the rows meeting the condition),
  ``SKEW(atom.charge)`` and ``COUNT(atom WHERE atom.element = 'c' AND atom.charge > 0.1)`` (a conjunction of two
  conditions on different columns, RelF's and Aleph's conjunctive literals);
* :class:`Combination` -- an FCTree operator on accepted features: ``SQRT(a)``, ``(a)^2``, ``(a + b)``,
  ``(a - b)``, ``(a * b)``, ``EXP(-(a - b)^2)``, and (extended) the ratio ``(a / b)``.

Its :func:`definition` is canonical and human-readable; :func:`feature_name` derives the stable name the engine
sees. :class:`Generator` enumerates the space lazily as *families* (path, function, column, condition column) whose
members differ by condition values, and computes values for every target row, time-safe when the target has a
cutoff. The full feature matrix is never built.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Union

import numpy as np
from scipy.stats import norm as normal

from streamforest.relational import aggregates as agg
from streamforest.relational.tables import Database, LookedUpColumn, Table

#: Integer-valued numeric columns with at most this many distinct values also give ``=`` conditions.
MAX_LEVELS = 64
#: Family-wise rate at which a column of values unrelated to the label contributes a label-chosen ``=`` value.
ALPHA = 0.05
#: Labelled target rows a value must be present for to be tested for association with the label.
MIN_SUPPORT = 5
#: A label of more distinct values than this, all numbers, is tested as a number (else class by class).
MAX_CLASSES = 20
#: Quantiles tried when a ``>`` threshold is learned.
THRESHOLD_QUANTILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
OPERATORS = ("sqrt", "square", "add", "sub", "mul", "rbf")
#: Operators of the extended space (see :class:`Generator`'s ``extended``).
EXTENDED_OPERATORS = ("div",)
MAX_NAME = 200
#: Looked-up columns kept gathered (see :meth:`Generator._read`): a learned threshold reads its column once per
#: quantile tried; more would keep more arrays of a child table's length alive.
GATHERED = 2


@dataclass(frozen=True)
class Step:
    """One step down a one-to-many link: the rows of ``child`` whose ``column`` points at the current table."""

    child: str
    column: str
    qualify: bool = False  # several links join the same two tables: name the column

    def __str__(self) -> str:
        return f"{self.child}[{self.column}]" if self.qualify else self.child


@dataclass(frozen=True)
class Condition:
    """Rows whose ``column`` is ``= value`` (a category, or a level of an integer column) or ``> value``, and,
    when ``also`` is given, meet that condition on another column too (a conjunction).

    ``value`` None is a threshold still to be learned (see :meth:`Generator.learn`).
    """

    column: str
    op: str
    value: str | float | None = None
    also: Condition | None = None


@dataclass(frozen=True)
class Attribute:
    column: str


@dataclass(frozen=True)
class Aggregate:
    func: str
    path: tuple[Step, ...]
    column: str | None = None
    inner: Aggregate | None = None
    where: Condition | None = None


@dataclass(frozen=True)
class Combination:
    op: str
    a: Feature
    b: Feature | None = None


Feature = Union[Attribute, Aggregate, Combination]  # noqa: UP007 (a runtime alias: py3.10 cannot | strings)


@dataclass(frozen=True)
class Family:
    """Features differing only by the values of their conditions (and by the inner member of a nested one)."""

    kind: str  # "attribute", "aggregate" or "nested"
    path: tuple[Step, ...] = ()
    func: str = ""
    column: str | None = None
    cond: tuple[str, str] | None = None  # (column, "=" or ">")
    inner: Family | None = None
    cond2: tuple[str, str] | None = None  # a second condition, on another column (a conjunction)

    def facets(self) -> tuple[str, ...]:
        """What the policy's arms are about: path, function, column, condition (and the inner ones)."""
        path = ".".join(map(str, self.path))
        out = (f"kind={self.kind}", f"path={path}", f"func={self.func}",
               f"column={path}.{self.column}" if self.column else "column=", f"cond={_cond_facet(self.cond, path)}")
        if self.cond2 is not None:
            out += (f"and={_cond_facet(self.cond2, path)}",)
        if self.inner is not None:
            out += tuple(f"inner.{f}" for f in self.inner.facets()[1:])
        return out

    def __str__(self) -> str:
        return " ".join(self.facets())


def _cond_facet(cond: tuple[str, str] | None, path: str) -> str:
    return "" if cond is None else f"{path.split('.')[-1]}.{cond[0]}{cond[1]}"


def _quote(v: str | float) -> str:
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return _number(v)


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else f"{v:.6g}"


def definition(f: Feature, target: str = "") -> str:
    """The canonical definition of a feature.

    Examples
    --------
    >>> atom, bond = Step("atom", "molecule_id"), Step("bond", "atom_id")
    >>> definition(Aggregate("mean", (atom,), "charge", where=Condition("element", "=", "o")))
    "MEAN(atom.charge WHERE atom.element = 'o')"
    >>> definition(Aggregate("mean", (atom,), inner=Aggregate("count", (bond,), where=Condition("charge", ">", 0.25))))
    'MEAN(atom.COUNT(bond WHERE bond.charge > 0.25))'
    >>> definition(Combination("rbf", Attribute("logp"), Attribute("lumo")), "molecule")
    'EXP(-(molecule.logp - molecule.lumo)^2)'
    >>> definition(Aggregate("share", (atom,), where=Condition("element", "=", "c", Condition("charge", ">", 0.1))))
    "SHARE(atom WHERE atom.element = 'c' AND atom.charge > 0.1)"
    """
    if isinstance(f, Attribute):
        return f"{target}.{f.column}" if target else f.column
    if isinstance(f, Combination):
        a = definition(f.a, target)
        if f.op == "sqrt":
            return f"SQRT({a})"
        if f.op == "square":
            return f"({a})^2"
        b = definition(f.b, target)
        if f.op == "rbf":
            return f"EXP(-({a} - {b})^2)"
        return f"({a} {dict(add='+', sub='-', mul='*', div='/')[f.op]} {b})"
    path = ".".join(map(str, f.path))
    if f.inner is not None:
        arg = f"{path}.{definition(f.inner)}"
    elif f.column is not None:
        arg = f"{path}.{f.column}"
    else:
        arg = path
    c = f.where
    while c is not None:
        value = "?" if c.value is None else _quote(c.value)
        arg += f" {'WHERE' if c is f.where else 'AND'} {f.path[-1]}.{c.column} {c.op} {value}"
        c = c.also
    return f"{f.func.upper()}({arg})"


def feature_name(defn: str) -> str:
    """The engine's name of a feature: its definition, or a cut of it and a hash when it is too long.

    >>> feature_name("MEAN(atom.charge)")
    'MEAN(atom.charge)'
    >>> len(feature_name("X" * 500))
    200
    """
    if len(defn) <= MAX_NAME:
        return defn
    return defn[: MAX_NAME - 17] + "~" + hashlib.sha1(defn.encode()).hexdigest()[:16]


def _unlearned(c: Condition | None) -> bool:
    return c is not None and (c.value is None or _unlearned(c.also))


def has_placeholder(f: Feature) -> bool:
    if isinstance(f, Aggregate):
        return _unlearned(f.where) or (f.inner is not None and has_placeholder(f.inner))
    if isinstance(f, Combination):
        return has_placeholder(f.a) or (f.b is not None and has_placeholder(f.b))
    return False


class Generator:
    """The candidate space of a database and the values of its members.

    Parameters
    ----------
    db
        The tables.
    max_depth
        Longest path of one-to-many steps below the target (an aggregate of aggregates counts both paths).
    max_values
        Most ``=`` condition values per condition column (the most frequent ones).
    extended
        Also the share of rows meeting a condition, the skewness, conjunctions of two conditions, and (for a
        policy over this space) the ratio of two accepted features. Off by default: on Mutagenesis they did not
        raise the loop's figures on fold protocols they were not chosen on (docs/relational.md has the
        measurements).

    Examples
    --------
    >>> from streamforest.relational.synthetic import make_relational
    >>> db = make_relational(n_targets=50, seed=0)
    >>> g = Generator(db)
    >>> fams = list(g.families())
    >>> len(fams) > 10, fams[0].kind
    (True, 'attribute')
    >>> f = next(g.members(fams[-1]))
    >>> g.values(g.learn(f, lambda v: float(np.nanstd(v)))).shape
    (50,)
    """

    def __init__(self, db: Database, max_depth: int = 2, max_values: int = 24, extended: bool = False) -> None:
        self.db = db
        self.extended = extended
        self.max_depth = max_depth
        self.max_values = max_values
        self._alive: dict[tuple[Step, ...], np.ndarray] = {}
        self._index: dict[tuple[tuple[Step, ...], int], tuple[np.ndarray, np.ndarray]] = {}
        self._levels: dict[tuple[str, str], list] = {}
        self._chosen: dict[tuple[str, str], list] = {}
        self._cuts: dict[tuple[str, str], list[Condition]] = {}
        self._views: dict[str, Table] = {}
        self._gathered: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    # ------------------------------------------------------------------ the space

    def paths(self, table: str | None = None, depth: int | None = None) -> Iterator[tuple[Step, ...]]:
        """Paths of one-to-many steps below ``table`` (the target), up to ``depth`` steps, no table twice."""
        table = table or self.db.target
        depth = self.max_depth if depth is None else depth

        def walk(t: str, prefix: tuple[Step, ...], seen: frozenset[str]) -> Iterator[tuple[Step, ...]]:
            if len(prefix) >= depth:
                return
            kids = self.db.children(t)
            for child, col in kids:
                if child in seen:
                    continue
                qualify = sum(1 for c, _ in kids if c == child) > 1
                p = (*prefix, Step(child, col, qualify))
                yield p
                yield from walk(child, p, seen | {child})

        yield from walk(table, (), frozenset({table}))

    def conditions(self, table: Table) -> list[tuple[str, str] | None]:
        out: list[tuple[str, str] | None] = [None]
        for name, col in sorted(table.columns.items()):
            if self.levels(table, name):
                out.append((name, "="))
            if col.nominal:
                continue
            values = self._read(table, name)
            if np.unique(values[~np.isnan(values)]).size > 2:
                out.append((name, ">"))
        return out

    def levels(self, table: Table, column: str) -> list[str | float]:
        """``=`` condition values of a column; [] if it gives none.

        First the values whose presence below a target row goes with its label beyond chance (see
        :meth:`_associated`), most significant first; then the ``max_values`` most frequent (ties by value). A
        category planted among a thousand equally frequent ones is in the space this way, where frequency alone
        would leave it out.
        """
        key = (table.name, column)
        if key not in self._levels:
            col = table.columns[column]
            values = self._read(table, column)
            if col.nominal:
                codes, names = values, list(col.categories)
            else:
                finite = ~np.isnan(values)
                u, inverse = np.unique(values[finite], return_inverse=True)
                if u.size > MAX_LEVELS or u.size < 2 or not np.all(np.mod(u, 1) == 0):
                    u = u[:0]
                codes = np.full(values.size, -1, dtype=np.int64)
                codes[finite] = inverse if u.size else -1
                names = [float(v) for v in u]
            counts = np.bincount(codes[codes >= 0], minlength=len(names))
            frequent = [i for i in np.lexsort((np.arange(counts.size), -counts)) if counts[i] > 0]
            vals: list = []
            associated: list[int] = []
            if len(frequent) > 1:
                associated = self._associated(table, codes, len(names))[: self.max_values]
                chosen = set(associated)
                vals = [names[i] for i in associated]
                vals += [names[i] for i in frequent[: self.max_values] if i not in chosen]
            self._chosen[key] = vals[: len(associated)]
            self._levels[key] = vals
        return self._levels[key]

    def _associated(self, table: Table, codes: np.ndarray, k: int) -> list[int]:
        """Codes whose presence below a labelled target row goes with its label, most significant first.

        For each value, the labelled target rows with at least one visible row of that value on the shortest path
        to ``table`` (time-safe: the rows a feature may see) are compared with all labelled rows: the number of each
        class among them (or the sum of a numeric label of more than :data:`MAX_CLASSES` values) against what a
        random draw of as many rows gives (hypergeometric variance). Kept: values whose largest ``|z|`` passes
        Bonferroni's bound for ``ALPHA`` over the values tried, so that a column of values unrelated to the label
        adds a value with probability at most ``ALPHA``: the choice looks at the labels, and a value chosen for a
        chance association would otherwise look useful on those same rows.
        """
        path = min((p for p in self.paths() if p[-1].child == table.name), key=len, default=None)
        labelled = self.db.labelled
        if path is None or k < 2 or labelled.sum() < 4:
            return []
        owner = self._up(path, 0)
        keep = self._visible(path) & (owner >= 0) & (codes >= 0)
        keep[keep] = labelled[owner[keep]]
        if not keep.any():
            return []
        pairs = np.unique(owner[keep].astype(np.int64) * k + codes[keep])
        who, what = pairs // k, pairs % k
        n_v = np.bincount(what, minlength=k).astype(np.float64)
        cells = self.db.labels[labelled]
        n = float(cells.size)
        y_all = _label_columns(cells)
        y_rows = np.zeros((self.db.labels.size, y_all.shape[1]))
        y_rows[labelled] = y_all
        z = np.zeros(k)
        tried = n_v >= MIN_SUPPORT
        if not tried.any():
            return []
        with np.errstate(invalid="ignore", divide="ignore"):
            for j in range(y_all.shape[1]):
                y = y_all[:, j]
                mean, var = float(y.mean()), float(y.var())
                s_v = np.bincount(what, weights=y_rows[who, j], minlength=k)
                sd = np.sqrt(n_v * var * (n - n_v) / max(n - 1.0, 1.0))
                z = np.maximum(z, np.nan_to_num(np.abs(s_v - n_v * mean) / sd))
        bound = float(normal.isf(ALPHA / (2.0 * tried.sum())))
        hits = np.flatnonzero(tried & (z > bound))
        return [int(i) for i in hits[np.lexsort((hits, -z[hits]))]]

    def table(self, name: str) -> Table:
        """The table as the candidates see it: its columns and those its lookups reach
        (:meth:`Database.columns_of`)."""
        if name not in self._views:
            t = self.db.tables[name]
            self._views[name] = replace(t, columns=self.db.columns_of(name))
        return self._views[name]

    def _table(self, path: tuple[Step, ...]) -> Table:
        return self.table(path[-1].child if path else self.db.target)

    def _read(self, t: Table, column: str) -> np.ndarray:
        """A column's values; the last :data:`GATHERED` looked-up ones are kept gathered."""
        col = t.columns[column]
        if not isinstance(col, LookedUpColumn):
            return col.values
        key = (t.name, column)
        if key in self._gathered:
            self._gathered.move_to_end(key)
        else:
            self._gathered[key] = col.values
            if len(self._gathered) > GATHERED:
                self._gathered.popitem(last=False)
        return self._gathered[key]

    def families(self) -> Iterator[Family]:
        """Every family up to ``max_depth``, in a fixed order: attributes, then per path flat (conjunctions last),
        then nested."""
        for name in sorted(self.table(self.db.target).columns):
            yield Family("attribute", column=name)
        yield from self._aggregate_families((), self.max_depth, nested=True)

    def _aggregate_families(self, prefix: tuple[Step, ...], depth: int, nested: bool) -> Iterator[Family]:
        owner = self._table(prefix)
        for path in self.paths(owner.name, depth):
            t = self._table(path)
            conds = self.conditions(t)
            for func, name in self._reductions(t):
                for cond in conds:
                    if func == "share" and cond is None:  # the share of all rows is 1
                        continue
                    if name is None or cond is None or cond[0] != name:
                        yield Family("aggregate", path, func, name, cond)
            # rows meeting two conditions; not inside aggregates of aggregates, whose space they would square
            if not prefix and self.extended:
                for cond, cond2 in _conjunctions(conds):
                    for func in agg.ROWS:
                        yield Family("aggregate", path, func, None, cond, cond2=cond2)
            if nested and len(path) < depth:
                for inner in self._aggregate_families(path, depth - len(path), nested=False):
                    for func in agg.OUTER:
                        for cond in conds:
                            yield Family("nested", path, func, None, cond, inner)

    def _reductions(self, t: Table) -> Iterator[tuple[str, str | None]]:
        """The (function, column) pairs a flat aggregate over ``t`` can be: the count and share of the rows, then
        each column's."""
        yield "count", None
        if self.extended:
            yield "share", None
        for name, col in sorted(t.columns.items()):
            for func in agg.NOMINAL if col.nominal else agg.NUMERIC:
                if func == "skew" and not self.extended:
                    continue
                if func in ("first", "last") and t.time is None:
                    continue
                if func == "nunique" and not col.nominal and not self.levels(t, name):
                    continue
                yield func, name

    def associated(self, table: Table, column: str) -> list[str | float]:
        """The ``=`` values of a column chosen for their association with the label (the first of :meth:`levels`)."""
        self.levels(table, column)
        return self._chosen[(table.name, column)]

    def siblings(self, path: tuple[Step, ...], where: Condition) -> Iterator[Aggregate]:
        """Every flat aggregate over ``path`` restricted to the rows ``where`` selects: the count and each other
        column's functions (members of as many families, one per function and column)."""
        for func, name in self._reductions(self._table(path)):
            if name != where.column:
                yield Aggregate(func, path, name, where=where)

    def members(self, family: Family) -> Iterator[Feature]:
        """The family's features, lazily; a ``>`` condition is a placeholder to :meth:`learn`."""
        if family.kind == "attribute":
            yield Attribute(family.column)
            return
        t = self._table(family.path)
        if family.cond is None:
            wheres: list[Condition | None] = [None]
        elif family.cond[1] == ">":
            wheres = [Condition(family.cond[0], ">")]
        else:
            wheres = [Condition(family.cond[0], "=", v) for v in self.levels(t, family.cond[0])]
        if family.cond2 is not None:
            column, op = family.cond2
            seconds = [Condition(column, ">")] if op == ">" else [Condition(column, "=", v)
                                                                  for v in self.levels(t, column)]
            # by the sum of the two values' ranks: the first members pair the first values of both columns (the ones
            # chosen for the label, then the most frequent), not the first value of one with every value of the other
            pairs = sorted(itertools.product(range(len(wheres)), range(len(seconds))), key=lambda ij: (sum(ij), ij))
            wheres = [replace(wheres[i], also=seconds[j]) for i, j in pairs]
        inners: Iterator = self.members(family.inner) if family.inner is not None else iter([None])
        for inner, where in itertools.product(inners, wheres):
            yield Aggregate(family.func, family.path, family.column, inner, where)

    # ------------------------------------------------------------------ values

    def values(self, f: Feature) -> np.ndarray:
        """The feature's value for every target row (float64, NaN = missing)."""
        if isinstance(f, Attribute):
            col = self.table(self.db.target).columns[f.column]
            return col.values.astype(np.float64) if not col.nominal else np.where(col.values < 0, np.nan,
                                                                                    col.values.astype(np.float64))
        if isinstance(f, Combination):
            return combine(f.op, self.values(f.a), None if f.b is None else self.values(f.b))
        if has_placeholder(f):
            raise ValueError(f"{definition(f)} has a threshold still to learn (Generator.learn)")
        return self._aggregate(f, ())

    def is_nominal(self, f: Feature) -> bool:
        return isinstance(f, Attribute) and self.table(self.db.target).columns[f.column].nominal

    def learn(self, f: Feature, score: Callable[[np.ndarray], float]) -> Feature:
        """Fill each threshold placeholder with the quantile of its column whose feature ``score`` rates best.

        ``score`` sees only the values (the caller decides which rows and labels it looks at); ties go to the
        lower quantile, so the result is deterministic.
        """
        if not isinstance(f, Aggregate) or not has_placeholder(f):
            return f
        if f.inner is not None and has_placeholder(f.inner):
            # the inner threshold first, scored through the outer aggregate (without its own condition yet)
            probe = replace(f, where=None) if f.where is not None and f.where.value is None else f
            options = [replace(probe, inner=replace(f.inner, where=c)) for c in self._thresholds(f.path, f.inner)]
            f = replace(f, inner=self._best(options, score).inner)
        if f.where is not None and f.where.value is None:
            options = [replace(f, where=replace(c, also=f.where.also)) for c in self._thresholds((), f)]
            f = self._best(options, score)
        if f.where is not None and _unlearned(f.where.also):
            # among the rows the first condition selects: the charge of oxygen atoms has other quantiles than all
            # atoms' charge
            options = [replace(f, where=replace(f.where, also=c)) for c in self._thresholds((), f, f.where)]
            f = self._best(options, score)
        return f

    def fillings(self, f: Feature) -> list[Feature]:
        """Every feature :meth:`learn` can make of ``f``: each threshold placeholder filled with each quantile it
        tries (all of them, not the best: an exhaustive look at the space, such as an oracle study's).

        >>> from streamforest.relational.synthetic import make_relational
        >>> g = Generator(make_relational(n_targets=50, seed=0))
        >>> fam = next(f for f in g.families() if f.cond is not None and f.cond[1] == ">" and f.inner is None)
        >>> [has_placeholder(x) for x in g.fillings(next(g.members(fam)))][:2], len(g.fillings(next(g.members(fam))))
        ([False, False], 9)
        """
        if not isinstance(f, Aggregate) or not has_placeholder(f):
            return [f]
        if f.inner is not None and has_placeholder(f.inner):
            return [x for c in self._thresholds(f.path, f.inner)
                    for x in self.fillings(replace(f, inner=replace(f.inner, where=c)))]
        if f.where is not None and f.where.value is None:
            return [x for c in self._thresholds((), f)
                    for x in self.fillings(replace(f, where=replace(c, also=f.where.also)))]
        return [replace(f, where=replace(f.where, also=c)) for c in self._thresholds((), f, f.where)]

    def forget_indexes(self) -> None:
        """Drop the cached row indexes and visibility of the paths (made again when a value asks for them)."""
        self._alive.clear()
        self._index.clear()
        self._gathered.clear()

    def _thresholds(self, prefix: tuple[Step, ...], f: Aggregate, within: Condition | None = None) -> list[Condition]:
        """The thresholds tried for ``f``'s condition (or, ``within`` given, for the second condition of that
        conjunction): the deciles of its column (among the rows ``within`` selects)."""
        t = self._table((*prefix, *f.path))
        column = f.where.column if within is None else within.also.column
        key = (t.name, column) if within is None else (t.name, column, within.column, within.op, within.value)
        if key not in self._cuts:  # a column's quantiles, once: they do not depend on the candidate
            x = self._read(t, column)
            if within is not None:
                values, op, value = self._condition(t, replace(within, also=None))
                x = x[values == value if op == agg.EQUAL else values > value]
            x = x[~np.isnan(x)]
            qs = np.unique(np.quantile(x, THRESHOLD_QUANTILES)) if x.size else np.zeros(1)
            self._cuts[key] = [Condition(column, ">", float(_number(q))) for q in qs]
        return self._cuts[key]

    def _best(self, options: list[Aggregate], score: Callable[[np.ndarray], float]) -> Aggregate:
        scores = [score(self._aggregate(o, ())) for o in options]
        return options[int(np.argmax(np.nan_to_num(scores, nan=-np.inf)))]

    def _up(self, path: tuple[Step, ...], level: int) -> np.ndarray:
        """For each row of the path's last table: its row in the table ``level`` steps below the target (-1 when a
        link on the way is empty). Not kept: only the time filter and the indexes need it, once each."""
        index = self._table(path).link(path[-1].column).index
        if level == len(path) - 1:
            return index
        up = self._up(path[:-1], level)
        return np.where(index >= 0, up[np.maximum(index, 0)], -1)

    def _visible(self, path: tuple[Step, ...]) -> np.ndarray:
        """Whether each row of the path's last table is linked all the way up and, with a cutoff, neither it nor a
        row above it on the path is after the target row's cutoff (an unknown time is after every cutoff)."""
        if path in self._alive:
            return self._alive[path]
        t = self._table(path)
        if not path:
            alive = np.ones(t.n_rows, dtype=bool)
        else:
            index = t.link(path[-1].column).index
            linked = index >= 0
            alive = linked & self._visible(path[:-1])[np.maximum(index, 0)]
            if self.db.cutoff is not None and t.time is not None:
                cut = self.db.cutoff[np.maximum(self._up(path, 0), 0)]
                # rows from after the cutoff, or with an unknown time, are invisible (NaN compares False)
                alive &= np.isnan(cut) | (t.time <= cut)
        self._alive[path] = alive
        return alive

    def _grouping(self, path: tuple[Step, ...], level: int) -> tuple[np.ndarray, np.ndarray]:
        """The row index of the path's visible rows by their row ``level`` steps below the target: built once per
        path and level, shared by every candidate over it."""
        key = (path, level)
        if key not in self._index:
            owner = np.arange(self._table(path).n_rows) if level == len(path) else self._up(path, level)
            owner = np.where(self._visible(path), owner, -1)
            self._index[key] = agg.index(owner, self._table(path[:level]).n_rows)
        return self._index[key]

    def _aggregate(self, f: Aggregate, prefix: tuple[Step, ...]) -> np.ndarray:
        full = (*prefix, *f.path)
        starts, rows = self._grouping(full, len(prefix))
        t = self._table(full)
        cond, op, threshold = None, agg.NO_CONDITION, 0.0
        second: dict = {}
        if f.where is not None:
            cond, op, threshold = self._condition(t, f.where)
            if f.where.also is not None:
                second = dict(zip(("cond2", "op2", "threshold2"), self._condition(t, f.where.also), strict=True))
        if f.func in agg.ROWS:
            return agg.reduce_index(f.func, starts, rows, cond=cond, op=op, threshold=threshold, **second)
        if f.inner is not None:
            x, nominal = self._aggregate(f.inner, full), False
        else:
            x, nominal = self._read(t, f.column), t.columns[f.column].nominal
        times = t.time if f.func in ("first", "last") else None
        return agg.reduce_index(f.func, starts, rows, x, nominal, cond, op, threshold, times, **second)

    def _condition(self, t: Table, c: Condition) -> tuple[np.ndarray, int, float]:
        """The condition as the kernel reads it: the column, the operator and the value (a category's code)."""
        col = t.columns[c.column]
        if col.nominal:
            if c.op != "=":
                raise ValueError(f"{t.name}.{c.column} is nominal: only '=' conditions")
            code = col.categories.index(str(c.value)) if str(c.value) in col.categories else -2  # -2: no row
            return self._read(t, c.column), agg.EQUAL, float(code)
        return self._read(t, c.column), agg.EQUAL if c.op == "=" else agg.GREATER, float(c.value)


def _conjunctions(conds: list[tuple[str, str] | None]) -> Iterator[tuple[tuple[str, str], tuple[str, str]]]:
    """Pairs of condition columns a conjunction takes: an ``=`` condition first, then a ``>`` one on another column
    (its threshold learned among the first one's rows) or an ``=`` one on a column later in name order (the same
    pair of ``=`` columns once).

    >>> list(_conjunctions([None, ("a", "="), ("a", ">"), ("b", "="), ("c", ">")]))
    [(('a', '='), ('b', '=')), (('a', '='), ('c', '>')), (('b', '='), ('a', '>')), (('b', '='), ('c', '>'))]
    """
    for c1 in conds:
        if c1 is None or c1[1] != "=":
            continue
        for c2 in conds:
            if c2 is not None and c2[0] != c1[0] and (c2[1] == ">" or c1[0] < c2[0]):
                yield c1, c2


def _label_columns(cells: np.ndarray) -> np.ndarray:
    """Labels as columns to test against: one indicator per class (one for two classes), or the number itself.

    >>> _label_columns(np.array(["a", "b", "a"])).tolist()
    [[0.0], [1.0], [0.0]]
    """
    classes, inverse = np.unique(cells, return_inverse=True)
    if classes.size > MAX_CLASSES:
        try:
            return cells.astype(np.float64)[:, None]
        except ValueError:
            pass
    onehot = (inverse[:, None] == np.arange(classes.size)[None, :]).astype(np.float64)
    return onehot[:, 1:] if classes.size == 2 else onehot


def combine(op: str, a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """FCTree's operators (Fan et al., 2010) and the ratio; ``sqrt`` keeps the sign: sign(a) * sqrt(|a|); a ratio
    to zero is missing.

    >>> combine("rbf", np.array([1.0, 2.0]), np.array([1.0, 0.0])).tolist()
    [1.0, 0.01831563888873418]
    """
    with np.errstate(over="ignore", invalid="ignore"):
        if op == "sqrt":
            return np.sign(a) * np.sqrt(np.abs(a))
        if op == "square":
            return a * a
        if b is None:
            raise ValueError(f"{op} needs two features")
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "div":  # no ratio to a zero (trees would see an infinity as a value)
            return np.where(b == 0, np.nan, a / np.where(b == 0, 1.0, b))
        if op == "rbf":
            return np.exp(-((a - b) ** 2))
    raise ValueError(f"unknown operator {op!r} (expected one of {OPERATORS + EXTENDED_OPERATORS})")
