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
from typing import Any, NamedTuple

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



def read_table(path: Path, table: str, used: set[str] | None = None,
               roles: dict[str, str] | None = None) -> RawTable:
    """The file's header, and cells of the ``used`` columns (all when None): other columns are never parsed.

    ``roles`` says which columns are read for their text (``"text"``: keys, links, nominal columns, labels) and
    which are times (``"time"``); the others are data, numbers when every cell is one. A CSV file is then read in
    blocks, each column converted as it comes (:func:`read_csv_arrow`).
    """
    if not path.exists():
        raise ValueError(f"table {table!r}: file {path} does not exist")
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return _read_parquet(path, table, used)
    if arrow_modules() is not None:
        raw = read_csv_arrow(path, table, used, roles)
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


#: Bytes of CSV text parsed at a time: a block's columns become numbers or codes before the next is read.
CSV_BLOCK_BYTES = 16 * 2**20


def _csv_options(names: list[str], read: list[str], block: int | None = None) -> dict[str, Any]:
    """pyarrow's CSV options: the header skipped (``names`` are Arrow's), every ``read`` column as text as it is."""
    import pyarrow as pa
    from pyarrow import csv as pcsv

    return {"read_options": pcsv.ReadOptions(column_names=names, skip_rows=1,
                                             **({} if block is None else {"block_size": block})),
            "parse_options": pcsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False),
            "convert_options": pcsv.ConvertOptions(column_types=dict.fromkeys(read, pa.string()), include_columns=read,
                                                   null_values=[], strings_can_be_null=False,
                                                   quoted_strings_can_be_null=False)}


def read_csv_arrow(path: Path, table: str, used: set[str] | None = None,
                   roles: dict[str, str] | None = None) -> RawTable | None:
    """A CSV file read by pyarrow's streaming reader; None when it refuses the file (ragged rows, blank lines, bad
    UTF-8): the ``csv`` module's reader then reads it or names the line.

    The file is parsed :data:`CSV_BLOCK_BYTES` at a time and each block's columns are converted at once
    (:class:`_StreamedCells`): the text of a table of 10 million rows is never resident, only its numbers, times and
    dictionary codes.
    """
    import pyarrow as pa
    from pyarrow import csv as pcsv

    header = _csv_header(path, table)
    names = [str(i) for i in range(len(header))]  # Arrow's names: the header's own may repeat after trimming
    read = [str(i) for i, h in enumerate(header) if used is None or h in used]
    roles = roles or {}

    def whole(i: str) -> Callable[[], Cells]:
        def column() -> Cells:  # the column's text read again, whole: for what its blocks could not keep
            data = pcsv.read_csv(path, **_csv_options(names, [i]))
            return _ArrowTextCells(data.column(0))
        return column

    cells = {i: _StreamedCells(roles.get(header[int(i)], "data"), whole(i)) for i in read}
    n_rows = 0
    try:
        with pcsv.open_csv(path, **_csv_options(names, read, CSV_BLOCK_BYTES)) as reader:
            for batch in reader:
                for k, i in enumerate(read):
                    cells[i].add(batch.column(k))
                n_rows += batch.num_rows
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    pa.default_memory_pool().release_unused()  # the blocks' text, which Arrow's allocator would keep for reuse
    return RawTable(path, header, {header[int(i)]: c for i, c in cells.items()}, n_rows, lines=True)


