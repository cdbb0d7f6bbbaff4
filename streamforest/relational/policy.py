"""What to try next, from the engine's feedback.

A policy proposes :class:`Candidate` features and learns from the engine's ``feedback`` record of each. The
default, :class:`ThompsonPolicy`:

* **Thompson sampling over families.** Every family of the space (path, function, column, condition column; see
  :class:`~streamforest.relational.candidates.Family`) is described by facets; each facet keeps a Gaussian
  posterior of the reward (the out-of-bag gain in units of its noise). A draw from every facet's posterior scores
  every family (the mean of its facets' draws) and the best one gives the next candidate: facets shared by
  families let one success or failure inform many families.
* **Within a family, a beam.** Its members (condition values, learned thresholds) are computed a few at a time
  and kept ranked by a univariate relevance on the labelled rows; the best goes first.
* **What every model wants, first.** The target's attributes related to the label beyond chance (with
  ``structure``, the unconditioned counts of every path and their means per row above too) are sent before the
  space is drawn from.
* **Refinements of accepted aggregates.** When an unconditioned aggregate is accepted, its conditioned members
  (the same function and column under each condition) are computed and the most relevant one goes next, if it
  relates to the label clearly more than its parent.
* **Combinations only of accepted features.** FCTree operators are families too, whose members are pairs of
  the best accepted features.
* **Shadows.** Every ``shadow_every`` candidates a shadow is sent: a real candidate's values permuted across the
  labelled rows, related to nothing. Their gains are the noise level, in units of ``sqrt(error)`` (the out-of-bag
  error left before each: a useless feature's gain spreads in proportion to it, see :func:`error_of`): a candidate
  is accepted only if its gain beats the shadows' mean by ``z`` standard deviations (the shadows', or the
  candidates' own robust one when wider) at the error left, with
  Student-t's margin for the number of shadows (1 - Phi(z) of useless candidates slip through, 7 % at
  ``z = 1.5``), or if it removes at least half of the error left and beats the plain ``z`` bound.
* **Or a paired null** (``paired=True``): each candidate's generation is grown again on its values permuted, from
  the same trees' seeds, subspaces and bootstrap samples; it is accepted when its out-of-bag score beats its twin's
  by ``z`` standard errors over the pairs of trees. No shadows then.

Everything is deterministic given the seed, the data and the feedback.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse
from scipy.stats import norm as normal
from scipy.stats import t as student_t

from streamforest.metrics import average_ranks
from streamforest.relational.candidates import (
    EXTENDED_OPERATORS,
    OPERATORS,
    Aggregate,
    Combination,
    Condition,
    Family,
    Feature,
    Generator,
    definition,
    feature_name,
)


@dataclass
class Candidate:
    """A feature ready to send: its definition, family, and value for every target row."""

    definition: str
    name: str
    family: str
    facets: tuple[str, ...]
    values: np.ndarray
    feature: Feature | None = None
    shadow: bool = False
    relevance: float = float("nan")
    nominal: bool = False


@dataclass
class Decision:
    accepted: bool
    why: str
    gain: float | None = None


def relevance(values: np.ndarray, y: np.ndarray) -> float:
    """Univariate relevance in [0, 1]: |2 AUC - 1| (averaged one-vs-rest over classes); missing values rank lowest.

    >>> relevance(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 0, 1, 1]))
    1.0
    """
    return _relevance(values, _classes(y))


def _classes(y: np.ndarray) -> list[tuple[np.ndarray, int, int]]:
    """What :func:`relevance` compares against: each class's mask and size, and the size of the rest (one class
    of two)."""
    classes = np.unique(y)
    out = []
    for c in classes[1:] if classes.size == 2 else classes:
        pos = y == c
        n1, n0 = int(pos.sum()), int((~pos).sum())
        if n1 and n0:
            out.append((pos, n1, n0))
    return out


def _relevance(values: np.ndarray, classes: list[tuple[np.ndarray, int, int]]) -> float:
    v = np.where(np.isnan(values), -np.inf, values)
    if v.size == 0 or np.all(v == v[0]):
        return 0.0
    r = average_ranks(v)
    out = [abs(2 * ((r[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)) - 1) for pos, n1, n0 in classes]
    return float(np.mean(out)) if out else 0.0


def rank_digest(values: np.ndarray) -> bytes:
    """A digest of the values' order, the same for every monotone transform of them.

    Trees see only the order of a feature's values: a monotone transform of an earlier candidate (x^2 of a positive
    x, a sqrt) is the same feature to them, and so is a decreasing one (x^2 of a negative x, -x) when no value is
    missing: a split of the reversed order is the same partition. Missing values rank lowest, so with them the
    direction stays part of the digest.

    >>> x = np.array([-3.0, -1.0, -2.0])
    >>> rank_digest(x) == rank_digest(x * x), rank_digest(x) == rank_digest(np.array([1.0, 2.0, 3.0]))
    (True, False)
    >>> rank_digest(np.array([np.nan, 1.0, 2.0])) == rank_digest(np.array([np.nan, -1.0, -2.0]))
    False
    """
    missing = np.isnan(values)
    ranks = np.unique(np.where(missing, -np.inf, values), return_inverse=True)[1].astype(np.int64)
    if not missing.any():
        ranks = min(ranks, ranks.max() - ranks, key=lambda r: r.tobytes())
    return hashlib.sha1(ranks.tobytes()).digest()


def gain_of(feedback: dict[str, Any]) -> float | None:
    """The out-of-bag improvement a feedback record reports (positive = better), None when not measured."""
    before, after = feedback.get("oob_before"), feedback.get("oob_after")
    if before is None or after is None:
        return None
    return before - after if feedback.get("oob_metric") == "log_loss" else after - before


#: The smallest out-of-bag error a gain is measured against (a perfect score leaves none).
MIN_ERROR = 1e-4
#: Shadows (and candidates) whose gains measure the noise: the most recent ones.
RECENT = 20
#: Rejected candidates' gains needed before their spread counts (see ``ThompsonPolicy._spread``).
MIN_REJECTED_GAINS = 8
#: How many near misses join the final set by default (``ThompsonPolicy(near_misses=None)``): the first while the
#: exploration has at most ``NEAR_MISSES_UP_TO`` labelled rows, the second beyond. Near misses make up for the
#: noise of an out-of-bag gain on few rows, where a useful candidate often falls just short of the bar: on
#: Mutagenesis (~170 rows) 10 did better than 3 over 21 fold protocols; on 10,000 rows a gain's standard error is
#: about 8 times smaller, and the scale benchmark's final sets grew by 7 features and its slowest shape by 12 s
#: (``docs/relational.md``, *How many near misses*).
NEAR_MISSES = (10, 3)
NEAR_MISSES_UP_TO = 1000
#: The least standard error a paired gain is held to (a generation whose trees never split on the candidate, nor
#: its twin's on the permuted values, has a gain and an error of zero).
MIN_PAIRED_SE = 1e-4


def paired_gain_of(feedback: dict[str, Any]) -> float | None:
    """The out-of-bag score with the candidate's generation over that with its permuted twin in its place
    (positive = better), None when the twin was not grown."""
    after, null = feedback.get("oob_after"), feedback.get("oob_null")
    if after is None or null is None:
        return None
    return null - after if feedback.get("oob_metric") == "log_loss" else after - null


def error_of(feedback: dict[str, Any]) -> float | None:
    """The out-of-bag error left before the candidate: 1 - AUC (or R^2), the log loss itself; None when not measured.

    A shadow's gain (noise) has a spread proportional to ``sqrt(error)``: the pairs a forest may misorder are the
    remaining error's, and how many of them a useless feature's trees reorder is a count of them. Gains are compared
    in units of ``sqrt(error)``, so a shadow drawn at one score measures the noise at another.

    >>> error_of({"oob_metric": "auc", "oob_before": 0.96, "oob_after": 0.99})
    0.040000000000000036
    """
    before = feedback.get("oob_before")
    if before is None:
        return None
    return max(before if feedback.get("oob_metric") == "log_loss" else 1.0 - before, MIN_ERROR)


def _fmt_error(error: float | None) -> str:
    return "--" if error is None else f"{error:.3g}"


class Policy:
    """What the loop asks of a policy (subclass it to plug in your own)."""

    #: Whether the loop asks the engine for each candidate's paired null (``feedback["oob_null"]``, see
    #: :meth:`~streamforest.FeatureStreamForest.add_feature`).
    paired = False
    #: The rejected candidates of the largest positive gains (in units of ``sqrt(error)``) that join the set the
    #: loop ends with, besides the accepted ones; the exploration is the same.
    near_misses = 0

    def propose(self) -> Candidate | None:  # pragma: no cover - interface
        """The next candidate to send, or None when the space is exhausted."""
        raise NotImplementedError

    def observe(self, candidate: Candidate, feedback: dict[str, Any]) -> Decision:  # pragma: no cover
        """Learn from the engine's feedback on ``candidate``; say whether it is accepted and why."""
        raise NotImplementedError


