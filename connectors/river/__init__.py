"""River adapter: the forest of a stream of features inside River pipelines, where new keys appear mid-stream.

* :class:`ForestClassifier` — a River classifier (binary and multiclass);
* :class:`ForestEncoder` — a supervised transformer whose ``transform_one`` is the hashed tree encoding of ``x``;
* :class:`ForestRegressor` — a River regressor;
* :func:`iter_encodings` — the engine's ``encoding`` records joined with labels, as ``(x, y)`` for any River model.

Install with the ``river`` extra (``pip install streamforest[river]``).
"""

from __future__ import annotations

from streamforest.optional import require

# Before the submodules (they import river): a missing river is explained, with its extra.
require("river", "streamforest.connectors.river")

from .classifier import ForestClassifier  # noqa: E402
from .encoder import ForestEncoder  # noqa: E402
from .feed import iter_encodings, labels_from_messages, read_records  # noqa: E402
from .regressor import ForestRegressor  # noqa: E402

__all__ = ["ForestClassifier", "ForestEncoder", "ForestRegressor", "iter_encodings", "labels_from_messages",
           "read_records"]
