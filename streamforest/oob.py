"""Out-of-bag accounting: every training sample's weighted votes from the trees that did not see it.

Generations come and go (grown, pruned, merged), so the sums are kept incrementally: a generation's votes are added
when it is born and subtracted when it dies, weighted by its weight relative to a reference weight (log weights
span any range; the reference keeps the sums in float range). The score is the held-out metric of the forest on its
own training samples: ROC AUC (binary), log loss (multiclass) or R² (regression). :class:`OutOfBagMixin` keeps a
forest's sums (a base of :class:`~streamforest.FeatureStreamForest`).
"""

from __future__ import annotations

import math

import numpy as np

from streamforest.generations import Generation
from streamforest.growth import TrainingSet
from streamforest.metrics import log_loss, r2, roc_auc, roc_auc_rows
from streamforest.tree import route
from streamforest.tree.model import Trees

#: Memory for the alive generations' cached out-of-bag leaves and votes (beyond it they are routed again when needed).
OOB_CACHE_BYTES = 128 * 2**20


def _leaf_bytes(gen: Generation) -> int:
    return 0 if gen.oob_leaves is None else gen.oob_leaves.nbytes


def _vote_bytes(gen: Generation) -> int:
    return 0 if gen.oob_votes is None else gen.oob_votes[0].nbytes + gen.oob_votes[1].nbytes


def _make_room(others: list[Generation], need: int) -> None:
    """Drop cached leaves, newest generation first, until ``need`` more bytes fit in the budget: votes are what
    pruning a generation needs (a few numbers per sample where leaves take one per tree and sample), and merges
    take the oldest generations, whose leaves are kept longest."""
    used = sum(_leaf_bytes(g) + _vote_bytes(g) for g in others)
    for g in reversed(others):
        if used + need <= OOB_CACHE_BYTES:
            return
        used -= _leaf_bytes(g)
        g.oob_leaves = None


def metric_name(task: str, n_classes: int) -> str:
    if task == "regression":
        return "r2"
    return "auc" if n_classes == 2 else "log_loss"