def _divisor(c: Candidate) -> bool:
    """Whether a ratio may divide by the candidate's values: all of one sign, none zero (b/a is then a decreasing
    function of a/b, the same feature to trees: one order of a pair is enough)."""
    v = c.values[~np.isnan(c.values)]
    return v.size > 0 and (bool(np.all(v > 0)) or bool(np.all(v < 0)))


@dataclass
class _Arm:
    n: float = 0.0
    total: float = 0.0


@dataclass
class _Beam:
    """A family's members, computed a few at a time, ranked by relevance."""

    members: Any
    ready: list[Candidate] = field(default_factory=list)
    done: bool = False


def complexity(f: Family) -> int:
    """Conditions, nestings and steps beyond the first (of the family and of its inner one)."""
    n = (f.cond is not None) + (f.cond2 is not None) + max(len(f.path) - 1, 0)
    return n + (1 + complexity(f.inner) if f.inner is not None else 0)


class Aggregates:
    """A family of the generator's space as the policy sees it: members computed lazily, thresholds learned by
    ``score`` as each member comes up."""

    #: members are fixed: an exhausted family stays exhausted
    renewed = False

    def __init__(self, family: Family, generator: Generator, score: Callable[[np.ndarray], float]) -> None:
        self.family = family
        self.generator = generator
        self.score = score
        self.facets = family.facets()
        self.label = " ".join(self.facets)  # str(family), without computing its facets again
        self.complexity = complexity(family)

    def members(self) -> Iterator[Feature]:
        return (self.generator.learn(f, self.score) for f in self.generator.members(self.family))


class Combine:
    """An FCTree operator as a family: its members are the operator on the best accepted features (pairs of them,
    or each alone for the unary ones), drawn afresh whenever the policy looks, as the accepted set changes."""

    #: an accepted feature gives new members: the family comes back (see ``ThompsonPolicy.observe``)
    renewed = True
    complexity = 1

    def __init__(self, op: str, pairs: Callable[[str], Iterator[Feature]]) -> None:
        self.op = op
        self.pairs = pairs
        self.label = f"combine {op}"
        self.facets = ("kind=combine", f"func={op}")

    def members(self) -> Iterator[Feature]:
        return self.pairs(self.op)


