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
per-column cells (:class:`_TextCells` for CSV, :class:`_TypedCells` for Parquet), and one step turns cells into
keys, links, columns and times whatever the file was. Everything is checked before anything is returned: a bad
schema or a bad table raises :class:`ValueError` naming the table, the column and the row (the CSV line), and
nothing half-built escapes.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from streamforest.relational.tables import Column, Database, Link, Table, nominal_column

SCHEMA_FIELDS = {"target", "tables"}
TARGET_FIELDS = {"table", "label", "cutoff"}
TABLE_FIELDS = {"path", "key", "parents", "time", "nominal", "columns"}
PARENT_FIELDS = {"table", "column"}
PARQUET_SUFFIXES = {".parquet", ".pq"}


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
    raw = {name: _read_table(base / t["path"], name, _used(t, target if name == target["table"] else None))
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
    keys = {name: _keys(name, t["key"], raw[name]) for name, t in tables.items() if t.get("key")}
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
    arrow = _arrow()
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
    if tables[target["table"]].get("parents"):
        raise ValueError(f"{where}: the target table {target['table']!r} cannot have parents")
    return target, tables


def _arrow() -> tuple[ModuleType, ModuleType] | None:
    """pyarrow and its compute functions, or None when pyarrow is not installed (CSV is then read by ``csv``)."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return None
    return pa, pc


class _Cells:
    """One column of a table file, however it was read: what the schema's roles need of it.

    ``strings`` and ``keys`` are Arrow arrays (``""`` = missing) when pyarrow is there, so that 10 million keys or
    nominal cells never become Python objects; ``text`` and ``key_text`` are numpy text, for the target's ids and
    labels and for error messages.
    """

    def text(self) -> np.ndarray:
        raise NotImplementedError

    def key_text(self) -> np.ndarray:
        return self.text()

    def strings(self) -> Any | None:
        """The cells as an Arrow string array (trimmed, missing = ``""``), or None without Arrow."""
        return None

    def keys(self) -> Any | None:
        """The cells as key text in an Arrow string array, or None without Arrow."""
        arrow = _arrow()
        return None if arrow is None else arrow[0].array(self.key_text(), arrow[0].string())

    def numbers(self) -> np.ndarray | None:
        raise NotImplementedError

    def times(self, table: str, col: str, row: Callable[[int], str], what: str) -> tuple[np.ndarray, str]:
        """Seconds or numbers (NaN = missing) and which of the two (``"datetime"`` or ``"number"``)."""
        raise NotImplementedError

    def column(self, name: str, nominal: bool) -> Column:
        """The one step from cells to a data column, whatever file they came from."""
        if not nominal:
            numbers = self.numbers()
            if numbers is not None:
                return Column(name, numbers)
        strings = self.strings()
        return nominal_column(name, self.text()) if strings is None else _arrow_nominal(name, strings)


class _TextCells(_Cells):
    """A column of a CSV file read by the ``csv`` module: numpy text cells (``""`` = missing)."""

    def __init__(self, cells: np.ndarray) -> None:
        self._cells = cells

    def text(self) -> np.ndarray:
        return self._cells

    def numbers(self) -> np.ndarray | None:
        return _numbers(self._cells)

    def times(self, table: str, col: str, row: Callable[[int], str], what: str) -> tuple[np.ndarray, str]:
        return _times(table, col, self._cells, row, what)


class _ArrowTextCells(_Cells):
    """A column of a CSV file read by pyarrow's reader as text: numbers, codes and times computed by Arrow.

    What the cells become is what :class:`_TextCells` makes of the same text: Arrow parses what it can (decimal
    numbers, ISO datetimes to the second) and the rest goes through numpy's parsers, once per distinct cell.
    """

    def __init__(self, col: Any) -> None:
        self._raw, self._strings, self._numbers = col, None, False

    def strings(self) -> Any:
        if self._strings is None:
            import pyarrow.compute as pc

            self._strings, self._raw = pc.utf8_trim_whitespace(self._raw), None
        return self._strings

    def keys(self) -> Any:
        return self.strings()

    def text(self) -> np.ndarray:
        return np.asarray(self.strings().to_numpy(zero_copy_only=False), dtype=str)

    def numbers(self) -> np.ndarray | None:
        if self._numbers is False:
            self._numbers = _arrow_numbers(self.strings())
        return self._numbers

    def times(self, table: str, col: str, row: Callable[[int], str], what: str) -> tuple[np.ndarray, str]:
        numbers = self.numbers()
        if numbers is not None:
            return numbers, "number"
        import pyarrow as pa
        import pyarrow.compute as pc

        s = self.strings()
        try:
            stamps = pc.cast(pc.if_else(pc.equal(s, ""), pa.scalar(None, pa.string()), s), pa.timestamp("s"))
        except pa.ArrowInvalid:  # fractional seconds, zones, months: numpy's parser, which names a bad cell
            return _times(table, col, self.text(), row, what)
        return _seconds(pc.cast(stamps, pa.int64())), "datetime"


class _TypedCells(_Cells):
    """A column of a Parquet file: its type says what it is; its text is rendered only when something asks.

    ``numbers`` (float64, NaN = null) for a numeric column, ``seconds`` (since the epoch, NaN = null) for a date or
    timestamp column, neither for text and booleans: those are nominal, as a CSV column of such cells would be.
    ``strings`` gives the cells as Arrow text where the type allows it without numpy (text, integers, booleans).
    """

    def __init__(self, render: Callable[[], np.ndarray], numbers: np.ndarray | None = None,
                 seconds: np.ndarray | None = None, whole_keys: bool = False,
                 strings: Callable[[], Any] | None = None) -> None:
        self._render, self._text = render, None
        self._numbers, self._seconds, self._whole_keys = numbers, seconds, whole_keys
        self._make_strings, self._strings = strings, None

    def text(self) -> np.ndarray:
        if self._text is None:
            self._text = self._render()
        return self._text

    def strings(self) -> Any | None:
        if self._strings is None and self._make_strings is not None:
            self._strings = self._make_strings()
        return self._strings

    def key_text(self) -> np.ndarray:
        x = self._numbers
        if not self._whole_keys or x is None:
            return self.text()
        # pandas writes an integer key column with nulls as float64: 3.0 must still be the key "3" of its parent
        whole = np.isfinite(x) & (np.round(x) == x) & (np.abs(x) < 2.0 ** 63)
        if not whole.any():
            return self.text()
        out = self.text().astype(object)
        out[whole] = x[whole].astype(np.int64).astype(str)
        return out.astype(str)

    def keys(self) -> Any | None:
        x = self._numbers
        if self._whole_keys and x is not None:
            given = ~np.isnan(x)
            if np.all(np.round(x[given]) == x[given]) and np.all(np.abs(x[given]) < 2.0 ** 53):
                import pyarrow as pa

                # whole floats (pandas' integer column with nulls) are the keys of their integer text
                ints = pa.array(np.where(given, x, 0).astype(np.int64), mask=~given)
                return _fill(ints.cast(pa.string()))
        strings = self.strings()
        return super().keys() if strings is None else strings

    def numbers(self) -> np.ndarray | None:
        return self._numbers

    def times(self, table: str, col: str, row: Callable[[int], str], what: str) -> tuple[np.ndarray, str]:
        if self._seconds is not None:
            return self._seconds, "datetime"
        if self._numbers is not None:
            return self._numbers, "number"
        return _times(table, col, self.text(), row, what)  # text holding ISO dates, as in a CSV file


@dataclass
class _RawTable:
    """A table file as read, before the schema says which columns are keys, links, times or data."""

    path: Path
    header: list[str]
    cells: dict[str, _Cells]
    n_rows: int
    lines: bool  # CSV: a row has a line number in the file, which errors give

    def row(self, i: int) -> str:
        """How errors name row ``i`` (0-based)."""
        return f"row {i + 1} (line {i + 2})" if self.lines else f"row {i + 1}"


def _used(t: dict, target: dict | None) -> set[str] | None:
    """The columns of a table the schema uses, when its ``columns`` lists the data columns; None: all of them."""
    if t.get("columns") is None:
        return None
    used = {t.get("key"), t.get("time"), *(p["column"] for p in t.get("parents", [])), *t.get("nominal", []),
            *t["columns"]}
    if target is not None:
        used |= {target["label"], target.get("cutoff")}
    return used - {None}


def _read_table(path: Path, table: str, used: set[str] | None = None) -> _RawTable:
    """The file's header, and cells of the ``used`` columns (all when None): other columns are never parsed."""
    if not path.exists():
        raise ValueError(f"table {table!r}: file {path} does not exist")
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return _read_parquet(path, table, used)
    if _arrow() is not None:
        raw = _read_csv_arrow(path, table, used)
        if raw is not None:
            return raw
    raw = _read_csv(path, table)
    if used is not None:
        raw.cells = {h: c for h, c in raw.cells.items() if h in used}
    return raw


def _csv_header(path: Path, table: str) -> list[str]:
    with open(path, newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh), None)
    if not header:
        raise ValueError(f"table {table!r}: {path.name} is empty (a header row is needed)")
    return _check_header(header, path, table)


