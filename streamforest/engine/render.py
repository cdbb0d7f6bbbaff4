"""JSON lines of per-sample records, written in bulk by numba: the same bytes as ``orjson.dumps`` of each record.

A republication is tens of thousands of records of one shape, each holding a run of numbers (the encoding's
indices and values, the class probabilities). Building a Python object per number and then serializing it costs
more than the forest's own scoring, so the lines are written straight from the arrays: every line is

    seg[0] id seg[1] id seg[2] ints seg[3] floats seg[4]

where the five ``seg`` are the parts shared by every line (the escaped stream, the model version, the field
names), ``id`` is the sample id, ``ints`` the row's integers joined by commas and ``floats`` the row's floats,
each preceded by its name (``"0":`` for a class probability, nothing for an encoding value). Integers are written
in decimal as JSON does; floats are written as the text orjson gives each distinct value (a table made once per
batch), so the bytes are orjson's by construction, including ``null`` for a non-finite value.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import NamedTuple

import numpy as np
import orjson
from numba import njit, prange

from streamforest.threads import single_thread

#: Lines of at least this many bytes in all are written in :data:`BLOCKS` blocks by every numba thread; fewer, on
#: the calling thread alone (a parallel region waits for a busy core; a quarter megabyte takes half a millisecond).
PARALLEL_FROM = 1 << 18
#: Blocks of lines written in parallel: more than the threads, so that a thread slowed down leaves its share to the
#: others; the bytes do not depend on it.
BLOCKS = 16


def texts(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings as one ``uint8`` buffer and their offsets (``len(parts) + 1``)."""
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets


def escaped(s: str) -> bytes:
    """The JSON text of a string without its quotes (escaping is per character, so pieces concatenate)."""
    return orjson.dumps(s)[1:-1]