class Attributes:
    """The target's own attributes not related to the label beyond chance, as one family: computed up front (they
    are columns), sent most relevant first when the draws pick the family."""

    renewed = False
    complexity = 0
    label = "kind=attributes"
    facets = ("kind=attributes",)

    def __init__(self, candidates: list[Candidate]) -> None:
        self.candidates = candidates


#: Family-wise rate at which attributes unrelated to the label are sent ahead of the space (see
#: ``ThompsonPolicy._screen_attributes``).
ALPHA = 0.05


def relevance_bound(y: np.ndarray, alpha: float) -> float:
    """The :func:`relevance` a feature unrelated to ``y`` exceeds with probability ``alpha`` (the rank-sum test's
    normal approximation, for the smallest class against the rest: the widest spread of the one-vs-rest AUCs).

    >>> round(relevance_bound(np.array([0] * 50 + [1] * 50), 0.05), 3)
    0.227
    """
    _, counts = np.unique(y, return_counts=True)
    if counts.size < 2:
        return 1.0
    n1 = float(counts.min())
    n0 = float(counts.sum()) - n1
    sd_auc = np.sqrt((n1 + n0 + 1.0) / (12.0 * n1 * n0))
    return float(2.0 * normal.isf(alpha / 2.0) * sd_auc)


