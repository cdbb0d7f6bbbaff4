"""The weighted-feature-use bookkeeping of Motl & Kordík (2019), Algorithm 1, kept in log space.

Every feature has a *virtual use* ``V_f``: the sum, over all generations, of the generation weight times the number
of its trees that could use ``f``. When feature ``d`` arrives and its generation uses the features ``u_f`` times
(``u_d`` = the number of trees, since the new feature is forced), the generation gets the weight

    w = mean(V_old) / (u_d - mean(u_old))

which is exactly what makes ``V_d = w * u_d`` equal the mean of the old features' ``V`` after the update
``V += w * u``: the new feature is as represented in the weighted forest as an average old one.

``w`` grows about ``1 / (1 - mtry)`` per generation, so after thousands of features it would overflow a float.
The ledger therefore keeps ``V = exp(log_scale) * v`` with ``max(v) == 1`` and hands out *log* weights; forest
predictions only need weight shares, which are computed from log weights without ever leaving float range.
"""

from __future__ import annotations

import math

import numpy as np


class WeightLedger:
    """Virtual feature use, stored as ``exp(log_scale) * v``.

    Examples
    --------
    >>> ledger = WeightLedger()
    >>> ledger.challenger(np.array([30.0]))
    0.0
    >>> lw = ledger.challenger(np.array([10.0, 30.0]))
    >>> round(math.exp(lw), 6)   # mean(V_old) / (30 - 10) = 30 / 20
    1.5
    >>> ledger.virtual_use().round(6).tolist()   # the new feature now matches the old one
    [45.0, 45.0]
    """

    def __init__(self) -> None:
        self.log_scale = 0.0
        self.v = np.zeros(0)

    def _grow(self, n_features: int) -> None:
        if self.v.size < n_features:
            self.v = np.concatenate([self.v, np.zeros(n_features - self.v.size)])

    def _add(self, log_weight: float, use: np.ndarray) -> None:
        self._grow(use.size)
        self.v[: use.size] += math.exp(log_weight - self.log_scale) * use
        top = float(self.v.max())
        if top > 0:
            self.log_scale += math.log(top)
            self.v /= top

    def _closing_weight(self, n_old: int, forced_use: float, old_use: np.ndarray) -> float:
        """Log weight that makes a feature used ``forced_use`` times as used as the mean of the ``n_old`` first."""
        mean_old_v = float(np.mean(self.v[:n_old]))
        denom = float(forced_use - np.mean(old_use))
        if denom <= 0:
            # Every feature was used as often as the forced one: no weight can close the gap, so the
            # generation is weighted as if the old features had not been used at all.
            denom = float(forced_use)
        return self.log_scale + math.log(mean_old_v) - math.log(denom)

    def challenger(self, use: np.ndarray) -> float:
        """Log weight of a generation whose forced feature is the last of ``use`` (per-feature tree counts)."""
        use = np.asarray(use, dtype=np.float64)
        if use.size == 1 or not self.v[: use.size - 1].any():
            log_w = 0.0 if use.size == 1 else self.log_scale
        else:
            log_w = self._closing_weight(use.size - 1, float(use[-1]), use[:-1])
        self._add(log_w, use)
        return log_w

    def refresh(self, use: np.ndarray, n_trees: int) -> float:
        """Log weight of a generation of ``n_trees`` trees with no forced feature, grown on new samples.

        It is weighted like a challenger whose forced "feature" is the fresh training set, used by every tree and
        not itself a column: ``w = mean(V) / (n_trees - mean(u))``. Since every feature joins such a generation
        with the same probability, any weight keeps the expected virtual use balanced; this one makes successive
        refreshes (and the feature arrivals between them) gain about ``1 / (1 - mtry)`` each, so that older
        generations decay geometrically and get pruned, and a later :meth:`challenger` weight stays on the same
        scale. With an empty ledger the weight is the current scale.

        Examples
        --------
        >>> ledger = WeightLedger()
        >>> _ = ledger.uniform(np.array([6.0, 6.0, 6.0]))   # an offline generation of 9 trees, 2/3 of the features
        >>> round(math.exp(ledger.refresh(np.array([6.0, 6.0, 6.0]), n_trees=9)), 6)   # 6 / (9 - 6)
        2.0
        """
        use = np.asarray(use, dtype=np.float64)
        if not self.v[: use.size].any():
            log_w = self.log_scale
        else:
            log_w = self._closing_weight(use.size, float(n_trees), use)
        self._add(log_w, use)
        return log_w

    def add(self, log_weight: float, use: np.ndarray) -> float:
        """Record a generation weighted by its caller (e.g. a narrow stream's, where every tree uses every
        feature and no weight balances them); returns ``log_weight``.

        Examples
        --------
        >>> ledger = WeightLedger()
        >>> ledger.add(math.log(3.0), np.array([2.0, 2.0])), ledger.virtual_use().round(6).tolist()
        (1.0986122886681098, [6.0, 6.0])
        """
        self._add(log_weight, np.asarray(use, dtype=np.float64))
        return log_weight

    def uniform(self, use: np.ndarray) -> float:
        """Log weight 0 (all generations equal), the baseline; the ledger is still kept for inspection."""
        self._add(0.0, np.asarray(use, dtype=np.float64))
        return 0.0

    def virtual_use(self) -> np.ndarray:
        """``V`` itself (may overflow to inf for very long streams; for inspection and tests)."""
        with np.errstate(over="ignore"):
            return self.v * np.exp(self.log_scale)

    def copy(self) -> WeightLedger:
        ledger = WeightLedger()
        ledger.log_scale = self.log_scale
        ledger.v = self.v.copy()
        return ledger

    def to_json(self) -> dict:
        return {"log_scale": self.log_scale, "v": self.v.tolist()}

    @classmethod
    def from_json(cls, d: dict) -> WeightLedger:
        ledger = cls()
        ledger.log_scale = float(d["log_scale"])
        ledger.v = np.asarray(d["v"], dtype=np.float64)
        return ledger


def shares(log_weights: np.ndarray) -> np.ndarray:
    """Normalised weights from log weights (a softmax), finite for any spread of magnitudes."""
    log_weights = np.asarray(log_weights, dtype=np.float64)
    if log_weights.size == 0:
        return log_weights
    e = np.exp(log_weights - log_weights.max())
    return e / e.sum()