def generation_votes(gen: Generation, training: TrainingSet) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A generation's out-of-bag votes and vote counts per sample, with the leaves they came from: its cached
    votes (and its cached leaves, if any), else the votes of its cached leaves, else those of leaves routed anew.
    Routing again gives the very same leaves and votes, so whether a generation is cached changes speed, never
    results."""
    leaves = gen.oob_leaves
    if gen.oob_votes is not None:
        return *gen.oob_votes, leaves
    if leaves is None:
        leaves = out_of_bag_leaves(gen, training)
    return *route.out_of_bag_votes(gen.trees, leaves), leaves


def out_of_bag_leaves(gen: Generation, training: TrainingSet) -> np.ndarray:
    """The leaf of every tree of ``gen`` and training sample (-1: in bag), routed anew."""
    return route.out_of_bag_leaves(gen.trees, training.columns, training.n_samples, training.y_cls,
                                   training.n_classes, gen.seeds, training.draws)


class OutOfBag:
    """Sums of the out-of-bag votes (``(n_samples, n_outputs)``) and vote counts, relative to ``exp(log_ref)``.

    Examples
    --------
    >>> oob = OutOfBag.empty(n_samples=3, n_classes=2, log_ref=0.0)
    >>> oob.sum.shape, oob.score("classification", 2, np.array([0, 1, 1]), np.zeros(3)) is None
    ((3, 2), True)
    """

    def __init__(self, votes: np.ndarray, counts: np.ndarray, log_ref: float) -> None:
        self.sum = votes
        self.count = counts
        self.log_ref = log_ref
        # The last score, until the sums change: a feature's "before" score is the previous one's "after".
        self._scored: tuple[tuple[str, int], float | None] | None = None

    @classmethod
    def empty(cls, n_samples: int, n_classes: int, log_ref: float) -> OutOfBag:
        return cls(np.zeros((n_samples, max(n_classes, 1))), np.zeros(n_samples), log_ref)

    def apply(self, gen: Generation, sign: float, training: TrainingSet, alive: list[Generation],
              merging: bool = True) -> None:
        """Add (sign +1) or remove (-1) a generation's votes; ``alive`` are the generations whose cached votes
        count against the memory budget. ``merging``: whether the forest is at its budget of alive generations,
        where merges (the only users of cached leaves) happen; below it no leaves are kept."""
        if not gen.in_oob:
            return
        self._scored = None
        votes, counts, leaves = generation_votes(gen, training)
        others = [g for g in alive if g is not gen]
        if not merging:
            for g in others:
                g.oob_leaves = None
        vote_bytes = votes.nbytes + counts.nbytes
        keep_votes = sign > 0 and sum(_vote_bytes(g) for g in others) + vote_bytes <= OOB_CACHE_BYTES
        if keep_votes:
            _make_room(others, vote_bytes)
        cached = sum(_leaf_bytes(g) + _vote_bytes(g) for g in others)
        keep_leaves = (merging and keep_votes and leaves is not None
                       and cached + vote_bytes + leaves.nbytes <= OOB_CACHE_BYTES)
        gen.oob_leaves = leaves if keep_leaves else None
        gen.oob_votes = (votes, counts) if keep_votes else None
        if sign > 0 and gen.log_weight > self.log_ref:
            scale = math.exp(self.log_ref - gen.log_weight) if self.count.any() else 0.0
            self.sum *= scale
            self.count *= scale
            self.log_ref = gen.log_weight
        factor = sign * math.exp(gen.log_weight - self.log_ref) / gen.n_trees
        self.sum += factor * votes
        self.count += factor * counts

    def score(self, task: str, n_classes: int, y_cls: np.ndarray, y_reg: np.ndarray) -> float | None:
        """The metric on the samples some tree left out (None with fewer than two)."""
        if self._scored is not None and self._scored[0] == (task, n_classes):
            return self._scored[1]
        value = self._score(task, n_classes, y_cls, y_reg)
        self._scored = ((task, n_classes), value)
        return value

    def _voted(self) -> np.ndarray:
        """Which samples hold out-of-bag votes."""
        if not self.count.size:
            return np.zeros(0, dtype=bool)
        top = float(self.count.max())
        return self.count > 1e-9 * top if top > 0 else np.zeros_like(self.count, dtype=bool)

    def error(self, y_cls: np.ndarray) -> float | None:
        """The share of the samples with out-of-bag votes whose top class is not theirs (a classifier's class codes
        ``y_cls``; None with fewer than two such samples)."""
        ok = self._voted()
        if ok.sum() < 2:
            return None
        return float(np.mean(np.argmax(self.sum[ok], axis=1) != y_cls[ok]))

    def _score(self, task: str, n_classes: int, y_cls: np.ndarray, y_reg: np.ndarray) -> float | None:
        ok = self._voted()
        if ok.sum() < 2:
            return None
        if ok.all():  # the usual case: every sample was left out by some tree (no masked copies)
            ok = slice(None)
        if task == "regression":
            return r2(y_reg[ok], self.sum[ok, 0] / self.count[ok])
        if n_classes == 2:
            return roc_auc(y_cls[ok] == 1, self.sum[ok, 1] / self.count[ok])
        return log_loss(y_cls[ok], self.sum[ok] / self.count[ok, None])


class OutOfBagMixin:
    """The forest's out-of-bag sums (``_oob``), changed as generations come and go (``oob_score=True``)."""

    def _oob_apply(self, gen: Generation, sign: float) -> None:
        if self.oob_score:
            # Leaves serve merges alone (pruning takes the votes): a forest that pruning keeps below its budget of
            # generations (the relational loop's final stream: about seven of 300 leaf-of-one trees, 84 MB of leaves
            # each on 70,000 rows) keeps none.
            merging = self.max_generations is not None and len(self._generations) >= self.max_generations
            self._oob.apply(gen, sign, self._training(), self._generations, merging)

    def _paired_null_scores(self, gen: Generation, real: np.ndarray, null: np.ndarray,
                            counted: np.ndarray) -> tuple[float | None, float | None]:
        """The out-of-bag score with ``gen``'s null twin (per-tree votes ``null``) in place of ``gen`` (``real``),
        and the standard error of the difference (see :func:`paired_null`)."""
        factor = math.exp(gen.log_weight - self._oob.log_ref) / gen.n_trees
        return paired_null(self._oob, factor, real, null, counted.astype(np.float64), self.task, self._n_classes,
                           self._y_cls, self._y_reg)

    def _oob_value(self) -> float | None:
        if not self.oob_score:
            return None
        return self._oob.score(self.task, self._n_classes, self._y_cls, self._y_reg)

    def _generation_oob_error(self, gen: Generation, n_trees: int | None = None) -> float | None:
        """The mean squared error of ``gen``'s trees alone on the samples they left out: the Brier score
        (classification) or of the target (regression); None when they left none out. A proper score that every
        sample moves a little, where a few dozen samples move a ROC AUC by whole pairs. Nothing of the forest's
        sums or of ``gen``'s caches changes.

        ``n_trees``: when ``gen`` holds the first trees of a generation of ``n_trees``, the error estimated for the
        whole generation. A sample's squared error over the ``k`` trees that left it out exceeds the whole
        generation's by the spread of their votes (their variance over ``k``, less that over the whole's share):
        the excess is taken off, the variance estimated from the sample's own trees (where one tree alone left it
        out, the other samples' mean). Uncorrected, a few trees' error favours coarse trees, whose votes spread
        less."""
        votes, counts, leaves = generation_votes(gen, self._training())
        left_out = counts > 0
        if not left_out.any():
            return None
        k = counts[left_out, None]
        pred = votes[left_out] / k
        truth = self._y_reg[left_out, None] if self.task == "regression" else \
            np.eye(pred.shape[1])[self._y_cls[left_out]]
        errors = np.sum((pred - truth) ** 2, axis=1)
        if n_trees is not None and n_trees > gen.trees.n_trees:
            if leaves is None:  # its votes cached without their leaves
                leaves = out_of_bag_leaves(gen, self._training())
            k = k[:, 0]
            several = k > 1
            squares = route.out_of_bag_squares(gen.trees, leaves)[left_out]
            spread = (squares - k * np.sum(pred ** 2, axis=1)) / np.maximum(k - 1.0, 1.0)
            # A sample only one tree left out shows no spread of its own: it takes the others' mean.
            spread[~several] = spread[several].mean() if several.any() else 0.0
            errors -= spread / k * (1.0 - gen.trees.n_trees / n_trees)
        return float(np.mean(errors))

    @property
    def oob_error_(self) -> float | None:
        """A classifier's out-of-bag error rate: the share of its training samples left out by some tree whose
        out-of-bag vote (weighted as the generations are) is another class. It counts the generations grown since
        the samples were last set (:meth:`set_samples`). None for regression, without ``oob_score`` or with fewer
        than two such samples."""
        if not self.oob_score or self.task == "regression":
            return None
        return self._oob.error(self._y_cls)

    def _clear_oob(self) -> None:
        """Empty out-of-bag sums for the current samples; no generation's votes in them (or cached) any more."""
        log_ref = max((g.log_weight for g in self._generations), default=0.0)
        self._oob = OutOfBag.empty(self.n_samples_, self._n_classes, log_ref)
        for g in self._generations:
            g.in_oob = False
            g.oob_leaves = None
            g.oob_votes = None


