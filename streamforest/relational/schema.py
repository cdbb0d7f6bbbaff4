"""``schema.json`` plus CSV tables -> a validated :class:`~streamforest.relational.tables.Database`.

The format (the contract other tools write)::

    {"target": {"table": "molecule", "label": "mutagenic", "cutoff": null},
     "tables": {"molecule": {"path": "molecule.csv", "key": "molecule_id"},
                "atom": {"path": "atom.csv", "key": "atom_id",
                         "parents": [{"table": "molecule", "column": "molecule_id"}]},
                "bond": {"path": "bond.csv", "parents": [{"table": "atom", "column": "atom_id"}],
                         "time": null, "nominal": ["bond_type"]}}}

Paths are relative to the schema file. Everything is checked before anything is returned: a bad schema or a bad
table raises :class:`ValueError` naming the table, the column and the row (the CSV line), and nothing half-built
escapes.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from streamforest.relational.tables import Column, Database, Link, Table, nominal_column

SCHEMA_FIELDS = {"target", "tables"}
TARGET_FIELDS = {"table", "label", "cutoff"}
TABLE_FIELDS = {"path", "key", "parents", "time", "nominal"}
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
    ...     print(e)
    s.json: table 'atom': unknown field 'parent' (expected some of ['key', 'nominal', 'parents', 'path', 'time'])
    """
    path = Path(path)
    try:
        spec = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path.name}: not valid JSON: {exc}") from None
    return build(spec, path.parent, where=path.name)


def build(spec: Any, base: Path, where: str = "schema.json") -> Database:
    """A database from a parsed schema whose table paths are relative to ``base``."""
    target, tables = _check_schema(spec, where)
    raw = {name: _read_csv(base / t["path"], name) for name, t in tables.items()}
    for name, t in tables.items():
        header = raw[name][0]
        needed = [("key", t.get("key")), ("time", t.get("time"))]
        needed += [("parents", p["column"]) for p in t.get("parents", [])]
        needed += [("nominal", c) for c in t.get("nominal", [])]
        if name == target["table"]:
            needed += [("label", target["label"]), ("cutoff", target.get("cutoff"))]
        for what, col in needed:
            if col is not None and col not in header:
                raise ValueError(f"table {name!r}: {what} column {col!r} is missing from {t['path']} "
                                 f"(columns: {sorted(header)})")
    keys = {name: _keys(name, t, raw[name]) for name, t in tables.items() if t.get("key")}
    built: dict[str, Table] = {}
    for name, t in tables.items():
        header, cells = raw[name]
        links = []
        for p in t.get("parents", []):
            links.append(Link(p["column"], p["table"], _resolve(name, p, cells[p["column"]], keys[p["table"]])))
        special = {t.get("key"), t.get("time"), *(p["column"] for p in t.get("parents", []))}
        if name == target["table"]:
            special |= {target["label"], target.get("cutoff")}
        nominal = set(t.get("nominal", []))
        columns = {c: _column(c, cells[c], c in nominal) for c in header if c not in special}
        time = _times(name, t["time"], cells[t["time"]]) if t.get("time") else None
        n = len(next(iter(cells.values()))) if cells else 0
        built[name] = Table(name, n, columns, links, time, t.get("time"))
    tcells = raw[target["table"]][1]
    cutoff = None
    if target.get("cutoff"):
        cutoff = _times(target["table"], target["cutoff"], tcells[target["cutoff"]])
    tkey = tables[target["table"]]["key"]
    return Database(built, target["table"], target["label"], np.asarray(tcells[tkey], dtype=str),
                    np.char.strip(np.asarray(tcells[target["label"]], dtype=str)), cutoff, tkey)


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
    if target["table"] not in tables:
        raise ValueError(f"{where}: target: unknown table {target['table']!r} (tables: {sorted(tables)})")
    if not tables[target["table"]].get("key"):
        raise ValueError(f"{where}: target table {target['table']!r} needs a key (the sample ids)")
    for k in ("label", "cutoff"):
        if target.get(k) is not None and not (isinstance(target[k], str) and target[k]):
            raise ValueError(f"{where}: target: {k} must be a non-empty string" + (" or null" if k == "cutoff" else ""))
    if tables[target["table"]].get("parents"):
        raise ValueError(f"{where}: the target table {target['table']!r} cannot have parents")
    return target, tables


def _read_csv(path: Path, table: str) -> tuple[list[str], dict[str, list[str]]]:
    if not path.exists():
        raise ValueError(f"table {table!r}: file {path} does not exist")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header:
            raise ValueError(f"table {table!r}: {path.name} is empty (a header row is needed)")
        header = [h.strip() for h in header]
        dup = sorted({h for h in header if header.count(h) > 1})
        if dup:
            raise ValueError(f"table {table!r}: {path.name} repeats columns {dup}")
        rows = list(reader)
    for i, r in enumerate(rows):
        if len(r) != len(header):
            raise ValueError(f"table {table!r}: {path.name} line {i + 2} has {len(r)} cells, the header "
                             f"{len(header)}")
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(header)
    return header, {h: [c.strip() for c in col] for h, col in zip(header, cols, strict=True)}


def _keys(table: str, t: dict, raw: tuple[list[str], dict[str, list[str]]]) -> dict[str, int]:
    col = t["key"]
    index: dict[str, int] = {}
    for i, k in enumerate(raw[1][col]):
        if k == "":
            raise ValueError(f"table {table!r}: key column {col!r} is empty in row {i + 1} (line {i + 2})")
        if k in index:
            raise ValueError(f"table {table!r}: duplicate key {k!r} in column {col!r}, rows {index[k] + 1} and "
                             f"{i + 1} (lines {index[k] + 2} and {i + 2})")
        index[k] = i
    return index


def _resolve(table: str, parent: dict, cells: list[str], keys: dict[str, int]) -> np.ndarray:
    out = np.empty(len(cells), dtype=np.int64)
    for i, k in enumerate(cells):
        if k == "":
            out[i] = -1
            continue
        j = keys.get(k)
        if j is None:
            raise ValueError(f"table {table!r}: column {parent['column']!r}, row {i + 1} (line {i + 2}): unknown "
                             f"parent key {k!r} (not a key of table {parent['table']!r})")
        out[i] = j
    return out


def _column(name: str, cells: list[str], nominal: bool) -> Column:
    arr = np.asarray(cells, dtype=str)
    if not nominal:
        numbers = _numbers(arr)
        if numbers is not None:
            return Column(name, numbers)
    return nominal_column(name, arr)


def _numbers(arr: np.ndarray) -> np.ndarray | None:
    """Float values of text cells (empty = NaN), or None when some cell is not a number."""
    filled = np.where(arr == "", "nan", arr)
    try:
        return filled.astype(np.float64)
    except ValueError:
        return None


def _times(table: str, col: str, cells: list[str]) -> np.ndarray:
    """Numeric times as they are; ISO dates and datetimes as seconds since the epoch (empty = NaN)."""
    arr = np.asarray(cells, dtype=str)
    numbers = _numbers(arr)
    if numbers is not None:
        return numbers
    out = np.full(arr.size, np.nan)
    for i, c in enumerate(arr):
        if c == "":
            continue
        try:
            out[i] = np.datetime64(c, "s").astype(np.int64)
        except ValueError:
            raise ValueError(f"table {table!r}: time column {col!r}, row {i + 1} (line {i + 2}): {str(c)!r} is neither "
                             "a number nor an ISO date") from None
    return out


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
