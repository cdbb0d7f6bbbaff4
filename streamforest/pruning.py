"""Pruning and the budget of alive generations: what keeps a forest bounded however many features arrive.

:class:`PruningMixin` is a base of :class:`~streamforest.FeatureStreamForest`. After every new generation, the
generations whose weight share fell under ``prune_threshold`` are dropped, and past ``max_generations`` the two
oldest are merged into one (:func:`streamforest.generations.merge`); both leave the out-of-bag sums and go to the
encoder, so that encodings made before can be patched by a delta.
"""

from __future__ import annotations

from streamforest.generations import merge, weight_shares


class PruningMixin:
    """Dropping negligible generations, merging the oldest past the budget, and the model version."""

    def _prune(self) -> list[int]:
        if self.prune_threshold <= 0 or len(self._generations) < 2:
            return []
        w = weight_shares(self._generations)
        newest = self._generations[-1]
        drop = [g for g, s in zip(self._generations, w, strict=True) if s < self.prune_threshold and g is not newest]
        for g in drop:
            self._oob_apply(g, -1.0)
            self.encoder.bury(g, died=self.model_version_ + 1)
        self._generations = [g for g in self._generations if all(g is not d for d in drop)]
        if drop:
            self._packed = None
        return [g.id for g in drop]

    def _enforce_budget(self) -> list[int]:
        merged: list[int] = []
        while self.max_generations is not None and len(self._generations) > self.max_generations:
            a, b = self._generations[0], self._generations[1]
            # Merged before a and b leave the out-of-bag sums, which drops their cached leaves (the merged
            # generation's are some of theirs).
            gen = merge(a, b, self._generation_size(), born=self.model_version_ + 1)
            self._oob_apply(a, -1.0)
            self._oob_apply(b, -1.0)
            self.encoder.bury(a, died=self.model_version_ + 1)
            self.encoder.bury(b, died=self.model_version_ + 1)
            self._generations[:2] = [gen]
            self._oob_apply(gen, +1.0)
            self._packed = None
            merged.append(b.id)
        return merged

    def _bump_version(self) -> None:
        self.model_version_ += 1
        self.encoder.forget_before(self.model_version_)