def tree_votes(trees: Trees, leaves: np.ndarray) -> np.ndarray:
    """Each tree's out-of-bag votes, ``(n_trees, n_samples, n_outputs)``: the leaf value of every sample the tree
    left out (from :func:`~streamforest.tree.route.out_of_bag_leaves`), zeros where it is in bag."""
    out_of_bag = leaves >= 0
    nodes = trees.offsets[:-1, None] + np.where(out_of_bag, leaves, 0)
    return np.where(out_of_bag[:, :, None], trees.value[nodes], 0.0)


def paired_null(oob: OutOfBag, factor: float, real: np.ndarray, null: np.ndarray, counted: np.ndarray, task: str,
                n_classes: int, y_cls: np.ndarray, y_reg: np.ndarray) -> tuple[float | None, float | None]:
    """The score of the forest whose sums ``oob`` hold a generation's per-tree votes ``real`` (each times
    ``factor``) with its twin's ``null`` in their place, and the jackknife standard error, over the generation's
    trees, of the difference of the two forests' scores (the twins leave the same samples out: ``counted``, the
    per-tree out-of-bag indicator, serves both).

    The twins share their trees' seeds, subspaces and bootstrap samples, so what both forests share (the older
    generations, which samples each tree left out, the other features a tree could split on) cancels in the
    difference; the jackknife leaves one pair of trees out at a time."""
    def score(sums: np.ndarray, counts: np.ndarray) -> float | None:
        return OutOfBag(sums, counts, oob.log_ref).score(task, n_classes, y_cls, y_reg)

    shift = factor * (null.sum(axis=0) - real.sum(axis=0))
    null_score = score(oob.sum + shift, oob.count)
    n_trees = real.shape[0]
    if null_score is None or n_trees < 2:
        return null_score, None
    counts = oob.count - factor * counted  # each pair of trees left out in turn
    real_sums = oob.sum - factor * real
    null_sums = oob.sum + shift - factor * null
    voted = oob._voted()
    same_voted = np.array_equal(counts > 1e-9 * counts.max(axis=1, keepdims=True), np.broadcast_to(voted, counts.shape))
    if metric_name(task, n_classes) == "auc" and same_voted:
        p = np.concatenate([real_sums[:, voted, 1], null_sums[:, voted, 1]]) / np.tile(counts[:, voted], (2, 1))
        aucs = roc_auc_rows(y_cls[voted] == 1, p)
        d = aucs[:n_trees] - aucs[n_trees:]
    else:  # scored one forest at a time (another metric, or a sample that only the left-out trees voted on)
        diffs = []
        for t in range(n_trees):
            a, b = score(real_sums[t], counts[t]), score(null_sums[t], counts[t])
            if a is None or b is None:
                return null_score, None
            diffs.append(b - a if metric_name(task, n_classes) == "log_loss" else a - b)
        d = np.asarray(diffs)
    return null_score, float(np.sqrt((n_trees - 1) / n_trees * np.sum((d - d.mean()) ** 2)))