def _read_csv_arrow(path: Path, table: str, used: set[str] | None = None) -> _RawTable | None:
    """A CSV file read by pyarrow's columnar reader, every column as text; None when it refuses the file (ragged
    rows, blank lines, bad UTF-8): the ``csv`` module's reader then reads it or names the line."""
    import pyarrow as pa
    from pyarrow import csv as pcsv

    header = _csv_header(path, table)
    names = [str(i) for i in range(len(header))]  # Arrow's names: the header's own may repeat after trimming
    read = [str(i) for i, h in enumerate(header) if used is None or h in used]
    try:
        data = pcsv.read_csv(path, read_options=pcsv.ReadOptions(column_names=names, skip_rows=1),
                             parse_options=pcsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False),
                             convert_options=pcsv.ConvertOptions(column_types=dict.fromkeys(read, pa.string()),
                                                                 include_columns=read, null_values=[],
                                                                 strings_can_be_null=False,
                                                                 quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    cells: dict[str, _Cells] = {header[int(i)]: _ArrowTextCells(data.column(i)) for i in read}
    return _RawTable(path, header, cells, data.num_rows, lines=True)


def _read_csv(path: Path, table: str) -> _RawTable:
    header = _csv_header(path, table)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        next(reader)
        rows = list(reader)
    for i, r in enumerate(rows):
        if len(r) != len(header):
            raise ValueError(f"table {table!r}: {path.name} line {i + 2} has {len(r)} cells, the header "
                             f"{len(header)}")
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(header)
    cells: dict[str, _Cells] = {h: _TextCells(np.asarray([c.strip() for c in col], dtype=str))
                                for h, col in zip(header, cols, strict=True)}
    return _RawTable(path, header, cells, len(rows), lines=True)


def _check_header(header: list[str], path: Path, table: str) -> list[str]:
    header = [h.strip() for h in header]
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise ValueError(f"table {table!r}: {path.name} repeats columns {dup}")
    return header


def _read_parquet(path: Path, table: str, used: set[str] | None = None) -> _RawTable:
    from streamforest.optional import require

    pa = require("pyarrow", f"table {table!r}: reading {path.name}")
    pq = require("pyarrow.parquet", f"table {table!r}: reading {path.name}")
    errors = (pa.ArrowException, OSError, ValueError)
    try:
        file = pq.ParquetFile(path)
        names = file.schema_arrow.names
        meta = file.schema_arrow.pandas_metadata or {}
    except errors as exc:
        raise ValueError(f"table {table!r}: cannot read {path.name} as Parquet: {exc}") from None
    # pandas stores an unnamed, non-range index as a column; it is row bookkeeping, not data (and would leak order)
    index = {c for c in meta.get("index_columns", []) if isinstance(c, str) and c.startswith("__index_level_")}
    keep = [i for i, c in enumerate(names) if c not in index]
    header = _check_header([names[i] for i in keep], path, table)
    take = [(h, i) for h, i in zip(header, keep, strict=True) if used is None or h in used]
    try:
        data = file.read(columns=[names[i] for _, i in take])
    except errors as exc:
        raise ValueError(f"table {table!r}: cannot read {path.name} as Parquet: {exc}") from None
    cells: dict[str, _Cells] = {h: _arrow_cells(pa, data.column(j), table, h, path) for j, (h, _) in enumerate(take)}
    return _RawTable(path, header, cells, file.metadata.num_rows, lines=False)


def _arrow_cells(pa: ModuleType, col: Any, table: str, name: str, path: Path) -> _TypedCells:
    """The cells of one Parquet column, converted as the CSV reader would read the same data written as text."""
    import pyarrow.compute as pc

    kind = col.type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
        col = col.cast(kind)
    n = len(col)

    def as_text(arr: Any) -> np.ndarray:
        return np.asarray(pc.fill_null(arr, "").to_numpy(zero_copy_only=False), dtype=str)

    if pa.types.is_null(kind):
        return _TypedCells(lambda: np.full(n, "", dtype=str), numbers=np.full(n, np.nan))
    if pa.types.is_integer(kind) or pa.types.is_decimal(kind):
        numbers = _float_values(pa, pc, col)
        return _TypedCells(lambda: as_text(pc.cast(col, pa.string())), numbers=numbers,
                           strings=lambda: _fill(pc.cast(col, pa.string())))
    if pa.types.is_floating(kind):
        numbers = _float_values(pa, pc, col)
        return _TypedCells(lambda: np.where(np.isnan(numbers), "", numbers.astype(str)), numbers=numbers,
                           whole_keys=True)
    if pa.types.is_boolean(kind):
        return _TypedCells(lambda: as_text(pc.cast(col, pa.string())),
                           strings=lambda: _fill(pc.cast(col, pa.string())))
    string_view = getattr(pa.types, "is_string_view", lambda _: False)  # pyarrow >= 16 only
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or string_view(kind):
        def strings() -> Any:
            return _fill(pc.utf8_trim_whitespace(col.cast(pa.string())))

        return _TypedCells(lambda: as_text(strings()), strings=strings)
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        # numpy sees timestamps as UTC and floors them to whole seconds, as np.datetime64(text, "s") does for CSV
        stamps = col.to_numpy()
        missing = np.isnat(stamps)
        seconds = np.where(missing, np.nan, stamps.astype("datetime64[s]").astype(np.int64).astype(np.float64))
        return _TypedCells(lambda: np.where(missing, "", np.datetime_as_string(stamps, unit="auto")),
                           seconds=seconds)
    raise ValueError(f"table {table!r}: column {name!r} of {path.name} has type {col.type}, which a table cannot "
                     "hold (numbers, text, booleans, dates and timestamps can)")


def _fill(strings: Any) -> Any:
    """Arrow text with nulls as ``""`` (a missing cell, as an empty CSV cell is)."""
    import pyarrow.compute as pc

    return pc.fill_null(strings, "")


def _float_values(pa: ModuleType, pc: ModuleType, col: Any) -> np.ndarray:
    """Float64 values, NaN for nulls (integers beyond 2**53 rounded, as parsing their text would)."""
    return np.asarray(pc.fill_null(col.cast(pa.float64(), safe=False), np.nan).to_numpy(), dtype=np.float64)


def _seconds(ints: Any) -> np.ndarray:
    """Float64 of an Arrow integer array, NaN for nulls."""
    import pyarrow.compute as pc

    valid = np.asarray(pc.is_valid(ints).to_numpy(zero_copy_only=False), dtype=bool)
    out = np.asarray(pc.fill_null(ints, 0).to_numpy(), dtype=np.float64)
    out[~valid] = np.nan
    return out


def _arrow_numbers(strings: Any) -> np.ndarray | None:
    """Float values of Arrow text (``""`` = NaN), or None when some cell is not a number (as :func:`_numbers`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    nulled = pc.if_else(pc.equal(strings, ""), pa.scalar(None, pa.string()), strings)
    try:
        return np.asarray(pc.fill_null(pc.cast(nulled, pa.float64()), np.nan).to_numpy(), dtype=np.float64)
    except pa.ArrowInvalid:
        pass  # text, or numbers only numpy reads ("1_000"): numpy decides, once per distinct cell
    distinct = pc.unique(nulled).drop_null()
    if _numbers(np.asarray(distinct[:1000].to_numpy(zero_copy_only=False), dtype=str)) is None:
        return None  # text: decided without rendering every distinct cell
    parsed = _numbers(np.asarray(distinct.to_numpy(zero_copy_only=False), dtype=str))
    if parsed is None:
        return None
    at = np.asarray(pc.fill_null(pc.index_in(nulled, value_set=distinct), -1).to_numpy(), dtype=np.int64)
    return np.where(at >= 0, parsed[np.maximum(at, 0)] if parsed.size else np.nan, np.nan)


def _arrow_nominal(name: str, strings: Any) -> Column:
    """Codes of Arrow text (``""`` = missing) into the sorted distinct values, as :func:`nominal_column`
    (UTF-8 byte order is code point order, numpy's order of text)."""
    import pyarrow.compute as pc

    cats = pc.unique(strings)
    cats = cats.filter(pc.not_equal(cats, ""))
    cats = cats.take(pc.array_sort_indices(cats))
    codes = pc.fill_null(pc.index_in(strings, value_set=cats), -1)
    return Column(name, np.asarray(codes.to_numpy(), dtype=np.int32), tuple(cats.to_pylist()))


@dataclass
class _Keys:
    """A table's key column: Arrow text (hashed lookups), or numpy text sorted and each key's row (without Arrow)."""

    arrow: Any = None
    ordered: np.ndarray | None = None
    order: np.ndarray | None = None


def _keys(table: str, col: str, raw: _RawTable) -> _Keys:
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


def _rows(raw: _RawTable, i: int, j: int) -> str:
    return f"rows {i + 1} and {j + 1}" + (f" (lines {i + 2} and {j + 2})" if raw.lines else "")


def _resolve(table: str, parent: dict, raw: _RawTable, keys: _Keys) -> np.ndarray:
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


def _numbers(arr: np.ndarray) -> np.ndarray | None:
    """Float values of text cells (empty = NaN), or None when some cell is not a number."""
    filled = np.where(arr == "", "nan", arr)
    try:
        return filled.astype(np.float64)
    except ValueError:
        return None


def _times(table: str, col: str, arr: np.ndarray, row: Callable[[int], str],
           what: str = "time") -> tuple[np.ndarray, str]:
    """Numeric times as they are; ISO dates and datetimes as seconds since the epoch (empty = NaN)."""
    numbers = _numbers(arr)
    if numbers is not None:
        return numbers, "number"
    out = np.full(arr.size, np.nan)
    given = arr != ""
    try:
        out[given] = arr[given].astype("datetime64[s]").astype(np.int64)
        return out, "datetime"
    except ValueError:
        pass  # some cell is no date: cell by cell, to name the first
    for i in np.flatnonzero(given).tolist():
        try:
            out[i] = np.datetime64(arr[i], "s").astype(np.int64)
        except ValueError:
            raise ValueError(f"table {table!r}: {what} column {col!r}, {row(i)}: {str(arr[i])!r} is neither "
                             "a number nor an ISO date") from None
    return out, "datetime"


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
