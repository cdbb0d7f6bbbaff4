"""Table files read into per-column cells: CSV by pyarrow's columnar reader where installed (the ``csv`` module
otherwise, and for files Arrow refuses), Parquet by pyarrow.

:func:`read_table` gives a :class:`RawTable`: the header and, per used column, its :class:`Cells` (text cells for
CSV, typed cells for Parquet), so that :mod:`streamforest.relational.schema` turns cells into keys, links, columns
and times whatever the file was. 10 million keys or nominal cells stay Arrow arrays, never Python objects.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from streamforest.relational.tables import Column, nominal_column

PARQUET_SUFFIXES = {".parquet", ".pq"}


def arrow_modules() -> tuple[ModuleType, ModuleType] | None:
    """pyarrow and its compute functions, or None when pyarrow is not installed (CSV is then read by ``csv``)."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return None
    return pa, pc


class Cells:
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
        arrow = arrow_modules()
        return None if arrow is None else arrow[0].array(self.key_text(), arrow[0].string())

    def numbers(self) -> np.ndarray | None:
        raise NotImplementedError

    def distinct_keys(self) -> bool:
        """True when the cells are known, cheaply, to be keys without an empty cell or a repeat (False: not known;
        the text of the keys then decides, and names the row)."""
        return False

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


class _TextCells(Cells):
    """A column of a CSV file read by the ``csv`` module: numpy text cells (``""`` = missing)."""

    def __init__(self, cells: np.ndarray) -> None:
        self._cells = cells

    def text(self) -> np.ndarray:
        return self._cells

    def numbers(self) -> np.ndarray | None:
        return parse_numbers(self._cells)

    def times(self, table: str, col: str, row: Callable[[int], str], what: str) -> tuple[np.ndarray, str]:
        return parse_times(table, col, self._cells, row, what)


class _ArrowTextCells(Cells):
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
            return parse_times(table, col, self.text(), row, what)
        return _seconds(pc.cast(stamps, pa.int64())), "datetime"


class _TypedCells(Cells):
    """A column of a Parquet file: its type says what it is; its text is rendered only when something asks.

    ``numbers`` (float64, NaN = null) for a numeric column, ``seconds`` (since the epoch, NaN = null) for a date or
    timestamp column, neither for text and booleans: those are nominal, as a CSV column of such cells would be.
    ``strings`` gives the cells as Arrow text where the type allows it without numpy (text, integers, booleans).
    """

    def __init__(self, render: Callable[[], np.ndarray],
                 numbers: np.ndarray | Callable[[], np.ndarray] | None = None,
                 seconds: np.ndarray | None = None, whole_keys: bool = False,
                 strings: Callable[[], Any] | None = None, ints: Callable[[], Any] | None = None) -> None:
        self._render, self._text = render, None
        self._numbers, self._seconds, self._whole_keys = numbers, seconds, whole_keys
        self._make_strings, self._strings = strings, None
        self._ints = ints

    def distinct_keys(self) -> bool:
        if self._ints is None:
            return False
        ints = self._ints()
        # an integer key column: no null and no repeat is all a key check needs, on the integers themselves
        if ints.null_count:
            return False
        return _distinct(np.asarray(ints.to_numpy(), dtype=np.int64))

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
        if callable(self._numbers):  # made when asked: a key column that is only checked never needs them
            self._numbers = self._numbers()
        return self._numbers

    def times(self, table: str, col: str, row: Callable[[int], str], what: str) -> tuple[np.ndarray, str]:
        if self._seconds is not None:
            return self._seconds, "datetime"
        if self._numbers is not None:
            return self.numbers(), "number"
        return parse_times(table, col, self.text(), row, what)  # text holding ISO dates, as in a CSV file


class _LazyCells(Cells):
    """A column's cells made when first asked for (a Parquet column read from the file then, not before)."""

    def __init__(self, make: Callable[[], Cells]) -> None:
        self._make, self._cells = make, None

    @property
    def cells(self) -> Cells:
        if self._cells is None:
            self._cells = self._make()
        return self._cells

    def text(self) -> np.ndarray:
        return self.cells.text()

    def key_text(self) -> np.ndarray:
        return self.cells.key_text()

    def strings(self) -> Any | None:
        return self.cells.strings()

    def keys(self) -> Any | None:
        return self.cells.keys()

    def numbers(self) -> np.ndarray | None:
        return self.cells.numbers()

    def distinct_keys(self) -> bool:
        return self.cells.distinct_keys()

    def times(self, table: str, col: str, row: Callable[[int], str], what: str) -> tuple[np.ndarray, str]:
        return self.cells.times(table, col, row, what)

    def column(self, name: str, nominal: bool) -> Column:
        return self.cells.column(name, nominal)


@dataclass
class RawTable:
    """A table file as read, before the schema says which columns are keys, links, times or data."""

    path: Path
    header: list[str]
    cells: dict[str, Cells]
    n_rows: int
    lines: bool  # CSV: a row has a line number in the file, which errors give

    def row(self, i: int) -> str:
        """How errors name row ``i`` (0-based)."""
        return f"row {i + 1} (line {i + 2})" if self.lines else f"row {i + 1}"



def read_table(path: Path, table: str, used: set[str] | None = None) -> RawTable:
    """The file's header, and cells of the ``used`` columns (all when None): other columns are never parsed."""
    if not path.exists():
        raise ValueError(f"table {table!r}: file {path} does not exist")
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return _read_parquet(path, table, used)
    if arrow_modules() is not None:
        raw = read_csv_arrow(path, table, used)
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


def read_csv_arrow(path: Path, table: str, used: set[str] | None = None) -> RawTable | None:
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
    cells: dict[str, Cells] = {header[int(i)]: _ArrowTextCells(data.column(i)) for i in read}
    return RawTable(path, header, cells, data.num_rows, lines=True)


