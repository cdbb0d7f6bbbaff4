"""The families a propositionalizer has beyond one condition per aggregate: the share of rows meeting a condition,
conjunctions of two conditions (thresholds learned among the first one's rows), ratios of accepted features."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from streamforest.relational.candidates import (
    Aggregate,
    Condition,
    Family,
    Generator,
    Step,
    combine,
    definition,
)
from streamforest.relational.policy import relevance
from streamforest.relational.synthetic import make_relational

ORDER, ITEM = Step("order", "customer_id"), Step("item", "order_id")


def conjunction_label(seed: int):
    """The synthetic customers, labelled by the share of their items that are of category 'c' and cost more than
    the 70th percentile of the category's prices: neither condition alone says it."""
    db = make_relational(n_targets=400, seed=seed)
    items = db.tables["item"]
    is_c = items.columns["category"].values == db.tables["item"].columns["category"].categories.index("c")
    price = items.columns["price"].values
    cut = float(np.quantile(price[is_c], 0.7))
    where = Condition("category", "=", "c", Condition("price", ">", cut))
    share = Generator(db, extended=True).values(Aggregate("share", (ORDER, ITEM), where=where))
    y = (np.nan_to_num(share) > np.nanmedian(share)).astype(int).astype(str)
    return dataclasses.replace(db, labels=y), cut


def test_the_extended_space_holds_shares_and_conjunctions_but_no_share_of_all_rows():
    db = make_relational(n_targets=60, seed=0)
    fams = list(Generator(db, extended=True).families())
    plain = list(Generator(db).families())
    assert set(plain) < set(fams) and not [f for f in plain if f.func in ("share", "skew") or f.cond2 is not None]
    assert Family("aggregate", (ORDER, ITEM), "share", None, ("category", "=")) in fams
    assert Family("aggregate", (ORDER, ITEM), "count", None, ("category", "="), cond2=("price", ">")) in fams
    assert not [f for f in fams if f.func == "share" and f.cond is None]
    # conjunctions are flat aggregates only: inside aggregates of aggregates they would square the nested space
    assert not [f for f in fams if f.inner is not None and (f.cond2 is not None or f.inner.cond2 is not None)]
    # a pair of '=' columns once, in name order
    pairs = {(f.cond, f.cond2) for f in fams if f.cond2 is not None and f.cond2[1] == "="}
    assert all((b, a) not in pairs for a, b in pairs)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_label_defined_by_a_conjunction_is_found_by_its_family_and_not_by_either_condition(seed):
    db, cut = conjunction_label(seed)
    g = Generator(db, extended=True)
    y = db.labels.astype(int)
    fam = Family("aggregate", (ORDER, ITEM), "share", None, ("category", "="), cond2=("price", ">"))
    members = [g.learn(f, lambda v: relevance(v, y)) for f in g.members(fam)]
    best = max(members, key=lambda f: relevance(g.values(f), y))
    assert best.where.value == "c" and best.where.also.column == "price"
    # the threshold is one of the deciles of the prices of category 'c' (not of all prices): the nearest to the cut
    items = db.tables["item"]
    is_c = items.columns["category"].values == items.columns["category"].categories.index("c")
    deciles = np.quantile(items.columns["price"].values[is_c], np.arange(1, 10) / 10)
    assert best.where.also.value == pytest.approx(deciles[np.argmin(np.abs(deciles - cut))], rel=1e-5)
    assert definition(best).startswith("SHARE(order.item WHERE item.category = 'c' AND item.price > ")
    r_conj = relevance(g.values(best), y)
    singles = [g.learn(f, lambda v: relevance(v, y)) for func in ("count", "share")
               for cond in (("category", "="), ("price", ">"))
               for f in g.members(Family("aggregate", (ORDER, ITEM), func, None, cond))]
    r_single = max(relevance(g.values(f), y) for f in singles)
    assert r_conj > 0.9 and r_conj > r_single + 0.1, (r_conj, r_single)


def test_a_ratio_to_zero_is_missing():
    got = combine("div", np.array([1.0, 2.0, np.nan]), np.array([0.0, 4.0, 1.0]))
    np.testing.assert_array_equal(got, [np.nan, 0.5, np.nan])


def test_the_ratio_is_an_operator_of_the_extended_space_only():
    from streamforest.relational.policy import ThompsonPolicy

    db = make_relational(n_targets=60, seed=0)
    assert "div" not in ThompsonPolicy(Generator(db), db.labels, db.labelled).operators
    assert "div" in ThompsonPolicy(Generator(db, extended=True), db.labels, db.labelled).operators


def test_fillings_are_every_member_learn_chooses_from():
    """An oracle over the space sees each threshold the loop could learn: ``learn``'s choice is one of ``fillings``,
    for a flat ``>`` condition, the second condition of a conjunction and the inner one of an aggregate of
    aggregates; a member without a placeholder is its own only filling."""
    db, _ = conjunction_label(0)
    g = Generator(db, extended=True)
    y = db.labels.astype(int)
    fams = [Family("aggregate", (ORDER, ITEM), "count", None, ("price", ">")),
            Family("aggregate", (ORDER, ITEM), "share", None, ("category", "="), cond2=("price", ">")),
            Family("nested", (ORDER,), "max", None, None,
                   Family("aggregate", (ITEM,), "count", None, ("price", ">")))]
    for fam in fams:
        member = next(g.members(fam))
        filled = g.fillings(member)
        assert len(filled) == len({definition(f) for f in filled}) > 1
        assert all("?" not in definition(f) for f in filled)
        assert g.learn(member, lambda v: relevance(v, y)) in filled
        # with any score, not only relevance: the choice is always among the fillings
        assert g.learn(member, lambda v: -float(np.nanmean(v))) in filled
    plain = Aggregate("mean", (ORDER, ITEM), "price")
    assert g.fillings(plain) == [plain]