def id_texts(ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The escaped ids (buffer, offsets): in one piece when no id needs escaping (the usual case), else one by
    one."""
    joined = "".join(ids)
    if joined.isascii():
        raw = joined.encode("ascii")
        if orjson.dumps(joined)[1:-1] == raw:
            offsets = np.zeros(len(ids) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)), out=offsets[1:])
            return np.frombuffer(raw, dtype=np.uint8), offsets
    return texts([escaped(s) for s in ids])


def float_texts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The orjson text of every value (buffer, offsets), from one ``orjson.dumps`` of them all: the text of a
    number holds no comma, so the list's commas are the boundaries."""
    whole = np.frombuffer(orjson.dumps(values.tolist()), dtype=np.uint8)[1:-1]
    offsets = np.empty(values.size + 1, dtype=np.int64)
    offsets[0], offsets[-1] = 0, whole.size + 1
    offsets[1:-1] = np.flatnonzero(whole == ord(",")) + 1
    # Each offset but the first points past a comma: drop the commas by shifting each text's start.
    buf = np.delete(whole, offsets[1:-1] - 1) if values.size > 1 else whole
    offsets -= np.arange(values.size + 1)
    offsets[0] = 0
    return buf, offsets


def float_table(values: np.ndarray, distinct: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Texts of ``values`` (buffer, offsets) and every value's index into them.

    ``distinct``: one text per distinct value (told apart by their bits, so ``-0.0`` and ``0.0`` keep their own
    texts), for values that repeat, like an encoding's; else one text per value.
    """
    values = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    if not distinct:
        buf, off = float_texts(values)
        return buf, off, np.arange(values.size, dtype=np.int64)
    bits = values.view(np.uint64)
    # Encodings are mostly 1.0 (a node visited once): text 0, and only the other values are sorted.
    one = bits == np.float64(1.0).view(np.uint64)
    uniq, rest = np.unique(bits[~one], return_inverse=True)
    index = np.zeros(bits.size, dtype=np.int64)
    index[~one] = rest.reshape(-1) + 1
    buf, off = float_texts(np.concatenate([[1.0], uniq.view(np.float64)]))
    return buf, off, index


@njit(inline="always")
def _put(out, pos, src, a, b) -> int:
    for q in range(a, b):
        out[pos] = src[q]
        pos += 1
    return pos


@njit(inline="always")
def _put_int(out, pos, v) -> int:
    """Write integer ``v`` in decimal; returns where it ends."""
    if v < 0:
        out[pos] = 45  # "-"
        pos += 1
        v = -v
    u = np.uint64(v)
    n = 1
    bound = np.uint64(10)
    while n < 20 and u >= bound:
        n += 1
        bound *= np.uint64(10)
    q = pos + n - 1
    ten = np.uint64(10)
    while q >= pos:
        out[q] = np.uint8(u % ten + np.uint64(48))  # by a constant: a multiplication, not a division; all unsigned
        u //= ten
        q -= 1
    return pos + n


class Texts(NamedTuple):
    """Byte strings end to end: text ``i`` is ``buf[off[i]:off[i + 1]]``."""

    buf: np.ndarray
    off: np.ndarray


class Blocks(NamedTuple):
    """Lines written apart: block ``b`` holds lines ``first[b]:first[b + 1]``, written from ``start[b]`` of the
    buffer (far enough from the next block's start for the block's longest possible lines)."""

    first: np.ndarray
    start: np.ndarray


class Rows(NamedTuple):
    """The numbers of every line: line ``i`` holds ``ints[iptr[i]:iptr[i + 1]]`` and the floats
    ``fptr[i]:fptr[i + 1]``, float ``q`` written as text ``index[q]`` of the float table (text 0 when ``single``)."""

    iptr: np.ndarray
    ints: np.ndarray
    fptr: np.ndarray
    index: np.ndarray
    single: bool


@njit(inline="always")
def _line(seg, ids, names, table, rows, i, out, pos) -> int:
    """Write line ``i`` into ``out`` from ``pos``; returns where it ends. The arguments are those of
    :func:`_render`."""
    iptr, ints, fptr, index, single = rows
    n_names = names.off.shape[0] - 1
    pos = _put(out, pos, seg.buf, seg.off[0], seg.off[1])
    pos = _put(out, pos, ids.buf, ids.off[i], ids.off[i + 1])
    pos = _put(out, pos, seg.buf, seg.off[1], seg.off[2])
    pos = _put(out, pos, ids.buf, ids.off[i], ids.off[i + 1])
    pos = _put(out, pos, seg.buf, seg.off[2], seg.off[3])
    for q in range(iptr[i], iptr[i + 1]):
        if q > iptr[i]:
            out[pos] = 44  # ","
            pos += 1
        pos = _put_int(out, pos, np.int64(ints[q]))
    pos = _put(out, pos, seg.buf, seg.off[3], seg.off[4])
    c = 0
    for q in range(fptr[i], fptr[i + 1]):
        if q > fptr[i]:
            out[pos] = 44
            pos += 1
        pos = _put(out, pos, names.buf, names.off[c], names.off[c + 1])
        c = c + 1 if c + 1 < n_names else 0
        t = 0 if single else index[q]
        pos = _put(out, pos, table.buf, table.off[t], table.off[t + 1])
    return _put(out, pos, seg.buf, seg.off[4], seg.off[5])


@njit(parallel=True, cache=True)
def _render(seg, ids, names, table, rows, blocks, out, ends):
    """Write every line into ``out``; ``ends[i + 1]`` is where line ``i`` ends. ``seg``, ``ids``, ``names`` and
    ``table`` are :class:`Texts`: the five segments, the escaped ids, the float names and the float table; ``rows``
    the :class:`Rows`; ``blocks`` the :class:`Blocks`, written in parallel, each from its own start.
    """
    for b in prange(blocks.first.shape[0] - 1):
        pos = blocks.start[b]
        for i in range(blocks.first[b], blocks.first[b + 1]):
            pos = _line(seg, ids, names, table, rows, i, out, pos)
            ends[i + 1] = pos


def render(segments: list[bytes], ids: list[str], iptr: np.ndarray, ints: np.ndarray, fptr: np.ndarray,
           names: list[bytes], floats: np.ndarray | None, distinct: bool = False) -> tuple[bytes, np.ndarray]:
    """The lines (one bytes) and where each ends (``len(ids) + 1`` offsets, from 0).

    Line ``i`` holds ``ints[iptr[i]:iptr[i + 1]]`` and ``floats[fptr[i]:fptr[i + 1]]`` (``floats`` None: every
    float is ``1.0``); the ``k``-th float of a line is preceded by ``names[k % len(names)]``. ``distinct``: the
    floats repeat (they are written from a table of their distinct values).
    """
    if len(segments) != 5:
        raise ValueError(f"a line has 5 segments, got {len(segments)}")
    seg, seg_off = texts(segments)
    id_buf, id_off = id_texts(ids)
    name_buf, name_off = texts(names)
    if floats is None:
        table, table_off = texts([orjson.dumps(1.0)])
        index, single = np.zeros(0, dtype=np.int64), True
    else:
        table, table_off, index = float_table(floats, distinct=distinct)
        single = False
    m = len(ids)
    iptr = np.ascontiguousarray(iptr, dtype=np.int64)
    fptr = np.ascontiguousarray(fptr, dtype=np.int64)
    n_ints = int(iptr[m] - iptr[0])
    widest = max((len(str(int(v))) for v in (ints.min(), ints.max())), default=1) if n_ints else 1
    # Every line's longest possible text, so that blocks of lines can be written apart, each from its own start.
    longest = (len(seg) + 2 * np.diff(id_off) + np.diff(iptr) * (widest + 1)
               + np.diff(fptr) * (int(np.diff(name_off).max()) + int(np.diff(table_off).max()) + 1))
    bound = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(longest, out=bound[1:])
    n_blocks = max(1, min(m, BLOCKS)) if bound[m] >= PARALLEL_FROM else 1
    first = np.arange(n_blocks + 1, dtype=np.int64) * m // n_blocks
    blocks = Blocks(first, bound[first[:-1]])
    out = np.empty(bound[m], dtype=np.uint8)
    ends = np.zeros(m + 1, dtype=np.int64)
    with nullcontext() if n_blocks > 1 else single_thread():
        _render(Texts(seg, seg_off), Texts(id_buf, id_off), Texts(name_buf, name_off), Texts(table, table_off),
                Rows(iptr, np.ascontiguousarray(ints), fptr, index, single), blocks, out, ends)
    stops = ends[first[1:]]
    # Close the gaps between blocks: each block's ends move back by the room the blocks before it left unused.
    gaps = blocks.start - np.concatenate([[0], np.cumsum(stops - blocks.start)[:-1]])
    ends[1:] -= np.repeat(gaps, np.diff(first))
    return b"".join(out[a:b] for a, b in zip(blocks.start.tolist(), stops.tolist(), strict=True)), ends