def _read_csv(path: Path, table: str) -> RawTable:
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
    cells: dict[str, Cells] = {h: _TextCells(np.asarray([c.strip() for c in col], dtype=str))
                                for h, col in zip(header, cols, strict=True)}
    return RawTable(path, header, cells, len(rows), lines=True)


def _check_header(header: list[str], path: Path, table: str) -> list[str]:
    header = [h.strip() for h in header]
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise ValueError(f"table {table!r}: {path.name} repeats columns {dup}")
    return header


def _read_parquet(path: Path, table: str, used: set[str] | None = None) -> RawTable:
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

    def reader(name: str) -> Callable[[], Any]:
        def read() -> Any:
            try:
                return file.read(columns=[name]).column(0)
            except errors as exc:
                raise ValueError(f"table {table!r}: cannot read {path.name} as Parquet: {exc}") from None
        return read

    # One column at a time, each read when the schema's roles ask for it and converted at once: the Arrow column goes
    # as soon as its numbers are made (text is read again from the file if something asks for it), so no whole
    # table of 10 million rows is alive beside what it becomes.
    n = file.metadata.num_rows
    cells: dict[str, Cells] = {h: _arrow_cells(pa, reader(names[i]), file.schema_arrow.field(names[i]).type, n,
                                               table, h, path) for h, i in take}
    return RawTable(path, header, cells, file.metadata.num_rows, lines=False)


def _arrow_cells(pa: ModuleType, read: Callable[[], Any], kind: Any, n: int, table: str, name: str,
                 path: Path) -> Cells:
    """The cells of one Parquet column (``read`` gives it as Arrow), converted as the CSV reader would read the same
    data written as text."""
    import pyarrow.compute as pc

    dictionary = pa.types.is_dictionary(kind)
    if dictionary:
        kind = kind.value_type

    def col() -> Any:
        c = read()
        return c.cast(kind) if dictionary else c

    def as_text(arr: Any) -> np.ndarray:
        return np.asarray(pc.fill_null(arr, "").to_numpy(zero_copy_only=False), dtype=str)

    if pa.types.is_null(kind):
        return _LazyCells(lambda: _TypedCells(lambda: np.full(n, "", dtype=str), numbers=np.full(n, np.nan)))
    if pa.types.is_integer(kind) or pa.types.is_decimal(kind):
        return _LazyCells(lambda: _TypedCells(lambda: as_text(pc.cast(col(), pa.string())),
                                              numbers=lambda: _float_values(pa, pc, col()),
                                              strings=lambda: _fill(pc.cast(col(), pa.string())),
                                              ints=col if pa.types.is_integer(kind) else None))
    if pa.types.is_floating(kind):
        def floats() -> _TypedCells:
            numbers = _float_values(pa, pc, col())
            return _TypedCells(lambda: np.where(np.isnan(numbers), "", numbers.astype(str)), numbers=numbers,
                               whole_keys=True)
        return _LazyCells(floats)
    if pa.types.is_boolean(kind):
        return _LazyCells(lambda: _TypedCells(lambda: as_text(pc.cast(col(), pa.string())),
                                              strings=lambda: _fill(pc.cast(col(), pa.string()))))
    string_view = getattr(pa.types, "is_string_view", lambda _: False)  # pyarrow >= 16 only
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or string_view(kind):
        def strings() -> Any:
            return _fill(pc.utf8_trim_whitespace(col().cast(pa.string())))

        return _LazyCells(lambda: _TypedCells(lambda: as_text(strings()), strings=strings))
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        def text() -> np.ndarray:
            values = col().to_numpy()
            return np.where(np.isnat(values), "", np.datetime_as_string(values, unit="auto"))

        def stamps() -> _TypedCells:
            # numpy sees timestamps as UTC and floors them to whole seconds, as np.datetime64(text, "s") does
            values = col().to_numpy()
            seconds = np.where(np.isnat(values), np.nan,
                               values.astype("datetime64[s]").astype(np.int64).astype(np.float64))
            return _TypedCells(text, seconds=seconds)
        return _LazyCells(stamps)
    raise ValueError(f"table {table!r}: column {name!r} of {path.name} has type {kind}, which a table cannot "
                     "hold (numbers, text, booleans, dates and timestamps can)")


def _distinct(ints: np.ndarray) -> bool:
    """Whether no integer repeats: a sort (or one pass, when they already increase), where Arrow's
    ``count_distinct`` builds a hash table of 1.6 GiB for 9 million distinct integers.

    >>> _distinct(np.array([3, 1, 2])), _distinct(np.array([1, 2, 1]))
    (True, False)
    """
    if ints.size < 2 or bool(np.all(ints[1:] > ints[:-1])):
        return True
    ints = np.sort(ints)
    return not bool(np.any(ints[1:] == ints[:-1]))


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
    if parse_numbers(np.asarray(distinct[:1000].to_numpy(zero_copy_only=False), dtype=str)) is None:
        return None  # text: decided without rendering every distinct cell
    parsed = parse_numbers(np.asarray(distinct.to_numpy(zero_copy_only=False), dtype=str))
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


def parse_numbers(arr: np.ndarray) -> np.ndarray | None:
    """Float values of text cells (empty = NaN), or None when some cell is not a number."""
    filled = np.where(arr == "", "nan", arr)
    try:
        return filled.astype(np.float64)
    except ValueError:
        return None


def parse_times(table: str, col: str, arr: np.ndarray, row: Callable[[int], str],
           what: str = "time") -> tuple[np.ndarray, str]:
    """Numeric times as they are; ISO dates and datetimes as seconds since the epoch (empty = NaN)."""
    numbers = parse_numbers(arr)
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