class _StreamedCells(Cells):
    """A CSV column read block by block, each block kept as what its role needs: float64 numbers, seconds of ISO
    datetimes, or dictionary codes of its (trimmed) text.

    The result is that of :class:`_ArrowTextCells` on the whole column: a data column is numbers when Arrow parses
    every cell (else its text, which numpy's parsers may still read as numbers, once per distinct cell, as there);
    a time column is numbers, or datetimes when Arrow parses every cell as one. A block that contradicts the blocks
    before it (text after numbers, numbers after datetimes) leaves the column to be read again whole when asked
    for (``whole``), as are text requests of a column kept as numbers. Blocks of empty cells fit any kind.
    """

    def __init__(self, role: str, whole: Callable[[], Cells]) -> None:
        self._role, self._whole, self._again = role, whole, None
        self._kind: str | None = None  # "number", "datetime", "text", or "whole" (read again)
        # per block: float64 numbers or seconds, the codes of its text, or a count of empty cells (numpy's memory, not
        # Arrow's: Arrow's pool would keep every block's buffers once they are joined)
        self._chunks: list[np.ndarray | _Codes | int] = []

    def add(self, col: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._kind == "whole":
            return
        strings = pc.utf8_trim_whitespace(col)
        if self._role == "text" or self._kind == "text":
            self._chunks.append(_codes(strings))
            self._kind = "text"
            return
        if not pc.any(pc.not_equal(strings, "")).as_py():
            self._chunks.append(len(strings))  # empty cells: NaN or "" once the column's kind is known
            return
        nulled = pc.if_else(pc.equal(strings, ""), pa.scalar(None, pa.string()), strings)
        kind, values = None, None
        try:
            values, kind = pc.cast(nulled, pa.float64()), "number"
        except pa.ArrowInvalid:
            if self._role == "time":
                try:
                    values, kind = pc.cast(pc.cast(nulled, pa.timestamp("s")), pa.int64()), "datetime"
                except pa.ArrowInvalid:
                    pass
            elif self._kind is None:  # text from its first cells on: kept as codes
                self._chunks.append(_codes(strings))
                self._kind = "text"
                return
        if kind is None or self._kind not in (None, kind):
            self._kind, self._chunks = "whole", []
            return
        self._kind = kind
        self._chunks.append(_seconds(values) if kind == "datetime" else
                            np.array(pc.fill_null(values, np.nan).to_numpy(), dtype=np.float64))

    def _read_again(self) -> Cells:
        if self._again is None:
            self._again, self._chunks = self._whole(), []
        return self._again

    def _floats(self) -> np.ndarray:
        return np.concatenate([np.full(c, np.nan) if isinstance(c, int) else c for c in self._chunks] or
                              [np.zeros(0)])

    def _dictionaries(self) -> list[_Codes]:
        import pyarrow as pa

        return [_codes(pa.array([""] * c, pa.string())) if isinstance(c, int) else c for c in self._chunks]

    def _text_kind(self) -> bool:
        return self._kind == "text" or (self._kind is None and self._role == "text")

    def strings(self) -> Any:
        if not self._text_kind():
            return self._read_again().strings()
        import pyarrow as pa

        return pa.chunked_array([c.dictionary.take(pa.array(c.indices)) for c in self._dictionaries()], pa.string())

    def keys(self) -> Any:
        return self.strings()

    def text(self) -> np.ndarray:
        if not self._text_kind():
            return self._read_again().text()
        return np.asarray(self.strings().to_numpy(zero_copy_only=False), dtype=str)

    def numbers(self) -> np.ndarray | None:
        if self._role != "text" and self._kind in (None, "number"):
            return self._floats()
        if self._kind == "datetime":
            return None  # ISO datetimes: no number, for Arrow as for numpy
        if not self._text_kind():
            return self._read_again().numbers()

        # as _arrow_numbers once Arrow refused a cell: numpy's parser on the distinct cells, or no numbers
        chunks = self._dictionaries()
        distinct = _distinct_cells(chunks)
        parsed = parse_numbers(np.asarray(distinct.to_numpy(zero_copy_only=False), dtype=str))
        if parsed is None:
            return None
        out = [_decode(c, distinct, parsed) for c in chunks]
        return np.concatenate(out) if out else np.zeros(0)

    def times(self, table: str, col: str, row: Callable[[int], str], what: str) -> tuple[np.ndarray, str]:
        if self._role != "text" and self._kind in (None, "number", "datetime"):
            return self._floats(), "datetime" if self._kind == "datetime" else "number"
        if self._text_kind():
            return _ArrowTextCells(self.strings()).times(table, col, row, what)
        return self._read_again().times(table, col, row, what)

    def column(self, name: str, nominal: bool) -> Column:
        if not nominal:
            numbers = self.numbers()
            if numbers is not None:
                return Column(name, numbers)
        if not self._text_kind():
            return self._read_again().column(name, nominal)
        import pyarrow.compute as pc

        # as _arrow_nominal: codes into the sorted distinct non-empty cells, here from each block's dictionary
        chunks = self._dictionaries()
        cats = _distinct_cells(chunks)
        cats = cats.take(pc.array_sort_indices(cats))
        codes = [_decode(c, cats, np.arange(len(cats), dtype=np.int32), missing=-1) for c in chunks]
        values = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int32)
        return Column(name, values.astype(np.int32, copy=False), tuple(cats.to_pylist()))


def _distinct_cells(chunks: list[_Codes]) -> Any:
    """The distinct non-empty cells of dictionary chunks (Arrow text)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    distinct = pc.unique(pa.chunked_array([c.dictionary for c in chunks], pa.string()).combine_chunks())
    return distinct.filter(pc.not_equal(distinct, ""))


def _decode(chunk: _Codes, values: Any, mapped: np.ndarray, missing: float = np.nan) -> np.ndarray:
    """Each cell of a dictionary chunk as ``mapped`` has its value in ``values`` (``missing`` where it is not
    there: the empty cell)."""
    import pyarrow.compute as pc

    at = np.asarray(pc.fill_null(pc.index_in(chunk.dictionary, value_set=values), -1).to_numpy(), dtype=np.int64)
    per_entry = np.where(at >= 0, mapped[np.maximum(at, 0)] if mapped.size else missing, missing)
    return per_entry[chunk.indices]


class _Codes(NamedTuple):
    """A block of text cells as indices into its distinct cells (in order of first appearance)."""

    indices: np.ndarray  # int32
    dictionary: Any  # Arrow text


def _codes(strings: Any) -> _Codes:
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(strings)
    return _Codes(np.array(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int32), encoded.dictionary)


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
