"""The propositionalization feedback loop: schema -> generator -> policy -> driver.

The loop sends the labelled target rows to an *exploration* stream, then one candidate after another as
``feature`` messages; the policy reads each ``feedback`` record and decides. Rejected features would otherwise stay
in the exploration forest and blur later feedback, so after ``rebase_after`` rejections the loop drops that stream
and starts a fresh one with the accepted features only (a ``control drop`` and re-sent features: nothing beyond
the protocol). At the end a *final* stream gets every target row -- the unlabelled ones as unlabelled samples,
never learned from -- and the final set: the accepted features and the policy's ``near_misses`` (the rejected
candidates whose gains came nearest the bar); its predictions score the unlabelled rows.

Examples
--------
>>> from streamforest.relational.synthetic import make_relational
>>> db = make_relational(n_targets=200, unlabelled=0.2, seed=0)
>>> result = run_loop(db, budget=12, seed=0)
>>> len(result.trials), len(result.predictions) == int((~db.labelled).sum())
(12, True)
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from streamforest.relational.candidates import Generator
from streamforest.relational.drivers import EngineClient, InProcess
from streamforest.relational.memory import release_free_memory
from streamforest.relational.policy import Candidate, Policy, ThompsonPolicy, error_of
from streamforest.relational.tables import Database

#: The forest of the exploration streams: small generations (feedback comes per candidate), and the paper's
#: whole-subspace splits: the loop compares each candidate's out-of-bag gain with its shadows', which needs
#: Algorithm 1's weights from the first feature on (the narrow-stream mode of ``split_features="auto"`` weighs the
#: first generations of a stream of 1-3 features on another scale, and a planted signal is then missed). Leaves
#: of 3 samples at any width (not the larger ones of ``"auto"`` on capped streams): the gains the policy compares
#: are those of one configuration, whatever the stream's width. A nominal candidate is split by sets of its
#: categories, even when they are numbers: ``numeric_categories="auto"`` would keep the better of two growths by
#: the out-of-bag error the gain is measured on.
EXPLORE_FOREST = {"trees_per_generation": 30, "split_features": None, "min_samples_leaf": 3,
                  "numeric_categories": "categories"}
#: The forest of the final stream, which scores the unlabelled rows with the final set: the offline forest on all of
#: it at once (the final engine's forests start on ``control start``, by ``fit``: one generation of 300 trees), grown
#: as Breiman's forests are: every feature in every tree, a third of them drawn anew at each split, leaves of one
#: sample. Per-tree subspaces (2/3 of the final set, searched whole at each split) make trees that all split on the
#: few strongest features; the draw at each split lets the others in (Mutagenesis, the loop's own predictions on
#: the same final sets; level where one planted feature carries the label among noise, the synthetic data:
#: docs/relational.md, "The final forest"). A generation per feature took most of the final
#: stream's time and added nothing: the challenger weights left the last three generations nearly all the vote. A
#: tree draws at most 20,000 labelled rows: on more, its cost and size grow with them and the forest's accuracy
#: hardly (on the scale benchmark's 70,000 labelled rows, the same out-of-bag AUC in a third less time; "Scale over
#: shapes" in docs/relational.md).
FINAL_FOREST = {"trees_per_generation": 300, "max_features": 1.0, "split_features": 1 / 3, "min_samples_leaf": 1,
                "numeric_categories": "categories", "max_samples": 20_000}


def engine_config(seed: int, forest: dict[str, Any] | None = None, final: bool = False) -> dict[str, Any]:
    """The engine configuration of the loop's exploration (or ``final``) engine, as ``EngineConfig`` arguments."""
    base = FINAL_FOREST if final else EXPLORE_FOREST
    return {"forest": {**base, **(forest or {}), "random_state": seed}, "publish": "unlabelled",
            "encoding": "none", **({"start": "control"} if final else {})}


@dataclass
class LoopResult:
    """What a run found: the final set (``accepted``: the accepted candidates, then the near misses), every trial,
    the scored rows' predictions, the score curve."""

    accepted: list[Candidate]
    trials: list[dict[str, Any]]
    predictions: dict[str, dict[str, float]]
    curve: list[tuple[int, float | None]] = field(default_factory=list)
    final_oob: float | None = None
    seconds: float = 0.0


