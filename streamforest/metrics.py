"""Scores the forest reports about itself (out-of-bag): ROC AUC, log-loss, R²."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def roc_auc(y_true: np.ndarray, score: np.ndarray) -> float:
    """Binary ROC AUC by the rank-sum formula (ties count one half); NaN when one class is absent.

    Examples
    --------
    >>> roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    0.75
    """
    y_true = np.asarray(y_true).astype(bool)
    n_pos = int(y_true.sum())
    n_neg = y_true.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(score)
    return float((ranks[y_true].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def log_loss(y_index: np.ndarray, proba: np.ndarray, eps: float = 1e-15) -> float:
    """Mean negative log-likelihood of the true class (``y_index`` are column indices of ``proba``)."""
    p = np.clip(proba[np.arange(len(y_index)), y_index], eps, 1.0)
    return float(-np.mean(np.log(p)))


def r2(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Coefficient of determination."""
    ss_res = float(np.sum((y_true - y_pred) ** 2))
    ss_tot = float(np.sum((y_true - np.mean(y_true)) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
