"""The most likely rise of a classifier's error rate in the window: a one-sided scan of its 0/1 errors (numba).

The drift detector (River's ADWIN by default) signals changes of the mean error in both directions and forgets what
came before each, a fall as well (the learning curve of a young forest): a rise soon after such a fall has only a
few samples to be compared with, and ADWIN's bound (Hoeffding's, split over its window) is loose for them. The scan
compares every split of the errors the current forest made in the window, oldest first, by the binomial
log-likelihood ratio of "two error rates, the later one higher" against "one rate"; its maximum says where the
error most likely rose and how strongly.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def _loglik(k: float, n: float) -> float:
    """Binomial log-likelihood of ``k`` errors in ``n`` at the rate ``k / n`` (``0 log 0 = 0``)."""
    out = 0.0
    if k > 0.0:
        out += k * math.log(k / n)
    if n - k > 0.0:
        out += (n - k) * math.log((n - k) / n)
    return out


@njit(cache=True)
def rise_point(errors: np.ndarray, start: int, length: int, min_side: int, stride: int) -> tuple[float, int]:
    """The largest log-likelihood ratio of a rise of the error rate and how many errors follow its split.

    ``errors`` is a ring of 0/1 errors (NaN where not scored); the window holds ``length`` slots from ``start`` on,
    oldest first. Splits leave at least ``min_side`` scored errors on each side; ``(0.0, 0)`` if none rises.
    """
    size = errors.size
    total = 0.0
    m = 0
    at = start
    for _ in range(length):  # the ring's slots in order, wrapped by a comparison (no division per slot)
        v = errors[at]
        at = at + 1 if at + 1 < size else 0
        if not math.isnan(v):
            total += v
            m += 1
    best, after = 0.0, 0
    if m < 2 * min_side:
        return best, after
    whole = _loglik(total, m)
    k0 = 0.0
    n0 = 0
    at = start
    for _ in range(length):
        v = errors[at]
        at = at + 1 if at + 1 < size else 0
        if math.isnan(v):
            continue
        k0 += v
        n0 += 1
        n1 = m - n0
        if n0 < min_side or n1 % stride:
            continue
        if n1 < min_side:
            break
        k1 = total - k0
        if k1 * n0 <= k0 * n1:  # the later rate is not higher: no rise here
            continue
        llr = _loglik(k0, n0) + _loglik(k1, n1) - whole
        if llr > best:
            best, after = llr, n1
    return best, after