class ThompsonPolicy(Policy):
    """Thompson sampling over candidate families, beams within them, shadows for the noise level.

    Parameters
    ----------
    generator
        The candidate space.
    y
        Labels of the target rows (only ``labelled`` rows are looked at).
    labelled
        Mask of the labelled target rows.
    seed
        Seed of the draws and of the shadows' permutations.
    pool
        Members computed per family visit (the beam width within a family).
    shadow_every
        One shadow per this many candidates (0: none).
    z
        A candidate's gain must beat the shadows' mean gain plus ``z`` standard deviations (the shadows', or the
        candidates' own robust one when wider; over the last 20, at the out-of-bag error left; see :meth:`threshold`
        and :meth:`observe`).
    relevance_gate
        If set, a candidate's univariate relevance must also beat this quantile of the shadows' relevance.
    min_gain
        Gain required besides (in the engine's out-of-bag metric).
    beam
        Accepted features (the best by gain) whose pairs the FCTree operators combine. The pairs are ranked by
        relevance like any family's members, so a wider beam gives the ranking more to choose from (docs/relational.md
        has the measurements).
    prior
        Pseudo-observations of reward 0 in every facet (how slowly early results move a facet).
    operators
        The combination operators (default: FCTree's, and the ratio when the generator's space is extended).
    simplicity
        Prior preference for simple families: a family's score is lowered by this much per condition, per
        nesting and per step beyond the first (a draw overcomes it once the facets show rewards).
    screen
        Families looked at per choice: the ``screen`` best Thompson draws have their next members computed, and
        the draw plus ``relevance_weight`` times the best member's relevance (in shadows' units) picks among them.
        Computing a member is cheap, sending it to the engine is not: this spends the budget on candidates that
        relate to the label at all. ``screen=1`` is plain Thompson sampling.
    relevance_weight
        Weight of the relevance (see ``screen``).
    structure
        Send the unconditioned counts of every path and their means per row above (``COUNT(atoms.bonds)``,
        ``MEAN(atoms.COUNT(bonds))``) related to the label beyond chance first, after the attributes (see
        :meth:`_screen_structure`). Off by default: on Mutagenesis the loop gains about +0.0025 AUC with them, on the
        scale benchmark's csv3 they add four accepted features and most of a final stream's time and memory
        (docs/relational.md has the measurements).
    basics
        Send the unconditioned reductions of the target's children related to the label beyond chance
        (``MIN(atoms.charge)``, ``COUNT(atoms)``; see :meth:`_screen_basics`) once two shadows are measured, most
        relevant first, judged as any candidate. Off by default: on Mutagenesis it moved neither the loop nor a
        forest on its features beyond the noise of the folds (docs/relational.md has the measurements).
    paired
        Judge every candidate by its paired null rather than by shadows: the engine grows its generation again on
        its values permuted across the labelled rows, from the same trees' seeds, subspaces and bootstrap samples
        (a ``feature`` message with ``paired_null``), and the candidate is accepted when its out-of-bag score
        beats the twin's by ``z`` standard errors over the pairs of trees (see :meth:`_observe_paired`). No
        shadow is sent (``shadow_every`` is ignored); the relevance chance gives, for the screen, comes from a
        permutation of each candidate computed here. A second growth per candidate.
    near_misses
        The rejected candidates (shadows aside) of the largest positive gains in units of ``sqrt(error)``, at most
        this many, join the final set beside the accepted ones (the exploration is the same; 0: only the accepted
        ones; None: 10 on at most :data:`NEAR_MISSES_UP_TO` labelled rows, else 3, :data:`NEAR_MISSES`). On ~170
        labelled rows a useful member's out-of-bag gain often falls just short of the acceptance bar; the final
        forest on the accepted ones and 10 such near misses did better on Mutagenesis than on 3 or none, on the
        fold protocols the count was chosen on and on 21 others (``docs/relational.md``, *The policy*). A near
        miss may be a useless candidate whose gain happened to be positive: on data where one candidate in five is
        noise (``tests/relational/test_policy.py``), 4% of the noise is accepted and 31% reaches the final set with
        10 near misses (10% with 3); ``candidates.jsonl`` tells accepted from missed.
    refine
        When an unconditioned aggregate is accepted, send its most relevant conditioned member next if that beats
        its relevance by two standard deviations of the shadows' relevance (see :meth:`_queue_refinement`).
    """

    def __init__(self, generator: Generator, y: np.ndarray, labelled: np.ndarray, seed: int = 0, pool: int = 8,
                 shadow_every: int = 8, z: float = 1.5, relevance_gate: float | None = None, min_gain: float = 0.0,
                 beam: int = 10,
                 prior: float = 1.0, simplicity: float = 0.25, operators: tuple[str, ...] | None = None,
                 screen: int = 4, relevance_weight: float = 1.0, structure: bool = False,
                 basics: bool = False, paired: bool = False, near_misses: int | None = None,
                 refine: bool = True) -> None:
        self.generator = generator
        self.labelled = np.asarray(labelled, dtype=bool)
        self.y = np.asarray(y)[self.labelled]
        self._y_classes = _classes(self.y)  # what every relevance is measured against, once
        self.rng = np.random.default_rng(seed)
        self.pool = pool
        self.shadow_every = shadow_every
        self.z = z
        self.relevance_gate = relevance_gate
        self.min_gain = min_gain
        self.beam_size = beam
        self.prior = prior
        if operators is None:  # the ratio belongs to the extended space
            operators = OPERATORS + (EXTENDED_OPERATORS if generator.extended else ())
        self.operators = operators
        self.screen = screen
        self.relevance_weight = relevance_weight
        self.paired = paired
        if near_misses is None:
            near_misses = NEAR_MISSES[0] if int(self.labelled.sum()) <= NEAR_MISSES_UP_TO else NEAR_MISSES[1]
        if isinstance(near_misses, bool) or not isinstance(near_misses, (int, np.integer)) or near_misses < 0:
            raise ValueError(f"near_misses must be an integer >= 0 or None, got {near_misses!r}")
        self.near_misses = int(near_misses)
        self.refine = refine
        if paired:  # the twin is each candidate's null: no shadow is sent
            self.shadow_every = 0
        self._null_rng = np.random.default_rng([seed, 1])
        fams = list(generator.families())
        self.attributes = [f for f in fams if f.kind == "attribute"]
        self.seen: set[str] = set()  # definitions proposed
        self.hashes: set[bytes] = set()  # values proposed (duplicates of earlier candidates are skipped)
        first, rest = self._screen_attributes()
        if structure:
            first += self._screen_structure(fams)
        self._basics = self._screen_basics(fams) if basics else []
        self.families: list[Aggregates | Combine | Attributes] = [Aggregates(f, generator, self._score) for f in fams
                                                                   if f.kind != "attribute"]
        if rest:
            self.families.append(Attributes(rest))
        self.families += [Combine(op, self._pairs) for op in operators]
        facet_lists = [f.facets for f in self.families]
        self.facet_index: dict[str, int] = {}
        rows, cols, vals = [], [], []
        for i, fs in enumerate(facet_lists):
            for f in fs:
                rows.append(i)
                cols.append(self.facet_index.setdefault(f, len(self.facet_index)))
                vals.append(1.0 / len(fs))
        self.incidence = sparse.csr_matrix((vals, (rows, cols)), shape=(len(self.families), len(self.facet_index)))
        self.arms = [_Arm() for _ in self.facet_index]
        self.bias = -simplicity * np.array([f.complexity for f in self.families], dtype=np.float64)
        self.beams: dict[int, _Beam] = {}
        self.exhausted = np.zeros(len(self.families), dtype=bool)
        self.accepted: list[tuple[Candidate, float]] = []
        self.shadow_gains: list[float] = []
        self.rejected_gains: list[float] = []  # the rejected candidates' gains, in units of sqrt(error)
        self.shadow_relevance: list[float] = []
        self._shadow_spread: tuple[int, float, float] = (-1, 0.0, 0.0)  # (shadows, mean, sd) of their relevance
        self.sent = 0
        self.pairs_tried: set[tuple[str, str, str]] = set()
        self._last_real: Candidate | None = None
        self._pending_attr = first
        self._expanded: set[tuple[tuple, Condition]] = set()  # conditions whose siblings were compared
        self._refinements: list[Candidate] = []  # conditioned members of accepted aggregates, to send next
        # the conditioned families of every unconditioned flat aggregate family, by its label
        by_key: dict[tuple, list[int]] = {}
        for i, fam in enumerate(self.families):
            if isinstance(fam, Aggregates) and fam.family.kind == "aggregate" and fam.family.cond2 is None:
                f = fam.family
                by_key.setdefault((f.path, f.func, f.column), []).append(i)
        self._conditioned: dict[str, list[int]] = {}
        for idx in by_key.values():
            plain = [i for i in idx if self.families[i].family.cond is None]
            for i in plain:
                self._conditioned[self.families[i].label] = [j for j in idx if j != i]

    # ------------------------------------------------------------------ proposing

    def _screen_attributes(self) -> tuple[list[Candidate], list[Candidate]]:
        """The target's own attributes, most relevant first, split into those related to the label beyond chance
        (a rank test at Bonferroni's bound for ``ALPHA`` over the attributes: sent first, as every model wants
        them) and the others (one family of the space, :class:`Attributes`, competing for the budget with the
        aggregates: two hundred columns of noise would otherwise take two hundred candidates, and be judged before
        any shadow measured the noise)."""
        made = [self._make(next(self.generator.members(f)), str(f), f.facets()) for f in self.attributes]
        made = sorted((c for c in made if c is not None), key=lambda c: -c.relevance)
        bound = relevance_bound(self.y, ALPHA / max(len(made), 1))
        first = [c for c in made if c.relevance > bound]
        rest = [c for c in made if c.relevance <= bound]
        for c in rest:
            c.family, c.facets = Attributes.label, Attributes.facets
        return first, rest

    def _screen_structure(self, fams: list[Family]) -> list[Candidate]:
        """The unconditioned counts of every path (``COUNT(atoms)``, ``COUNT(atoms.bonds)``) and their means over
        the rows of each path above (``MEAN(atoms.COUNT(bonds))``, the rows below a row on average) related to the
        label beyond chance (see :meth:`_related`): the size and shape of a target row's related rows, which any
        model of them wants, as the target's own attributes."""
        def basic(f: Family) -> bool:
            return f.func == "count" and f.cond is None and f.kind == "aggregate"

        return self._related([f for f in fams if f.cond is None and (basic(f) or (
            f.kind == "nested" and f.func == "mean" and f.inner is not None and basic(f.inner)))])

    def _screen_basics(self, fams: list[Family]) -> list[Candidate]:
        """The unconditioned reductions of the target's children (``MIN(atoms.charge)``, ``COUNT(atoms)``) related
        to the label beyond chance (see :meth:`_related`)."""
        return self._related([f for f in fams if f.kind == "aggregate" and f.cond is None and len(f.path) == 1])

    def _related(self, fams: list[Family]) -> list[Candidate]:
        """The first members of ``fams`` related to the label beyond chance (the attributes' rank test, Bonferroni
        over these), most relevant first; the others stay in their families."""
        made = []
        for f in fams:
            c = self._make(next(self.generator.members(f)), str(f), f.facets())
            if c is not None:
                made.append(c)
        bound = relevance_bound(self.y, ALPHA / max(len(made), 1))
        first = sorted((c for c in made if c.relevance > bound), key=lambda c: -c.relevance)
        for c in made:
            if c.relevance <= bound:  # back to its family, which computes it again when its turn comes
                self.seen.discard(c.definition)
                self.hashes.discard(rank_digest(c.values))
        return first

    def propose(self) -> Candidate | None:
        """The target's attributes related to the label first, then a shadow when one is due, then
        :meth:`_next_real`."""
        if self._pending_attr:
            return self._sent(self._pending_attr.pop(0))
        if self._shadow_due():
            return self._sent(self._shadow(self._last_real))
        if self._refinements:
            self._last_real = self._refinements.pop(0)
            return self._sent(self._last_real)
        if self._basics and len(self.shadow_gains) >= 2:
            self._last_real = self._basics.pop(0)
            return self._sent(self._last_real)
        c = self._next_real()
        if c is None:
            return None
        self._last_real = c
        if self.paired:  # the relevance chance alone gives, for the screen (no shadow is sent)
            lab = c.values[self.labelled]
            self.shadow_relevance.append(_relevance(lab[self._null_rng.permutation(lab.size)], self._y_classes))
        return self._sent(c)

    def _next_real(self) -> Candidate | None:
        """The next real candidate: the best of the ``screen`` families Thompson sampling draws highest, each
        scored by its draw plus ``relevance_weight`` times its best ready member's relevance (in units of the
        shadows' relevance spread, capped at 3); then that family's next member."""
        while not self.exhausted.all():
            score = self._scores()
            best, best_score = -1, -np.inf
            for i in np.argsort(-score, kind="stable")[: max(self.screen, 1)]:
                if not np.isfinite(score[i]):
                    break
                beam = self._fill(int(i))
                if not beam.ready:
                    continue
                s = score[i] + self.relevance_weight * self._relevance_z(max(c.relevance for c in beam.ready))
                if s > best_score:
                    best, best_score = int(i), s
            if best >= 0:
                c = self._from_family(best)
                s = None if c is None else self._best_sibling(c)
                if s is not None and s is not c:
                    self.beams[best].ready.append(c)  # still its family's member, for a later turn
                return s
        return None

    def _best_sibling(self, c: Candidate) -> Candidate:
        """The most relevant flat aggregate over the rows of ``c``'s condition, the first time a condition on a
        value chosen for its association with the label comes up (else ``c``).

        Such a value says which rows go with the label, not which of their columns does: every member under it
        shares the value's presence, which the first accepted one takes, and the others then add too little to be
        accepted -- the column that carries the label within those rows included. The draws cannot tell them
        apart (their facets are about columns over every condition); their relevance can, for milliseconds each,
        against a generation of trees per candidate sent. The members not chosen stay in their families.
        """
        f = c.feature
        if not isinstance(f, Aggregate):
            return c
        path, where = f.path, f.where
        if f.inner is not None and where is None:
            path, where = (*f.path, *f.inner.path), f.inner.where
        if where is None or where.op != "=" or where.also is not None or (path, where) in self._expanded:
            return c
        self._expanded.add((path, where))
        table = self.generator.table(path[-1].child)
        if where.value not in self.generator.associated(table, where.column):
            return c
        made = [m for m in (self._make(s, str(fam), fam.facets()) for s, fam in self._sibling_families(path, where))
                if m is not None]
        best = max(made, key=lambda m: m.relevance, default=c)
        best = best if best.relevance > c.relevance else c
        for m in made:
            if m is not best:  # back to their families, which compute them again when their turn comes
                self.seen.discard(m.definition)
                self.hashes.discard(rank_digest(m.values))
        return best

    def _sibling_families(self, path: tuple, where: Condition) -> Iterator[tuple[Aggregate, Family]]:
        for s in self.generator.siblings(path, where):
            yield s, Family("aggregate", path, s.func, s.column, (where.column, "="))

    def _relevance_spread(self) -> tuple[float, float]:
        """The mean and standard deviation of the recent shadows' relevance (what chance alone gives)."""
        n = len(self.shadow_relevance)
        if self._shadow_spread[0] != n:  # the shadows' mean and spread change only when a shadow comes
            if n >= 2:
                sr = np.asarray(self.shadow_relevance[-RECENT:])
                self._shadow_spread = (n, float(sr.mean()), max(float(sr.std(ddof=1)), 0.02))
            else:
                self._shadow_spread = (n, 0.0, 0.05)
        return self._shadow_spread[1], self._shadow_spread[2]

    def _relevance_z(self, r: float) -> float:
        """A relevance in units of the shadows' (how far above what chance alone gives), in [-3, 3]."""
        mean, sd = self._relevance_spread()
        return float(np.clip((np.nan_to_num(r) - mean) / sd, -3.0, 3.0))

    def _sent(self, c: Candidate) -> Candidate:
        self.sent += 1
        return c

    def _shadow_due(self) -> bool:
        if not self.shadow_every or self._last_real is None:
            return False
        n_real = self.sent - len(self.shadow_gains)
        # two shadows early (the noise level is needed from the start), then one per shadow_every candidates
        due = 2 + (n_real // self.shadow_every)
        return len(self.shadow_gains) < due and n_real >= 2 * (len(self.shadow_gains) + 1)

    def _shadow(self, base: Candidate) -> Candidate:
        v = base.values.copy()
        idx = np.flatnonzero(self.labelled)
        v[idx] = v[self.rng.permutation(idx)]
        k = len(self.shadow_gains) + 1
        defn = f"SHADOW{k}({base.definition})"
        return Candidate(definition=defn, name=feature_name(defn), family="shadow", facets=("kind=shadow",),
                         values=v, shadow=True, relevance=self._score(v), nominal=base.nominal)

    def _scores(self) -> np.ndarray:
        """Every family's Thompson score: the mean of its facets' draws, plus the simplicity prior."""
        mean = np.array([a.total / (a.n + self.prior) for a in self.arms])
        sd = 1.0 / np.sqrt(np.array([a.n + self.prior for a in self.arms]))
        theta = mean + sd * self.rng.standard_normal(len(self.arms))
        score = self.incidence @ theta + self.bias
        score[self.exhausted] = -np.inf
        return score

    def _from_family(self, i: int) -> Candidate | None:
        """The family's most relevant ready member (None, and the family exhausted, when it has no more)."""
        beam = self._fill(i)
        if not beam.ready:
            return None
        beam.ready.sort(key=lambda c: -c.relevance)
        return beam.ready.pop(0)

    def _fill(self, i: int) -> _Beam:
        """The family's beam, topped up to ``pool`` computed members."""
        fam = self.families[i]
        beam = self.beams.get(i)
        if beam is None and isinstance(fam, Attributes):  # computed already: one beam of them all
            beam = self.beams[i] = _Beam(iter(()), ready=list(fam.candidates), done=True)
        if beam is None:
            beam = self.beams[i] = _Beam(fam.members())
        elif fam.renewed:
            beam.members = fam.members()
            beam.done = False
        while len(beam.ready) < self.pool and not beam.done:
            f = next(beam.members, None)
            if f is None:
                beam.done = True
                break
            c = self._make(f, fam.label, fam.facets)
            if c is not None:
                beam.ready.append(c)
        if not beam.ready:
            # a combination family comes back when a feature is accepted (see observe)
            self.exhausted[i] = True
        return beam

    def _pairs(self, op: str):
        # pairs of accepted features that are not combinations themselves (FCTree's depth-one constructions)
        best = [c for c, _ in sorted(self.accepted, key=lambda t: -t[1])
                if c.feature is not None and not c.nominal and not isinstance(c.feature, Combination)]
        best = best[: self.beam_size]
        if op in ("sqrt", "square"):
            pairs = [(a, None) for a in best]
        elif op == "div":  # over a divisor of one sign, never zero: a quantity (a count, a size, a mass)
            pairs = [(a, b) if _divisor(b) else (b, a) for j, a in enumerate(best) for b in best[j + 1:]
                     if _divisor(b) or _divisor(a)]
        else:
            pairs = [(a, b) for j, a in enumerate(best) for b in best[j + 1:]]
        for a, b in pairs:
            key = (op, a.definition, "" if b is None else b.definition)
            if key not in self.pairs_tried:
                self.pairs_tried.add(key)
                yield Combination(op, a.feature, None if b is None else b.feature)

    def _score(self, values: np.ndarray) -> float:
        return _relevance(values[self.labelled], self._y_classes)

    def _make(self, f: Feature, family: str, facets: tuple[str, ...]) -> Candidate | None:
        """Compute a member; None if it is constant on the labelled rows or repeats an earlier candidate."""
        defn = definition(f, self.generator.db.target)
        if defn in self.seen:
            return None
        self.seen.add(defn)
        v = self.generator.values(f)
        lab = v[self.labelled]
        finite = lab[~np.isnan(lab)]
        if finite.size == 0 or (np.all(finite == finite[0]) and finite.size == lab.size):
            return None
        digest = rank_digest(v)
        if digest in self.hashes:
            return None
        self.hashes.add(digest)
        return Candidate(definition=defn, name=feature_name(defn), family=family, facets=facets, values=v,
                         feature=f, relevance=_relevance(lab, self._y_classes), nominal=self.generator.is_nominal(f))

    # ------------------------------------------------------------------ learning from feedback

    def threshold(self, error: float = 1.0, small_sample: bool = True) -> float:
        """The gain a candidate must beat when the out-of-bag ``error`` is left (see :func:`error_of`).

        The shadows' gains, each in units of the ``sqrt(error)`` it was measured at, give a mean and a standard
        deviation (or the candidates' own spread, when wider: :meth:`_spread`); the threshold is the mean + ``z``
        standard deviations, times ``sqrt(error)``, and at least
        ``min_gain``. With ``small_sample`` the margin is the Student-t prediction bound for that many shadows (a
        useless candidate beats it as often as a normal draw beats ``z``, however few shadows there are); without,
        plain ``z``. With the default ``error`` of 1, the threshold in units of ``sqrt(error)``.

        Gains only: importances are shares among the features present (and vanish with pruned generations), so a
        shadow's importance from an earlier forest is no yardstick for a later candidate.
        """
        if len(self.shadow_gains) < 2:
            return self.min_gain
        g = np.asarray(self.shadow_gains[-RECENT:])
        z = self._z_of(g.size) if small_sample else self.z
        return max(self.min_gain, float(g.mean() + z * self._spread(g)) * np.sqrt(error))

    def _spread(self, shadows: np.ndarray) -> float:
        """The spread of a useless candidate's gain (in units of ``sqrt(error)``): the shadows' standard deviation,
        or the robust one of the last rejected candidates' gains (1.4826 times their median absolute deviation)
        when wider.

        Accepted candidates do not count (the attributes related to the label, judged before any shadow, would set
        the bar for the feature that defines the label), and the few rejected ones that added something are outliers
        the median absolute deviation does not follow. The candidates' gains measure what a shadow, related to
        nothing, cannot: a candidate redundant with an accepted feature (``(x * y)`` of an accepted ``x`` that
        carries the label) forces a generation whose trees split on what ``x`` says, and such generations differ
        from one another more than those of pure noise (on the scale benchmark's csv3, after its planted feature,
        the gains of 169 candidates that added nothing spread 1.35 times as wide as the shadows')."""
        sd = max(float(shadows.std(ddof=1)), 1e-4)
        if len(self.rejected_gains) < MIN_REJECTED_GAINS:
            return sd
        r = np.asarray(self.rejected_gains[-RECENT:])
        return max(sd, 1.4826 * float(np.median(np.abs(r - np.median(r)))))

    def _z_of(self, n: int) -> float:
        """``z`` for a mean and sd estimated from ``n`` shadows: the Student-t prediction bound that a useless
        candidate's gain exceeds as often as a normal one exceeds ``z``."""
        return float(student_t.ppf(normal.cdf(self.z), n - 1) * np.sqrt(1.0 + 1.0 / n))

    def noise(self) -> float:
        """The spread of the recent shadows' gains, in units of ``sqrt(error)``."""
        if len(self.shadow_gains) < 2:
            return 0.03
        return max(float(np.std(self.shadow_gains[-RECENT:])), 3e-3)

    def observe(self, candidate: Candidate, feedback: dict[str, Any]) -> Decision:
        """Accepted: a gain above :meth:`threshold` at the error left, or one that removes at least half of that
        error and beats the shadows' plain mean + ``z`` sd (the Student-t margin of few shadows would reject a
        feature that leaves almost nothing to gain)."""
        if self.paired and "oob_null" in feedback:
            return self._observe_paired(candidate, feedback)
        gain, error = gain_of(feedback), error_of(feedback)
        if candidate.shadow:
            self.shadow_gains.append(0.0 if gain is None else gain / np.sqrt(error))
            self.shadow_relevance.append(candidate.relevance)
            return Decision(False, "shadow (noise estimate)", gain)
        e = 1.0 if error is None else error
        g_thr = self.threshold(e)
        most = gain is not None and gain >= e / 2 and gain > self.threshold(e, small_sample=False)
        r_thr = (float(np.quantile(self.shadow_relevance[-RECENT:], self.relevance_gate))
                 if self.relevance_gate is not None and self.shadow_relevance else -1.0)
        rule = f"(shadows' bound, {self.z:g} sd, at the error {_fmt_error(error)} left)"
        if gain is None:
            accepted, why = True, "first feature (nothing to compare with)"
        elif gain <= g_thr and not most:
            accepted, why = False, f"gain {gain:+.4f} <= {g_thr:+.4f} {rule}"
        elif candidate.relevance <= r_thr:
            accepted, why = False, (f"relevance {candidate.relevance:.3f} <= {r_thr:.3f} "
                                    f"(shadows' q{self.relevance_gate:g})")
        elif gain > g_thr:
            accepted, why = True, f"gain {gain:+.4f} > {g_thr:+.4f} {rule}"
        else:
            accepted, why = True, (f"gain {gain:+.4f} removes {gain / e:.0%} of the error {_fmt_error(error)} left "
                                   f"(> {self.threshold(e, small_sample=False):+.4f}, shadows' mean + {self.z:g} sd)")
        if gain is not None and not accepted:
            self.rejected_gains.append(gain / np.sqrt(e))
        if "kind=attribute" not in candidate.facets and gain is not None:
            self._reward(candidate, (gain - g_thr) / np.sqrt(error) / self.noise())
        return self._decided(candidate, accepted, why, gain)

    def _decided(self, candidate: Candidate, accepted: bool, why: str, gain: float | None) -> Decision:
        if accepted:
            self.accepted.append((candidate, gain if gain is not None else 0.0))
            for i, fam in enumerate(self.families):
                if fam.renewed:
                    self.exhausted[i] = False
            if self.refine:
                self._queue_refinement(candidate)
        return Decision(accepted, why, gain)

    def _queue_refinement(self, parent: Candidate) -> None:
        """After an unconditioned aggregate is accepted (``MEAN(events.amount)``), its most relevant conditioned
        member (``MEAN(events.amount WHERE events.kind = 'sell')``) goes next, when its relevance beats the
        parent's by two standard deviations of the shadows' relevance.

        An accepted aggregate says its column carries the label; a condition may say on which of its rows. The draws
        do not see it: a condition column's facet learns from every column it is tried with (on the scale
        benchmark's nominal2 at data seed 1, members under ``events.kind`` that aggregate units, merchants and fees,
        where nothing is, draw it down before any aggregates the amount). The conditioned members' relevance, a few
        milliseconds each, does see it: each conditioned family's beam is filled (its next members computed, the
        ones not sent left for their families' turns)."""
        conditioned = self._conditioned.get(parent.family)
        if not conditioned:
            return
        best: tuple[float, int, Candidate] | None = None
        for j in conditioned:
            if self.exhausted[j]:
                continue
            beam = self._fill(j)
            for c in beam.ready:
                if best is None or c.relevance > best[0]:
                    best = (c.relevance, j, c)
        if best is None:
            return
        r, j, c = best
        if r - parent.relevance > 2.0 * self._relevance_spread()[1]:
            self.beams[j].ready.remove(c)
            self._refinements.append(c)

    def _reward(self, candidate: Candidate, reward: float) -> None:
        """Every facet of the candidate's family learns ``reward`` (capped at +-3)."""
        for f in candidate.facets:
            a = self.arms[self.facet_index[f]] if f in self.facet_index else None
            if a is not None:
                a.n += 1
                a.total += float(np.clip(reward, -3, 3))

    def _observe_paired(self, candidate: Candidate, feedback: dict[str, Any]) -> Decision:
        """Accepted: the paired gain (over the candidate's permuted twin, :func:`paired_gain_of`) beats ``z`` times
        its standard error over the generation's pairs of trees (at least :data:`MIN_PAIRED_SE`).

        The twin is the candidate's own null, grown on the same trees' seeds, subspaces and bootstrap samples: the
        luck of the generation (which trees, which samples left out, which accepted features beside it) is shared
        and cancels, and the spread is the candidate's own, at the score it was measured at: no shadow is needed,
        and a feature that removes most of the error left is judged against its own noise, not that of shadows
        drawn at another score."""
        gain, se = paired_gain_of(feedback), feedback.get("oob_paired_se")
        if gain is None:
            return self._decided(candidate, True, "first feature (nothing to compare with)", gain)
        se = 0.0 if se is None else se  # a generation of one tree has no spread over its trees
        spread = max(se, MIN_PAIRED_SE)
        bound = self.z * spread
        accepted = gain > bound
        why = (f"paired gain {gain:+.4f} {'>' if accepted else '<='} {bound:+.4f} ({self.z:g} x its trees' "
               f"standard error {se:.4f}, at the error {_fmt_error(error_of(feedback))} left)")
        if "kind=attribute" not in candidate.facets:
            self._reward(candidate, (gain - bound) / spread)
        return self._decided(candidate, accepted, why, gain)


class EnumerationPolicy(ThompsonPolicy):
    """No choice: every member of every family in the generator's order (attributes, then flat aggregates, then
    aggregates of aggregates), restricted to ``max_complexity`` and to nested families without conditions;
    shadows and acceptance as :class:`ThompsonPolicy`. The exhaustive baseline the guided policy is compared with.
    """

    def __init__(self, generator: Generator, y: np.ndarray, labelled: np.ndarray, seed: int = 0,
                 max_complexity: int = 2, **kwargs: Any) -> None:
        super().__init__(generator, y, labelled, seed=seed, operators=(), **{"refine": False, **kwargs})
        # every attribute, related to the label or not, ahead of the enumeration
        self._pending_attr += [c for f in self.families if isinstance(f, Attributes) for c in f.candidates]
        self.max_complexity = max_complexity
        self.enumerated = [f for f in generator.families() if f.kind != "attribute" and complexity(f) <= max_complexity
                           and (f.kind != "nested" or complexity(f) <= 1)]
        self._queue = iter(self.enumerated)
        self._members: Any = iter(())
        self._family: Any = None

    def size(self) -> int:
        """How many candidates the enumeration holds (computing none)."""
        return len(self.attributes) + sum(sum(1 for _ in self.generator.members(f)) for f in self.enumerated)

    def _next_real(self) -> Candidate | None:
        """The next member of the enumeration, family after family."""
        while True:
            f = next(self._members, None)
            if f is None:
                self._family = next(self._queue, None)
                if self._family is None:
                    return None
                self._members = self.generator.members(self._family)
                continue
            c = self._make(self.generator.learn(f, self._score), str(self._family), self._family.facets())
            if c is not None:
                return c
