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

import numpy as np
import orjson
from numba import njit, prange


def texts(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings as one ``uint8`` buffer and their offsets (``len(parts) + 1``)."""
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets


def escaped(s: str) -> bytes:
    """The JSON text of a string without its quotes (escaping is per character, so pieces concatenate)."""
    return orjson.dumps(s)[1:-1]


def float_table(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each distinct value's orjson text (buffer, offsets) and every value's index into them.

    Values are told apart by their bits, so ``-0.0`` and ``0.0`` keep their own texts.
    """
    bits = np.ascontiguousarray(values, dtype=np.float64).reshape(-1).view(np.uint64)
    distinct, index = np.unique(bits, return_inverse=True)
    buf, off = texts([orjson.dumps(v) for v in distinct.view(np.float64).tolist()])
    return buf, off, index.astype(np.int64)


@njit(inline="always")
def _int_len(v) -> int:
    n = 1
    if v < 0:
        n += 1
        v = -v
    while v >= 10:
        v //= 10
        n += 1
    return n


@njit(inline="always")
def _put_int(out, pos, v) -> int:
    n = _int_len(v)
    if v < 0:
        out[pos] = 45  # "-"
        v = -v
    q = pos + n - 1
    while True:
        out[q] = 48 + v % 10
        v //= 10
        q -= 1
        if v == 0:
            break
    return pos + n


@njit(inline="always")
def _put(out, pos, src, a, b) -> int:
    for q in range(a, b):
        out[pos] = src[q]
        pos += 1
    return pos


@njit(inline="always")
def _line(i, out, pos, write, seg, seg_off, ids, ids_off, iptr, ints, fptr, names, names_off, table, table_off,
          index, single) -> int:
    """Write (or, with ``write`` False, only measure) line ``i`` from ``pos``; returns where it ends."""
    n_names = names_off.shape[0] - 1
    for s in range(5):
        a, b = seg_off[s], seg_off[s + 1]
        if write:
            pos = _put(out, pos, seg, a, b)
        else:
            pos += b - a
        if s <= 1:
            a, b = ids_off[i], ids_off[i + 1]
            if write:
                pos = _put(out, pos, ids, a, b)
            else:
                pos += b - a
        elif s == 2:
            for q in range(iptr[i], iptr[i + 1]):
                if q > iptr[i]:
                    if write:
                        out[pos] = 44  # ","
                    pos += 1
                if write:
                    pos = _put_int(out, pos, ints[q])
                else:
                    pos += _int_len(ints[q])
        elif s == 3:
            for q in range(fptr[i], fptr[i + 1]):
                k = q - fptr[i]
                if k > 0:
                    if write:
                        out[pos] = 44
                    pos += 1
                a, b = names_off[k % n_names], names_off[k % n_names + 1]
                if write:
                    pos = _put(out, pos, names, a, b)
                else:
                    pos += b - a
                t = 0 if single else index[q]
                a, b = table_off[t], table_off[t + 1]
                if write:
                    pos = _put(out, pos, table, a, b)
                else:
                    pos += b - a
    return pos


@njit(parallel=True, cache=True)
def _render(seg, seg_off, ids, ids_off, iptr, ints, fptr, names, names_off, table, table_off, index, single, ends):
    m = ids_off.shape[0] - 1
    dummy = np.empty(0, dtype=np.uint8)
    for i in prange(m):
        ends[i + 1] = _line(i, dummy, 0, False, seg, seg_off, ids, ids_off, iptr, ints, fptr, names, names_off,
                            table, table_off, index, single)
    for i in range(m):
        ends[i + 1] += ends[i]
    out = np.empty(ends[m], dtype=np.uint8)
    for i in prange(m):
        _line(i, out, ends[i], True, seg, seg_off, ids, ids_off, iptr, ints, fptr, names, names_off, table,
              table_off, index, single)
    return out


def render(segments: list[bytes], ids: list[str], iptr: np.ndarray, ints: np.ndarray, fptr: np.ndarray,
           names: list[bytes], floats: np.ndarray | None) -> tuple[bytes, np.ndarray]:
    """The lines (one bytes) and where each ends (``len(ids) + 1`` offsets, from 0).

    Line ``i`` holds ``ints[iptr[i]:iptr[i + 1]]`` and ``floats[fptr[i]:fptr[i + 1]]`` (``floats`` None: every
    float is ``1.0``); the ``k``-th float of a line is preceded by ``names[k % len(names)]``.
    """
    if len(segments) != 5:
        raise ValueError(f"a line has 5 segments, got {len(segments)}")
    seg, seg_off = texts(segments)
    id_buf, id_off = texts([escaped(s) for s in ids])
    name_buf, name_off = texts(names)
    if floats is None:
        table, table_off = texts([orjson.dumps(1.0)])
        index, single = np.zeros(0, dtype=np.int64), True
    else:
        table, table_off, index = float_table(floats)
        single = False
    ends = np.zeros(len(ids) + 1, dtype=np.int64)
    out = _render(seg, seg_off, id_buf, id_off, np.ascontiguousarray(iptr, dtype=np.int64),
                  np.ascontiguousarray(ints), np.ascontiguousarray(fptr, dtype=np.int64), name_buf, name_off, table,
                  table_off, index, single, ends)
    return out.tobytes(), ends
