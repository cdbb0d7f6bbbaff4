"""Time safety: an aggregate for a target row sees only child rows at or before that row's cutoff."""

from __future__ import annotations

import itertools

import numpy as np

from streamforest.relational.candidates import Aggregate, Generator, Step, has_placeholder
from streamforest.relational.synthetic import make_relational


def test_future_rows_are_invisible():
    db = make_relational(n_targets=120, time=True, seed=4)
    orders = db.tables["order"]
    owner = orders.links[0].index
    future = orders.time > db.cutoff[owner]
    assert future.any() and (~future).any()
    got = Generator(db).values(Aggregate("max", (Step("order", "customer_id"),), "amount"))
    # the slow way: only orders at or before the cutoff
    ref = np.full(db.tables["customer"].n_rows, np.nan)
    for j in np.flatnonzero(~future):
        ref[owner[j]] = np.fmax(ref[owner[j]], orders.columns["amount"].values[j])
    np.testing.assert_array_equal(got, ref)
    assert np.nanmax(got) < 1000  # the leak planted in future orders never shows


def test_changing_the_future_changes_no_feature():
    pristine = Generator(make_relational(n_targets=80, time=True, seed=5))
    db = make_relational(n_targets=80, time=True, seed=5)
    orders, items = db.tables["order"], db.tables["item"]
    future = orders.time > db.cutoff[orders.links[0].index]
    rng = np.random.default_rng(0)
    # rewrite every value of the future orders and of their items
    orders.columns["amount"].values[future] = rng.normal(size=future.sum())
    orders.columns["channel"].values[future] = rng.integers(0, 3, future.sum())
    fi = future[items.links[0].index]
    items.columns["price"].values[fi] = rng.normal(size=fi.sum()) * 100
    items.columns["category"].values[fi] = rng.integers(0, 8, fi.sum())
    changed = Generator(db)
    checked = 0
    for fam in itertools.islice(pristine.families(), 0, None, 7):  # a spread over flat and nested families
        f = next(pristine.members(fam), None)
        if f is None or has_placeholder(f):
            continue
        np.testing.assert_array_equal(changed.values(f), pristine.values(f), err_msg=str(fam))
        checked += 1
    assert checked > 50
