"""Every aggregate against a slow per-group reference, directly and through the generator's paths."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamforest.relational import aggregates as agg
from streamforest.relational.candidates import Aggregate, Condition, Generator, Step
from streamforest.relational.synthetic import make_relational


def slow(func: str, groups: np.ndarray, n: int, x: np.ndarray | None, t: np.ndarray | None,
         sizes: np.ndarray | None = None) -> np.ndarray:
    """Per group; ``sizes``: each group's rows before any condition (what ``share`` divides by)."""
    out = np.full(n, np.nan)
    for g in range(n):
        rows = [i for i in range(groups.size) if groups[i] == g]
        vals = [x[i] for i in rows] if x is not None else []
        if func == "share":
            size = len(rows) if sizes is None else sizes[g]
            out[g] = len(rows) / size if size else np.nan
        elif func == "count":
            out[g] = len(rows)
        elif func == "sum":
            out[g] = sum(vals)
        elif func == "nunique":
            out[g] = len(set(vals))
        elif not rows:
            continue
        elif func == "mean":
            out[g] = sum(vals) / len(vals)
        elif func == "std":
            m = sum(vals) / len(vals)
            out[g] = (sum((v - m) ** 2 for v in vals) / len(vals)) ** 0.5
        elif func == "skew":
            m = sum(vals) / len(vals)
            m2, m3 = (sum((v - m) ** k for v in vals) / len(vals) for k in (2, 3))
            out[g] = np.nan if len(vals) < 3 else 0.0 if m2 == 0 else m3 / m2**1.5
        elif func == "min":
            out[g] = min(vals)
        elif func == "max":
            out[g] = max(vals)
        elif func == "mode_share":
            out[g] = max(vals.count(v) for v in set(vals)) / len(vals)
        elif func == "first":
            out[g] = x[min(rows, key=lambda i: (t[i], i))]
        elif func == "last":
            out[g] = x[max(rows, key=lambda i: (t[i], i))]
    return out


