"""The most likely rise of a forest's error in the window: a one-sided scan of its errors (numba).

The drift detector (River's ADWIN by default) signals changes of the mean error in both directions and forgets what
came before each, a fall as well (the learning curve of a young forest): a rise soon after such a fall has only a
few samples to be compared with, and ADWIN's bound (Hoeffding's, split over its window) is loose for them. The scan
compares every split of the errors the current forest made in the window, oldest first, by the log-likelihood ratio
of "two means, the later one higher" against "one mean" (binomial for a classifier's 0/1 errors, normal for a
regressor's absolute errors); its maximum says where the error most likely rose and how strongly.
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
def _squares(s: float, s2: float, n: float) -> float:
    """The sum of squared deviations from the mean of ``n`` values whose sum is ``s`` and sum of squares ``s2``."""
    return max(s2 - s * s / n, 0.0)


@njit(cache=True)
def rise_point(errors: np.ndarray, start: int, length: int, min_side: int, stride: int,
               binary: bool = True) -> tuple[float, int]:
    """The largest log-likelihood ratio of a rise of the mean error and how many errors follow its split.

    ``errors`` is a ring of errors (NaN where not scored); the window holds ``length`` slots from ``start`` on,
    oldest first. ``binary``: 0/1 errors, binomial likelihoods; else errors of any size (a regressor's absolute
    errors), normal likelihoods with one variance for both sides (the ratio is ``m / 2 log(SS / (SS_0 + SS_1))``
    of the sums of squared deviations over all ``m`` and on each side). Splits leave at least ``min_side`` scored
    errors on each side; ``(0.0, 0)`` if none rises.
    """
    size = errors.size
    total = 0.0
    total2 = 0.0
    m = 0
    at = start
    for _ in range(length):  # the ring's slots in order, wrapped by a comparison (no division per slot)
        v = errors[at]
        at = at + 1 if at + 1 < size else 0
        if not math.isnan(v):
            total += v
            total2 += v * v
            m += 1
    best, after = 0.0, 0
    if m < 2 * min_side:
        return best, after
    whole = _loglik(total, m) if binary else _squares(total, total2, m)
    if not binary and whole <= 1e-12 * total2:  # every error alike (up to rounding: no variance to compare by)
        return best, after
    k0 = 0.0
    q0 = 0.0
    n0 = 0
    at = start
    for _ in range(length):
        v = errors[at]
        at = at + 1 if at + 1 < size else 0
        if math.isnan(v):
            continue
        k0 += v
        q0 += v * v
        n0 += 1
        n1 = m - n0
        if n0 < min_side or n1 % stride:
            continue
        if n1 < min_side:
            break
        k1 = total - k0
        if k1 * n0 <= k0 * n1:  # the later rate is not higher: no rise here
            continue
        if binary:
            llr = _loglik(k0, n0) + _loglik(k1, n1) - whole
        else:
            within = _squares(k0, q0, n0) + _squares(k1, total2 - q0, n1)
            llr = 0.5 * m * math.log(whole / within) if within > 0.0 else math.inf
        if llr > best:
            best, after = llr, n1
    return best, after
