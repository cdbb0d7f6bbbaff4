"""The policy's parts: shadows, thresholds, feedback-driven choice, enumeration, and the exploration sample."""

from __future__ import annotations

import numpy as np

from streamforest.relational.candidates import Generator
from streamforest.relational.loop import _sample
from streamforest.relational.policy import EnumerationPolicy, ThompsonPolicy, gain_of, relevance
from streamforest.relational.synthetic import make_relational


def feedback(gain: float) -> dict:
    return {"oob_metric": "auc", "oob_before": 0.8, "oob_after": 0.8 + gain, "importance": 0.1}


def test_shadows_are_permutations_on_labelled_rows_only():
    db = make_relational(n_targets=200, unlabelled=0.25, seed=0)
    p = ThompsonPolicy(Generator(db), db.labels, db.labelled, seed=1)
    seen = []
    while len([c for c in seen if c.shadow]) < 2:
        c = p.propose()
        p.observe(c, feedback(0.0))
        seen.append(c)
    shadow = next(c for c in seen if c.shadow)
    base = next(c for c in seen if c.definition == shadow.definition.split("(", 1)[1][:-1])
    lab = db.labelled
    assert sorted(shadow.values[lab].tolist()) == sorted(base.values[lab].tolist())
    assert not np.array_equal(shadow.values[lab], base.values[lab])
    np.testing.assert_array_equal(shadow.values[~lab], base.values[~lab])


def test_threshold_follows_the_shadows_and_decides():
    db = make_relational(n_targets=100, seed=0)
    p = ThompsonPolicy(Generator(db), db.labels, db.labelled, z=1.0)  # the default is 1.5
    assert p.threshold() == 0.0
    p.shadow_gains = [0.01, -0.01, 0.0, 0.02]
    g = np.array(p.shadow_gains)
    assert np.isclose(p.threshold(), g.mean() + g.std(ddof=1))
    c = next(x for x in iter(p.propose, None) if not x.shadow and "kind=attribute" not in x.facets)
    assert not p.observe(c, feedback(0.01)).accepted
    d = p.observe(c, feedback(0.05))
    assert d.accepted and "gain +0.0500 >" in d.why
    assert gain_of({"oob_metric": "log_loss", "oob_before": 0.5, "oob_after": 0.4}) == 0.09999999999999998


def test_rewards_steer_the_draws():
    db = make_relational(n_targets=300, seed=0)
    p = ThompsonPolicy(Generator(db), db.labels, db.labelled, seed=0, shadow_every=0)
    for _ in range(40):  # reward every candidate about items, punish the rest
        c = p.propose()
        if c is None:
            break
        p.observe(c, feedback(0.05 if "item" in c.definition else -0.05))
    tail = [p.propose() for _ in range(20)]
    assert sum("item" in c.definition for c in tail) >= 15


def test_same_seed_same_proposals():
    db = make_relational(n_targets=150, seed=3)
    runs = []
    for _ in range(2):
        p = ThompsonPolicy(Generator(db), db.labels, db.labelled, seed=7)
        out = []
        for k in range(25):
            c = p.propose()
            p.observe(c, feedback(0.01 * ((k * 7) % 5 - 2)))
            out.append(c.definition)
        runs.append(out)
    assert runs[0] == runs[1]


def test_relevance():
    y = np.array([0, 0, 1, 1, 2, 2])
    assert relevance(np.arange(6.0), y) > 0.5
    assert relevance(np.ones(6), y) == 0.0
    assert relevance(np.array([np.nan, np.nan, 1, 1, 2, 2]), np.array([0, 0, 1, 1, 1, 1])) == 1.0


def test_enumeration_covers_its_space():
    db = make_relational(n_targets=60, seed=0)
    p = EnumerationPolicy(Generator(db), db.labels, db.labelled, shadow_every=0)
    defs = []
    while (c := p.propose()) is not None:
        p.observe(c, feedback(0.0))
        defs.append(c.definition)
    assert len(defs) == len(set(defs)) and len(defs) <= p.size()
    assert len(defs) > 0.8 * p.size()  # the rest are constant or duplicate candidates, skipped


def test_stratified_sample():
    labels = np.array(["1"] * 300 + ["0"] * 700 + [""] * 50)
    s = _sample(labels, labels != "", 100, seed=0)
    assert s.size == 100 and (labels[s] == "1").sum() == 30 and np.all(np.diff(s) > 0)
    assert _sample(labels, labels != "", 5000, 0) is None


def test_relevance_ranks_ties_as_scipy_does():
    from scipy.stats import rankdata

    from streamforest.metrics import average_ranks

    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.integers(0, 5, 40).astype(float)
        v[rng.random(40) < 0.2] = -np.inf
        np.testing.assert_array_equal(average_ranks(v), rankdata(v))
        # candidates are told apart by their dense ranks (np.unique's inverse): scipy's, less one
        np.testing.assert_array_equal(np.unique(v, return_inverse=True)[1] + 1, rankdata(v, method="dense"))
    assert average_ranks(np.array([])).size == 0
    y = rng.integers(0, 2, 400)
    x = y + rng.normal(size=400)
    assert 0.3 < relevance(x, y) <= 1.0 and relevance(rng.permutation(x), y) < relevance(x, y)


def test_screen_prefers_families_related_to_the_label():
    db = make_relational(n_targets=400, seed=3)

    def first_relevances(screen: int) -> float:
        p = ThompsonPolicy(Generator(db), db.labels, db.labelled, seed=0, shadow_every=0, screen=screen)
        got = []
        while len(got) < 15:
            c = p.propose()
            p.observe(c, feedback(0.0))
            if "kind=attribute" not in c.facets:
                got.append(c.relevance)
        return float(np.mean(got))

    assert first_relevances(8) > first_relevances(1)