@pytest.mark.parametrize("func", agg.FUNCS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reduce_matches_reference(func, seed):
    rng = np.random.default_rng(seed)
    n = 12
    groups = np.sort(rng.integers(0, n, 60))  # some groups stay empty
    x = rng.integers(0, 4, groups.size).astype(float) + (0 if seed else 0.5 * rng.random(groups.size))
    t = rng.integers(0, 5, groups.size).astype(float)  # ties in time: row order breaks them
    got = agg.reduce(func, groups, n, x, t)
    np.testing.assert_allclose(got, slow(func, groups, n, x, t), equal_nan=True, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("func", agg.FUNCS)
@pytest.mark.parametrize("nominal", [False, True])
def test_reduce_index_on_unsorted_rows_with_conditions(func, nominal):
    rng = np.random.default_rng(7)
    n, m = 9, 80
    owner = rng.integers(-1, n, m)  # -1: a row without an owner (unlinked, or not visible)
    if nominal:
        x = rng.integers(-1, 3, m).astype(np.int32)  # codes, -1 missing
        present = x >= 0
    else:
        x = np.where(rng.random(m) < 0.2, np.nan, rng.integers(0, 4, m) + 0.25)
        present = ~np.isnan(x)
    cond = rng.integers(0, 3, m).astype(np.float64)
    t = np.where(rng.random(m) < 0.2, np.nan, rng.integers(0, 4, m).astype(np.float64))  # unknown times last
    starts, rows = agg.index(owner, n)
    assert starts[-1] == (owner >= 0).sum()
    assert all(np.all(np.diff(rows[a:b]) > 0) for a, b in itertools.pairwise(starts))  # row order in each group
    cond2 = rng.normal(size=m)
    sizes = np.bincount(owner[owner >= 0], minlength=n)

    def meets(c: np.ndarray, op: int, threshold: float) -> np.ndarray:
        return np.ones(m, dtype=bool) if op == agg.NO_CONDITION else (c == threshold) if op == agg.EQUAL else (
            c > threshold)

    for (op, threshold), (op2, threshold2) in itertools.product(
            ((agg.NO_CONDITION, 0.0), (agg.EQUAL, 1.0), (agg.GREATER, 0.0)),
            ((agg.NO_CONDITION, 0.0), (agg.GREATER, 0.3))):
        keep = (owner >= 0) & meets(cond, op, threshold) & meets(cond2, op2, threshold2)
        if func not in agg.ROWS:
            keep &= present
        order = np.argsort(owner[keep], kind="stable")
        g, xs, ts = owner[keep][order], x[keep][order].astype(np.float64), t[keep][order]
        # the reference sorts unknown times after every known one, as the kernel does
        expected = slow(func, g, n, xs, np.where(np.isnan(ts), np.inf, ts), sizes)
        got = agg.reduce_index(func, starts, rows, x, nominal, cond, op, threshold, t, cond2, op2, threshold2)
        np.testing.assert_allclose(got, expected, equal_nan=True, rtol=1e-12, atol=1e-12,
                                   err_msg=f"{func} {op} {op2}")


def test_reduce_empty_input():
    e = np.zeros(0, dtype=np.int64)
    assert agg.reduce("count", e, 3).tolist() == [0, 0, 0]
    assert np.isnan(agg.reduce("max", e, 3, np.zeros(0))).all()
    with pytest.raises(ValueError, match="unknown aggregate"):
        agg.reduce("median", np.array([0]), 1, np.array([1.0]))


def _reference(db, f: Aggregate) -> np.ndarray:
    """A feature computed row by row with Python loops over the tables."""
    orders, items = db.tables["order"], db.tables["item"]
    o_owner = orders.links[0].index
    i_owner = items.links[0].index

    def rows_of(path, owner_rows):
        if path[0].child == "order":
            rs = [j for j in range(orders.n_rows) if o_owner[j] in owner_rows]
            tab = orders
            if len(path) == 2:
                rs = [j for j in range(items.n_rows) if i_owner[j] in set(rs)]
                tab = items
        else:  # item below an order
            rs = [j for j in range(items.n_rows) if i_owner[j] in owner_rows]
            tab = items
        return tab, rs

    def value(f, owner_rows, groupset):
        tab, rs = rows_of(f.path, owner_rows)
        size = len(rs)
        c = f.where
        while c is not None:
            col = tab.columns[c.column]
            if col.nominal:
                rs = [j for j in rs if col.values[j] >= 0 and col.categories[col.values[j]] == c.value]
            elif c.op == "=":
                rs = [j for j in rs if col.values[j] == c.value]
            else:
                rs = [j for j in rs if col.values[j] > c.value]
            c = c.also
        if f.func == "count":
            return float(len(rs))
        if f.func == "share":
            return len(rs) / size if size else np.nan
        if f.inner is not None:
            vals = [value(f.inner, {j}, None) for j in rs]
        else:
            vals = [float(tab.columns[f.column].values[j]) for j in rs]
        vals = [v for v in vals if v == v]
        if f.func == "sum":
            return float(sum(vals))
        if not vals:
            return np.nan
        return slow(f.func, np.zeros(len(vals), dtype=int), 1, np.array(vals), None)[0]

    return np.array([value(f, {r}, None) for r in range(db.tables["customer"].n_rows)])


ORDER, ITEM = Step("order", "customer_id"), Step("item", "order_id")
FEATURES = [
    Aggregate("count", (ORDER,)),
    Aggregate("mean", (ORDER,), "amount", where=Condition("channel", "=", "web")),
    Aggregate("max", (ORDER, ITEM), "price", where=Condition("category", "=", "c")),
    Aggregate("std", (ORDER, ITEM), "price", where=Condition("quantity", ">", 2.0)),
    Aggregate("nunique", (ORDER, ITEM), "category"),
    Aggregate("mode_share", (ORDER, ITEM), "category", where=Condition("quantity", "=", 3.0)),
    Aggregate("mean", (ORDER,), inner=Aggregate("max", (ITEM,), "price")),
    Aggregate("min", (ORDER,), inner=Aggregate("count", (ITEM,), where=Condition("category", "=", "a")),
              where=Condition("channel", "=", "store")),
    Aggregate("sum", (ORDER,), inner=Aggregate("mean", (ITEM,), "quantity")),
    Aggregate("share", (ORDER, ITEM), where=Condition("category", "=", "c")),
    Aggregate("count", (ORDER, ITEM), where=Condition("category", "=", "c", Condition("price", ">", 40.0))),
    Aggregate("share", (ORDER,), where=Condition("channel", "=", "web", Condition("amount", ">", 50.0))),
    Aggregate("mean", (ORDER,), inner=Aggregate("share", (ITEM,), where=Condition("quantity", ">", 2.0))),
]


@pytest.mark.parametrize("feature", FEATURES, ids=lambda f: f.func + ("_and" if f.where and f.where.also else ""))
def test_generator_values_match_reference(feature):
    db = make_relational(n_targets=25, orders_per_target=2.5, items_per_order=2.5, seed=3)
    got = Generator(db).values(feature)
    np.testing.assert_allclose(got, _reference(db, feature), equal_nan=True, rtol=1e-12)


def test_learned_threshold_uses_the_score_and_appears_in_the_definition():
    from streamforest.relational.candidates import definition

    db = make_relational(n_targets=300, seed=0)
    g = Generator(db)
    f = Aggregate("count", (ORDER, ITEM), where=Condition("price", ">"))
    target = g.values(Aggregate("count", (ORDER, ITEM), where=Condition("price", ">", 40.0)))
    learned = g.learn(f, lambda v: -float(np.nanmean(np.abs(v - target))))
    assert learned.where.value is not None
    assert definition(learned).startswith("COUNT(order.item WHERE item.price > ")
    with pytest.raises(ValueError, match="threshold still to learn"):
        g.values(f)
