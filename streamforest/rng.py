"""Deterministic randomness: :func:`derive_seed` for seeds built from parts, and a counter-based generator with a
64-bit mixer for numba code.

Python's ``hash`` is salted per process and numpy's generators cannot be called from parallel numba loops with a
reproducible stream per item, so the hot loops draw from SplitMix64 keyed by a per-item seed: the same seed gives
the same draws in any process, on any machine, whatever the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_INV53 = 1.0 / 9007199254740992.0


@njit(inline="always")
def mix64(x: np.uint64) -> np.uint64:
    """The SplitMix64 finaliser: a bijective 64-bit mix with good avalanche."""
    z = (x ^ (x >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def next_u64(state: np.ndarray) -> np.uint64:
    """Advance ``state`` (a 1-element uint64 array) and return the next 64-bit draw."""
    state[0] = state[0] + _GOLDEN
    return mix64(state[0])


@njit(inline="always")
def next_below(state: np.ndarray, n: int) -> int:
    """A draw from ``0 .. n-1``."""
    return int((next_u64(state) >> np.uint64(11)) * _INV53 * n)


def derive_seed(*parts: int) -> int:
    """Combine integers into one 64-bit seed, the same in every process and on every machine (no salted ``hash``).

    The forest derives every tree's seed from its own seed, the generation and the tree; a caller that starts
    several forests from one seed derives theirs the same way.

    Examples
    --------
    >>> derive_seed(7, 0) == derive_seed(7, 0) != derive_seed(7, 1)
    True
    >>> 0 <= derive_seed(-1, 2**70) < 2**64
    True
    """
    mask = (1 << 64) - 1
    h = 0x6A09E667F3BCC909
    for p in parts:
        h = (h ^ (int(p) & mask)) & mask
        h = (h + 0x9E3779B97F4A7C15) & mask
        z = h
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        h = z ^ (z >> 31)
    return h


def derive_seeds(*parts: int, n: int) -> np.ndarray:
    """``[derive_seed(*parts, t) for t in range(n)]`` as a ``uint64`` array: the last step of :func:`derive_seed`
    on a vector of ``t`` (a generation's tree seeds, derived at every growth).

    Examples
    --------
    >>> [int(s) for s in derive_seeds(7, 3, n=4)] == [derive_seed(7, 3, t) for t in range(4)]
    True
    """
    h = np.uint64(derive_seed(*parts)) ^ np.arange(n, dtype=np.uint64)
    h = h + _GOLDEN  # wraps modulo 2**64, as derive_seed's mask does
    z = (h ^ (h >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))
