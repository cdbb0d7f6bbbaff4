"""``schema.json`` plus CSV or Parquet tables -> a validated :class:`~streamforest.relational.tables.Database`.

The format (the contract other tools write)::

    {"target": {"table": "molecule", "label": "mutagenic", "cutoff": null},
     "tables": {"molecule": {"path": "molecule.csv", "key": "molecule_id"},
                "atom": {"path": "atom.csv", "key": "atom_id",
                         "parents": [{"table": "molecule", "column": "molecule_id"}]},
                "bond": {"path": "bond.csv", "parents": [{"table": "atom", "column": "atom_id"}],
                         "time": null, "nominal": ["bond_type"]}}}

Paths are relative to the schema file. A path ending in ``.parquet`` or ``.pq`` is read with pyarrow (the
``parquet`` extra); any other as CSV. Both become the same in-memory columns: a file is first read into
per-column cells (:mod:`streamforest.relational.readers`), and one step turns cells into
keys, links, columns and times whatever the file was. Everything is checked before anything is returned: a bad
schema or a bad table raises :class:`ValueError` naming the table, the column and the row (the CSV line), and
nothing half-built escapes.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamforest.relational.readers import RawTable, arrow_modules, read_table
from streamforest.relational.tables import Database, Link, Table, check_reach

SCHEMA_FIELDS = {"target", "tables"}
TARGET_FIELDS = {"table", "label", "cutoff"}
TABLE_FIELDS = {"path", "key", "parents", "time", "nominal", "columns"}
PARENT_FIELDS = {"table", "column"}


def load_schema(path: str | Path) -> Database:
    """Read ``schema.json`` and its tables.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "m.csv").write_text("mid,y,w\\na,1,0.5\\nb,0,\\nc,,2\\n")
    >>> _ = (d / "atom.csv").write_text("mid,el\\na,c\\na,o\\nb,c\\n")
    >>> _ = (d / "s.json").write_text('{"target": {"table": "m", "label": "y"}, "tables": {"m": {"path": "m.csv", '
    ...     '"key": "mid"}, "atom": {"path": "atom.csv", "parents": [{"table": "m", "column": "mid"}]}}}')
    >>> db = load_schema(d / "s.json")
    >>> db.ids.tolist(), db.labels.tolist(), db.tables["atom"].links[0].index.tolist()
    (['a', 'b', 'c'], ['1', '0', ''], [0, 0, 1])
    >>> (d / "s.json").write_text('{"target": {"table": "m", "label": "y"}, "tables": {"m": {"path": "m.csv", '
    ...     '"key": "mid"}, "atom": {"path": "atom.csv", "parent": []}}}') and None
    >>> try:
    ...     load_schema(d / "s.json")
    ... except ValueError as e:
    ...     print(str(e).split(" (expected")[0])
    s.json: table 'atom': unknown field 'parent'
    """
    path = Path(path)
    try:
        spec = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path.name}: not valid JSON: {exc}") from None
    return build(spec, path.parent, where=path.name)


def build(spec: Any, base: Path, where: str = "schema.json") -> Database:
    """A database from a parsed schema whose table paths are relative to ``base``.

    Parameters
    ----------
    spec : Any
        The parsed ``schema.json`` (checked here).
    base : Path
        The directory the tables' paths are relative to.
    where : str
        What to call the schema in error messages.

    Returns
    -------
    Database
        The tables, their links, the target's ids, labels and cutoff.
    """
    target, tables = _check_schema(spec, where)
    raw = {name: read_table(base / t["path"], name, _used(t, target if name == target["table"] else None),
                            _roles(t, target if name == target["table"] else None))
           for name, t in tables.items()}
    for name, t in tables.items():
        header = raw[name].header
        needed = [("key", t.get("key")), ("time", t.get("time"))]
        needed += [("parents", p["column"]) for p in t.get("parents", [])]
        needed += [("nominal", c) for c in t.get("nominal", [])]
        needed += [("data", c) for c in t.get("columns") or []]
        if name == target["table"]:
            needed += [("label", target["label"]), ("cutoff", target.get("cutoff"))]
        for what, col in needed:
            if col is not None and col not in header:
                raise ValueError(f"table {name!r}: {what} column {col!r} is missing from {t['path']} "
                                 f"(columns: {sorted(header)})")
    referenced = {p["table"] for t in tables.values() for p in t.get("parents", [])}
    keys = {}
    for name, t in tables.items():
        if not t.get("key"):
            continue
        if name in referenced:
            keys[name] = _keys(name, t["key"], raw[name])
        elif not raw[name].cells[t["key"]].distinct_keys():
            _keys(name, t["key"], raw[name])  # a key no table points to: checked, then not kept
    traw = raw[target["table"]]
    cutoff, cutoff_kind = None, None
    if target.get("cutoff"):
        cutoff, cutoff_kind = traw.cells[target["cutoff"]].times(target["table"], target["cutoff"], traw.row,
                                                                 "cutoff")
    times = {}
    for name, t in tables.items():  # every time column, checked against the cutoff before any column is built
        if t.get("time"):
            r = raw[name]
            times[name], kind = r.cells[t["time"]].times(name, t["time"], r.row, "time")
            if cutoff_kind is not None and kind != cutoff_kind:
                raise ValueError(f"table {name!r}: time column {t['time']!r} holds {kind}s but the cutoff column "
                                 f"{target['cutoff']!r} of table {target['table']!r} holds {cutoff_kind}s: they "
                                 "cannot be compared")
    # unknown parent keys, before any column is built
    links = {name: [Link(p["column"], p["table"], _resolve(name, p, raw[name], keys[p["table"]]))
                    for p in t.get("parents", [])] for name, t in tables.items()}
    del keys
    for name, t in tables.items():  # keys, links and times are numbers now: their cells go before any column is built
        done = {t.get("time"), *(p["column"] for p in t.get("parents", []))}
        if name != target["table"]:
            done.add(t.get("key"))
        for c in done - {None}:
            raw[name].cells.pop(c, None)
    tkey = tables[target["table"]]["key"]
    ids = traw.cells[tkey].key_text()
    labels = np.char.strip(traw.cells[target["label"]].text())
    built: dict[str, Table] = {}
    for name, t in tables.items():
        r = raw.pop(name)  # the file's cells go as soon as the table is built: one table's cells alive at a time
        special = {t.get("key"), t.get("time"), *(p["column"] for p in t.get("parents", []))}
        if name == target["table"]:
            special |= {target["label"], target.get("cutoff")}
        nominal = set(t.get("nominal", []))
        columns = {}
        for c in r.header:
            if c not in special and c in r.cells:
                columns[c] = r.cells[c].column(c, c in nominal)
                del r.cells[c]
        built[name] = Table(name, r.n_rows, columns, links[name], times.get(name), t.get("time"))
    del raw, r, traw
    arrow = arrow_modules()
    if arrow is not None:  # Arrow's allocator keeps the pages of the files' cells for reuse: hand them back
        arrow[0].default_memory_pool().release_unused()
    return Database(built, target["table"], target["label"], ids, labels, cutoff, tkey)


def _fields(obj: Any, allowed: set[str], required: set[str], what: str, where: str) -> None:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: {what} must be an object, got {type(obj).__name__}")
    for k in obj:
        if k not in allowed:
            raise ValueError(f"{where}: {what}: unknown field {k!r} (expected some of {sorted(allowed)})")
    for k in sorted(required):
        if k not in obj:
            raise ValueError(f"{where}: {what}: missing field {k!r}")


def _check_schema(spec: Any, where: str) -> tuple[dict, dict]:
    _fields(spec, SCHEMA_FIELDS, SCHEMA_FIELDS, "the schema", where)
    target, tables = spec["target"], spec["tables"]
    _fields(target, TARGET_FIELDS, {"table", "label"}, "target", where)
    if not isinstance(tables, dict) or not tables:
        raise ValueError(f"{where}: tables must be a non-empty object (table name -> its description)")
    for name, t in tables.items():
        what = f"table {name!r}"
        _fields(t, TABLE_FIELDS, {"path"}, what, where)
        for k in ("path", "key", "time"):
            if t.get(k) is not None and not (isinstance(t[k], str) and t[k]):
                raise ValueError(f"{where}: {what}: {k} must be a non-empty string or null")
        parents = t.get("parents", [])
        if not isinstance(parents, list):
            raise ValueError(f"{where}: {what}: parents must be a list")
        for i, p in enumerate(parents):
            _fields(p, PARENT_FIELDS, PARENT_FIELDS, f"{what} parents[{i}]", where)
            if p["table"] not in tables:
                raise ValueError(f"{where}: {what} parents[{i}]: unknown table {p['table']!r} "
                                 f"(tables: {sorted(tables)})")
            if not tables[p["table"]].get("key"):
                raise ValueError(f"{where}: {what} parents[{i}]: table {p['table']!r} has no key to point to")
        nominal = t.get("nominal", [])
        if not isinstance(nominal, list) or not all(isinstance(c, str) for c in nominal):
            raise ValueError(f"{where}: {what}: nominal must be a list of column names")
        columns = t.get("columns")
        if columns is not None and not (isinstance(columns, list) and all(isinstance(c, str) for c in columns)):
            raise ValueError(f"{where}: {what}: columns must be a list of column names or null")
        roles = [("key", t.get("key")), ("time", t.get("time"))]
        roles += [(f"parents[{i}]", p["column"]) for i, p in enumerate(parents)]
        if name == target.get("table"):
            roles += [("label", target.get("label")), ("cutoff", target.get("cutoff"))]
        roles += [("nominal", c) for c in nominal]
        roles += [("columns", c) for c in columns or []]
        seen: dict[str, str] = {}
        for role, col in roles:
            if col is None:
                continue
            if col in seen:
                raise ValueError(f"{where}: {what}: column {col!r} is named twice (as {seen[col]} and as {role})")
            seen[col] = role
    if target["table"] not in tables:
        raise ValueError(f"{where}: target: unknown table {target['table']!r} (tables: {sorted(tables)})")
    if not tables[target["table"]].get("key"):
        raise ValueError(f"{where}: target table {target['table']!r} needs a key (the sample ids)")
    for k in ("label", "cutoff"):
        if target.get(k) is not None and not (isinstance(target[k], str) and target[k]):
            raise ValueError(f"{where}: target: {k} must be a non-empty string" + (" or null" if k == "cutoff" else ""))
    try:
        check_reach(target["table"], {name: [p["table"] for p in t.get("parents", [])] for name, t in tables.items()},
                    {name: t["time"] for name, t in tables.items() if t.get("time")})
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return target, tables



def _used(t: dict, target: dict | None) -> set[str] | None:
    """The columns of a table the schema uses, when its ``columns`` lists the data columns; None: all of them."""
    if t.get("columns") is None:
        return None
    used = {t.get("key"), t.get("time"), *(p["column"] for p in t.get("parents", [])), *t.get("nominal", []),
            *t["columns"]}
    if target is not None:
        used |= {target["label"], target.get("cutoff")}
    return used - {None}


def _roles(t: dict, target: dict | None) -> dict[str, str]:
    """Which columns of a table are read for their text (keys, links, nominal columns, the label) and which are
    times (``time``, the cutoff); the others are data."""
    text = [t.get("key"), *(p["column"] for p in t.get("parents", [])), *t.get("nominal", [])]
    times = [t.get("time")]
    if target is not None:
        text.append(target["label"])
        times.append(target.get("cutoff"))
    return {**{c: "time" for c in times if c}, **{c: "text" for c in text if c}}


@dataclass
class _Keys:
    """A table's key column: Arrow text (hashed lookups), or numpy text sorted and each key's row (without Arrow)."""

    arrow: Any = None
    ordered: np.ndarray | None = None
    order: np.ndarray | None = None


def _keys(table: str, col: str, raw: RawTable) -> _Keys:
    """The key column once no key is empty or repeated.

    The error names the first row where reading top down would fail, as a row-by-row check would.
    """
    arr = raw.cells[col].keys()
    if arr is not None:
        import pyarrow.compute as pc

        arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
        if not pc.any(pc.equal(arr, "")).as_py() and pc.count_distinct(arr).as_py() == len(arr):
            return _Keys(arrow=arr)
    cells = raw.cells[col].key_text()
    order = np.argsort(cells, kind="stable")
    ordered = cells[order]
    empty = np.flatnonzero(cells == "")
    again = order[1:][ordered[1:] == ordered[:-1]]  # rows whose key an earlier row has (stable: the first keeps it)
    first_empty = int(empty[0]) if empty.size else cells.size
    first_again = int(again.min()) if again.size else cells.size
    if first_empty < first_again:
        raise ValueError(f"table {table!r}: key column {col!r} is empty in {raw.row(first_empty)}")
    if again.size:
        k = cells[first_again]
        first = int(order[np.searchsorted(ordered, k)])
        raise ValueError(f"table {table!r}: duplicate key {str(k)!r} in column {col!r}, "
                         f"{_rows(raw, first, first_again)}")
    return _Keys(ordered=ordered, order=order)


def _rows(raw: RawTable, i: int, j: int) -> str:
    return f"rows {i + 1} and {j + 1}" + (f" (lines {i + 2} and {j + 2})" if raw.lines else "")


def _resolve(table: str, parent: dict, raw: RawTable, keys: _Keys) -> np.ndarray:
    """Parent row of each cell of the foreign-key column (-1 when empty)."""
    cells = raw.cells[parent["column"]]
    child = None if keys.arrow is None else cells.keys()
    if child is not None:
        import pyarrow.compute as pc

        at = np.asarray(pc.fill_null(pc.index_in(child, value_set=keys.arrow), -1).to_numpy(), dtype=np.int64)
        unknown = np.flatnonzero(at < 0)
        if unknown.size:
            blank = np.asarray(pc.equal(child.take(unknown), "").to_numpy(zero_copy_only=False), dtype=bool)
            unknown = unknown[~blank]
        if unknown.size:
            i = int(unknown[0])
            raise ValueError(f"table {table!r}: column {parent['column']!r}, {raw.row(i)}: unknown parent key "
                             f"{str(child[i].as_py())!r} (not a key of table {parent['table']!r})")
        return at
    if keys.ordered is None:  # Arrow keys of the parent, numpy text of the child: compare as numpy text
        keys = _Keys(ordered=np.sort(np.asarray(keys.arrow.to_numpy(zero_copy_only=False), dtype=str)))
        keys.order = np.argsort(np.asarray(keys.arrow.to_numpy(zero_copy_only=False), dtype=str), kind="stable")
    ordered, order = keys.ordered, keys.order
    text = cells.key_text()
    empty = text == ""
    if ordered.size:
        at = np.minimum(np.searchsorted(ordered, text), ordered.size - 1)
        found = ordered[at] == text
    else:
        at, found = np.zeros(text.size, dtype=np.int64), np.zeros(text.size, dtype=bool)
    unknown = np.flatnonzero(~found & ~empty)
    if unknown.size:
        i = int(unknown[0])
        raise ValueError(f"table {table!r}: column {parent['column']!r}, {raw.row(i)}: unknown parent key "
                         f"{str(text[i])!r} (not a key of table {parent['table']!r})")
    return np.where(empty, -1, order[at]).astype(np.int64)




def save_schema(db: Database, directory: str | Path) -> Path:
    """Write the tables as CSV files and their ``schema.json`` (what :func:`load_schema` reads back).

    Non-target tables get a key ``<table>_row`` (their row number) when other tables point at them.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    parents_of = {lk.parent for t in db.tables.values() for lk in t.links}
    spec: dict[str, Any] = {"target": {"table": db.target, "label": db.label,
                                       "cutoff": "cutoff" if db.cutoff is not None else None}, "tables": {}}
    for name, t in db.tables.items():
        key = db.key if name == db.target else (f"{name}_row" if name in parents_of else None)
        cols: dict[str, list[str]] = {}
        if name == db.target:
            cols[db.key] = db.ids.tolist()
            cols[db.label] = db.labels.tolist()
            if db.cutoff is not None:
                cols["cutoff"] = _text(db.cutoff)
        elif key:
            cols[key] = [str(i) for i in range(t.n_rows)]
        parents = []
        for lk in t.links:
            pkey = db.key if lk.parent == db.target else f"{lk.parent}_row"
            ref = db.ids[lk.index].tolist() if lk.parent == db.target else lk.index.astype(str).tolist()
            cols[lk.column] = [r if i >= 0 else "" for r, i in zip(ref, lk.index.tolist(), strict=True)]
            parents.append({"table": lk.parent, "column": lk.column})
            if pkey is None:  # pragma: no cover - parents always get a key above
                raise ValueError(f"table {lk.parent!r} has no key")
        nominal = []
        for c, col in t.columns.items():
            if col.nominal:
                cells = np.asarray((*col.categories, ""), dtype=object)[col.values]
                cols[c] = cells.tolist()
                nominal.append(c)
            else:
                cols[c] = _text(col.values)
        if t.time is not None:
            cols[t.time_column or "time"] = _text(t.time)
        with open(directory / f"{name}.csv", "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(list(cols))
            w.writerows(zip(*cols.values(), strict=True))
        entry: dict[str, Any] = {"path": f"{name}.csv"}
        if key:
            entry["key"] = key
        if parents:
            entry["parents"] = parents
        if t.time is not None:
            entry["time"] = t.time_column or "time"
        if nominal:
            entry["nominal"] = nominal
        spec["tables"][name] = entry
    path = directory / "schema.json"
    path.write_text(json.dumps(spec, indent=1))
    return path


def _text(v: np.ndarray) -> list[str]:
    return ["" if x != x else repr(x) for x in np.asarray(v, dtype=np.float64).tolist()]