class Loop:
    """Relational data in, features chosen by the engine's feedback out.

    Parameters
    ----------
    db
        The tables (from :func:`~streamforest.relational.schema.load_schema`, the documents converter, ...).
    policy
        What to try next; by default a :class:`~streamforest.relational.policy.ThompsonPolicy` over a
        :class:`~streamforest.relational.candidates.Generator` of ``db``.
    client
        The engine of the exploration streams; by default an in-process one.
    final_client
        The engine of the final stream (see :data:`FINAL_FOREST`); by default an in-process one, or ``client``
        itself when ``client`` is given.
    budget
        Most candidates sent to the engine (shadows count; re-sending accepted features after a rebase does not).
    seed
        Seed of the policy and of the engine's forests.
    rebase_after
        Rejections after which the exploration stream restarts with the accepted features only (or as many
        rejections as there are accepted features, when more: a rebase re-sends them all).
    explore_rows
        Most labelled rows the exploration looks at: beyond it, a stratified sample of this many (seeded) is where
        candidates are computed and fed back; the accepted ones are then computed on every row for the final
        stream. Feedback on 10,000 rows is as telling as on a million and a hundred times cheaper.
    final_forest
        Forest parameters of the final stream (over :data:`FINAL_FOREST`).
    policy_options
        Keyword arguments of the default :class:`~streamforest.relational.policy.ThompsonPolicy`.
    generator_options
        Keyword arguments of the :class:`~streamforest.relational.candidates.Generator` (``extended=True``: the
        shares, skewness, conjunctions and ratios).
    on_trial
        Called with every trial record as it happens (the CLI streams them to ``candidates.jsonl``).
    progress
        Called with a line of progress text after every candidate.
    """

    def __init__(self, db: Database, policy: Policy | None = None, client: EngineClient | None = None,
                 final_client: EngineClient | None = None, budget: int = 100, seed: int = 0,
                 rebase_after: int = 20, max_depth: int = 2, explore_rows: int | None = 10_000,
                 forest: dict[str, Any] | None = None, final_forest: dict[str, Any] | None = None,
                 policy_options: dict[str, Any] | None = None, generator_options: dict[str, Any] | None = None,
                 on_trial: Callable[[dict], None] | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        if budget < 1:
            raise ValueError(f"budget must be at least 1, got {budget}")
        labelled = db.labelled
        if len(set(np.asarray(db.labels)[labelled].tolist())) < 2:
            raise ValueError("the target needs labelled rows of at least two classes")
        self.db = db
        self.labels = db.label_values()
        self.generator = Generator(db, max_depth=max_depth, **(generator_options or {}))
        # a policy of the user's computes its candidates on every row: no sample then
        self.sample = None if policy is not None else _sample(np.asarray(db.labels), labelled, explore_rows, seed)
        self.explore_db = db if self.sample is None else db.subset(self.sample)
        if policy is None:
            gen = self.generator if self.sample is None else Generator(self.explore_db, max_depth=max_depth,
                                                                       **(generator_options or {}))
            policy = ThompsonPolicy(gen, np.asarray(self.explore_db.labels), self.explore_db.labelled, seed=seed,
                                    **(policy_options or {}))
        self.policy = policy
        if final_client is None:
            final_client = client or EngineClient(InProcess(engine_config(seed, final_forest, final=True)))
        self.client = client or EngineClient(InProcess(engine_config(seed, forest)))
        self.final_client = final_client
        self.budget = budget
        self.rebase_after = rebase_after
        self.on_trial = on_trial
        self.progress = progress

    def run(self) -> LoopResult:
        start = time.perf_counter()
        db = self.explore_db
        lab = db.labelled
        train_ids = db.ids[lab].tolist()
        train_y = [v for v, keep in zip(db.label_values(), lab, strict=True) if keep]
        k, rejected = 0, 0
        stream = f"explore-{k}"
        self.client.samples(stream, train_ids, train_y)
        accepted: list[Candidate] = []
        trials: list[dict[str, Any]] = []
        curve: list[tuple[int, float | None]] = []
        best: float | None = None
        misses: list[tuple[float, int, Candidate]] = []  # a min-heap of the best rejected, by normalised gain
        while len(trials) < self.budget:
            c = self.policy.propose()
            if c is None:
                break
            fb = self.client.feature(stream, c.name, train_ids, c.values[lab], c.nominal,
                                     paired_null=self.policy.paired and not c.shadow)
            d = self.policy.observe(c, fb)
            if d.accepted:
                accepted.append(c)
            else:
                rejected += 1
                if self.policy.near_misses and not c.shadow and d.gain is not None and d.gain > 0:
                    key = (d.gain / np.sqrt(error_of(fb) or 1.0), len(trials), c)
                    if len(misses) < self.policy.near_misses:
                        heapq.heappush(misses, key)
                    elif key[:2] > misses[0][:2]:
                        heapq.heapreplace(misses, key)
            oob = fb.get("oob_after")
            if oob is not None and d.accepted:
                best = oob if best is None else (min(best, oob) if fb["oob_metric"] == "log_loss" else max(best, oob))
            trial = {"n": len(trials) + 1, "definition": c.definition, "name": c.name, "family": c.family,
                     "shadow": c.shadow, "relevance": c.relevance, "accepted": d.accepted, "why": d.why,
                     "gain": d.gain, "stream": stream,
                     "feedback": {key: fb.get(key) for key in ("oob_metric", "oob_before", "oob_after", "importance",
                                                               "weight_share", "generation", "model_version")
                                  + (("oob_null", "oob_paired_se") if "oob_null" in fb else ())}}
            trials.append(trial)
            curve.append((len(trials), oob))
            if self.on_trial is not None:
                self.on_trial(trial)
            if self.progress is not None:
                mark = "+" if d.accepted else ("s" if c.shadow else "-")
                self.progress(f"[{len(trials):>4}/{self.budget}] {mark} gain {_fmt(d.gain)} oob {_fmt(oob)} "
                              f"best {_fmt(best)} accepted {len(accepted)}  {c.definition[:90]}")
            # a rebase re-sends every accepted feature: waiting for as many rejections as there are accepted
            # features bounds what rebases cost to one generation per rejection
            if rejected >= max(self.rebase_after, len(accepted)) and len(trials) < self.budget:
                self.client.drop(stream)
                k, rejected = k + 1, 0
                stream = f"explore-{k}"
                self.client.samples(stream, train_ids, train_y)
                for a in accepted:
                    self.client.feature(stream, a.name, train_ids, a.values[lab], a.nominal)
        self.client.drop(stream)
        accepted += [c for _, _, c in sorted(misses, key=lambda m: m[1])]
        predictions, final_oob = self._final(accepted)
        return LoopResult(accepted, trials, predictions, curve, final_oob, time.perf_counter() - start)

    def _final(self, accepted: list[Candidate]) -> tuple[dict[str, dict[str, float]], float | None]:
        """The accepted features on every target row; the unlabelled rows' predictions."""
        if not accepted:
            return {}, None
        client = self.final_client
        labelled = self.db.labelled
        # Most relevant first: on an engine whose forest starts on arrival (one serving the exploration too), the
        # strong features are then in every generation.
        order = sorted(range(len(accepted)), key=lambda i: (-np.nan_to_num(accepted[i].relevance), i))
        accepted[:] = [accepted[i] for i in order]
        if self.sample is not None:  # computed on the exploration sample so far: now on every row
            accepted[:] = [replace(a, values=self.generator.values(a.feature)) for a in accepted]
        # Every value the final stream needs is made: the paths' row indexes and visibility (tens of MB per path
        # over millions of child rows) go before its forest grows.
        for gen in {self.generator, getattr(self.policy, "generator", None)}:
            if isinstance(gen, Generator):
                gen.forget_indexes()
        release_free_memory()
        # The labelled rows, the final set on them, the unlabelled rows with every feature's value; then `control
        # start`: the final engine (start "control") grows the offline forest on the whole set at once, learning
        # from the labelled rows alone, and scores the unlabelled rows once.
        lab_ids = self.db.ids[labelled].tolist()
        client.samples("final", lab_ids, [v for v, keep in zip(self.labels, labelled, strict=True) if keep])
        fb: dict[str, Any] = {}
        for a in accepted:
            fb = client.feature("final", a.name, lab_ids, a.values[labelled], a.nominal, waiting_ok=True)
            release_free_memory()  # an engine that grows a generation per feature: what it freed goes back
        scored = ~labelled
        n_scored = int(scored.sum())
        if n_scored:
            client.samples("final", self.db.ids[scored].tolist(), [None] * n_scored,
                           [(a.name, a.values[scored], a.nominal) for a in accepted])
        fb = client.start("final", waiting=fb.get("status") == "waiting") or fb
        release_free_memory()
        preds = client.wait_predictions("final", n_scored, fb["model_version"]) if n_scored else {}
        return preds, fb.get("oob_after")


def _sample(labels: np.ndarray, labelled: np.ndarray, n: int | None, seed: int) -> np.ndarray | None:
    """A stratified sample of ``n`` labelled rows (sorted), or None when there are not more than ``n``."""
    rows = np.flatnonzero(labelled)
    if n is None or rows.size <= n:
        return None
    rng = np.random.default_rng(seed)
    classes, codes = np.unique(labels[rows], return_inverse=True)
    take = []
    for c in range(classes.size):
        members = rows[codes == c]
        k = max(1, round(n * members.size / rows.size))
        take.append(rng.choice(members, size=min(k, members.size), replace=False))
    return np.sort(np.concatenate(take))


def run_loop(db: Database, budget: int = 100, seed: int = 0, **kwargs: Any) -> LoopResult:
    """Run the loop in-process with the default policy (see :class:`Loop` for the options)."""
    loop = Loop(db, budget=budget, seed=seed, **kwargs)
    try:
        return loop.run()
    finally:
        loop.client.close()
        loop.final_client.close()


def _fmt(v: float | None) -> str:
    return "   --  " if v is None else f"{v:+.4f}"
