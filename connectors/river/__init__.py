"""River adapter: the forest of a stream of features inside River pipelines, where new keys appear mid-stream.

* :class:`ForestClassifier` — a River classifier (binary and multiclass);
* :class:`ForestEncoder` — a supervised transformer whose ``transform_one`` is the hashed tree encoding of ``x``;
* :class:`ForestRegressor` — a River regressor;
* :func:`iter_encodings` — the engine's ``encoding`` records joined with labels, as ``(x, y)`` for any River model.

Install with the ``river`` extra (``pip install streamforest[river]``).
"""

from __future__ import annotations

from .classifier import ForestClassifier
from .encoder import ForestEncoder
from .feed import iter_encodings, labels_from_messages, read_records
from .regressor import ForestRegressor

__all__ = ["ForestClassifier", "ForestEncoder", "ForestRegressor", "iter_encodings", "labels_from_messages",
           "read_records"]
