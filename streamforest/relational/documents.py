"""Nested JSON documents -> the same tables as ``schema.json`` gives.

A document is an object; its scalar fields are columns of its table; a field holding a list of objects is a bag of
child rows (a child table named after the field, one-to-many, to any depth); a list of scalars is a child table with
one column ``value``; a nested object is flattened into ``field_subfield`` columns. Numbers and booleans make
numeric columns, text makes nominal ones (a column mixing both is nominal).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from streamforest.relational.tables import Column, Database, Link, Table, nominal_column


def load_documents(path: str | Path, label: str, name: str = "root", key: str | None = None) -> Database:
    """Read a JSON file holding a list of documents (see :func:`documents_to_tables`)."""
    path = Path(path)
    try:
        docs = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path.name}: not valid JSON: {exc}") from None
    return documents_to_tables(docs, label, name, key)


def documents_to_tables(docs: Any, label: str, name: str = "root", key: str | None = None) -> Database:
    """Tables of a list of nested documents; the root table ``name`` is the target, ``label`` its label field.

    Examples
    --------
    >>> docs = [{"y": 1, "w": 0.5, "atoms": [{"el": "c", "bonds": [{"t": 7}, {"t": 1}]}, {"el": "o"}]},
    ...         {"y": None, "w": 2, "atoms": []}]
    >>> db = documents_to_tables(docs, label="y", name="mol")
    >>> sorted(db.tables), db.labels.tolist(), db.ids.tolist()
    (['atoms', 'bonds', 'mol'], ['1', ''], ['0', '1'])
    >>> db.tables["bonds"].links[0].index.tolist(), db.tables["bonds"].columns["t"].values.tolist()
    ([0, 0], [7.0, 1.0])
    """
    if not isinstance(docs, list) or not docs:
        raise ValueError("documents must be a non-empty JSON list of objects")
    rows: dict[str, list[dict[str, Any]]] = {name: []}
    parents: dict[str, list[int]] = {}
    parent_of: dict[str, str] = {}
    table_of: dict[tuple[str, str], str] = {}
    # (table, object, parent row, where) to visit; a stack keeps document order within each table
    stack: list[tuple[str, Any, int, str]] = [
        (name, docs[i], -1, f"documents[{i}]") for i in reversed(range(len(docs)))]
    while stack:
        table, obj, parent_row, where = stack.pop()
        if not isinstance(obj, dict):
            obj = {"value": obj}
            if isinstance(obj["value"], (list, dict)):
                kind = type(obj["value"]).__name__
                raise ValueError(f"{where}: a bag item must be an object or a scalar, got {kind}")
        row: dict[str, Any] = {}
        bags: list[tuple[str, list]] = []
        _flatten(obj, "", row, bags, where)
        rows[table].append(row)
        if parent_row >= 0:
            parents[table].append(parent_row)
        me = len(rows[table]) - 1
        for field_name, items in reversed(bags):
            child = table_of.get((table, field_name))
            if child is None:
                child = field_name if field_name not in rows else f"{table}_{field_name}"
                if child in rows:
                    raise ValueError(f"{where}: cannot name the table of bag {field_name!r}: {child!r} exists")
                table_of[(table, field_name)] = child
                rows[child], parents[child], parent_of[child] = [], [], table
            for j in reversed(range(len(items))):
                stack.append((child, items[j], me, f"{where}.{field_name}[{j}]"))
    root = rows[name]
    if not any(label in r for r in root):
        raise ValueError(f"documents: no document has the label field {label!r}")
    labels = np.asarray([_label_text(r.pop(label, None), i, label) for i, r in enumerate(root)], dtype=str)
    if key is not None:
        ids = [r.pop(key, None) for r in root]
        for i, k in enumerate(ids):
            if k is None or isinstance(k, (dict, list)):
                raise ValueError(f"documents[{i}]: key field {key!r} is missing or not a scalar")
        ids = [str(k) for k in ids]
        seen: dict[str, int] = {}
        for i, k in enumerate(ids):
            if k in seen:
                raise ValueError(f"documents[{i}]: duplicate key {k!r} (also documents[{seen[k]}])")
            seen[k] = i
    else:
        ids = [str(i) for i in range(len(root))]
    tables = {}
    for t, rs in rows.items():
        names = sorted({c for r in rs for c in r})
        cols = {c: _typed(c, [r.get(c) for r in rs]) for c in names}
        links = [Link(f"{parent_of[t]}_row", parent_of[t], np.asarray(parents[t], dtype=np.int64))] \
            if t in parent_of else []
        tables[t] = Table(t, len(rs), cols, links)
    return Database(tables, name, label, np.asarray(ids, dtype=str), labels, None, key or "id")


def _flatten(obj: dict, prefix: str, row: dict, bags: list, where: str) -> None:
    for k, v in obj.items():
        col = f"{prefix}{k}"
        if isinstance(v, list):
            bags.append((col, v))
        elif isinstance(v, dict):
            _flatten(v, f"{col}_", row, bags, where)
        else:
            row[col] = v


def _label_text(v: Any, i: int, label: str) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v).strip()
    raise ValueError(f"documents[{i}]: label {label!r} must be a scalar, got {type(v).__name__}")


def _typed(name: str, values: list[Any]) -> Column:
    given = [v for v in values if v is not None]
    if all(isinstance(v, (int, float)) for v in given):  # booleans are ints: 0/1
        return Column(name, np.asarray([np.nan if v is None else float(v) for v in values], dtype=np.float64))
    return nominal_column(name, np.asarray(["" if v is None else str(v) for v in values], dtype=str))
