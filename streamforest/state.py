"""What a saved forest is made of: :class:`ForestState`, the interface between the forest and its persistence.

:meth:`FeatureStreamForest.state` returns one and :meth:`FeatureStreamForest.from_state` rebuilds the forest from
one; :mod:`streamforest.persistence` writes it as arrays and JSON (and engine checkpoints embed it). Nothing else
is needed to continue learning exactly where the forest was: the parameters and seed, the binned training columns
and labels, the bookkeeping ledger, the alive generations and the out-of-bag sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamforest.binning import ColumnBinner
from streamforest.bookkeeping import WeightLedger
from streamforest.generations import Generation


@dataclass
class ForestState:
    """A forest's whole state.

    Attributes
    ----------
    params
        The constructor's parameters (:meth:`FeatureStreamForest.get_params`).
    seed
        The seed every draw derives from (``random_state``, or the one drawn when it is ``None``).
    binners
        One per feature, in arrival order: the feature's name and bins.
    classes
        The class labels (``None`` for regression or before the first feature).
    ledger
        The weighted-feature-use bookkeeping.
    generations
        The alive generations, oldest first.
    next_generation, model_version
        The id of the next generation; the model version.
    columns
        The binned training samples ``(n_features, n_samples)`` (``None`` before the first feature).
    y_cls, y_reg
        Class codes and regression targets of the training samples.
    oob_sum, oob_count, oob_log_ref
        The out-of-bag sums (see :class:`streamforest.oob.OutOfBag`).
    """

    params: dict[str, Any]
    seed: int
    binners: list[ColumnBinner]
    classes: np.ndarray | None
    ledger: WeightLedger
    generations: list[Generation]
    next_generation: int
    model_version: int
    columns: np.ndarray | None
    y_cls: np.ndarray
    y_reg: np.ndarray
    oob_sum: np.ndarray
    oob_count: np.ndarray
    oob_log_ref: float
