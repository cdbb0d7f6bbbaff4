"""The forest's parameters, as in scikit-learn: ``get_params``, ``set_params`` and the ``repr`` they make.

:class:`ParamsMixin` is a base of :class:`~streamforest.FeatureStreamForest`; every parameter is stored under its
own name and checked by :func:`streamforest.inputs.check_params`.
"""

from __future__ import annotations

import secrets
from typing import Any, TypeVar

import numpy as np

from streamforest import inputs

#: The constructor's parameters, in its order (:meth:`FeatureStreamForest.get_params`).
PARAMS = ("trees_per_generation", "max_features", "max_depth", "min_samples_leaf", "min_category_size",
          "split_features", "split_threshold", "numeric_categories", "policy", "feature_sampling", "max_subspace",
          "prune_threshold", "max_generations", "max_samples", "task", "oob_score", "random_state")

_Self = TypeVar("_Self", bound="ParamsMixin")


def seed_of(random_state: int | None) -> int:
    """The seed every draw derives from: ``random_state``, or a fresh random one when it is ``None``."""
    return int(random_state) if random_state is not None else secrets.randbits(63)


class ParamsMixin:
    """``get_params``/``set_params`` over :data:`PARAMS`, and a ``repr`` that shows them."""

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters as plain Python values (JSON-able), as in scikit-learn.

        Examples
        --------
        >>> from streamforest import FeatureStreamForest
        >>> FeatureStreamForest(trees_per_generation=7).get_params()["trees_per_generation"]
        7
        """
        return {k: v.item() if isinstance(v, np.generic) else v for k, v in ((k, getattr(self, k)) for k in PARAMS)}

    def set_params(self: _Self, **params: Any) -> _Self:
        """Set parameters, as in scikit-learn; bad values are refused and leave the forest as it was.

        Changes apply to the generations grown afterwards. The task cannot change once samples are known.

        Examples
        --------
        >>> from streamforest import FeatureStreamForest
        >>> f = FeatureStreamForest().set_params(max_depth=4, random_state=3)
        >>> f.max_depth, f.get_params()["random_state"]
        (4, 3)
        """
        unknown = sorted(set(params) - set(PARAMS))
        if unknown:
            raise ValueError(f"unknown parameters {unknown} (parameters: {list(PARAMS)})")
        if "task" in params and params["task"] != self.task and self._store is not None:
            raise ValueError("task cannot change once the forest has samples")
        if "max_samples" in params and params["max_samples"] != self.max_samples and self._store is not None:
            # the out-of-bag scores regenerate every alive tree's draws from the forest's setting
            raise ValueError("max_samples cannot change once the forest has samples")
        inputs.check_params({**self.get_params(), **params})
        for k, v in params.items():
            setattr(self, k, v)
        if "random_state" in params:
            self._seed = seed_of(params["random_state"])
        return self

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"
