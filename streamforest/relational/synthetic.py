"""Synthetic relational data with a planted signal two levels down, and a size knob.

customer (target) -1:n- order -1:n- item. The label of a customer is whether the mean price of its items of
category ``'c'`` (a conditional aggregate two levels down, ``MEAN(order.item.price WHERE item.category = 'c')``)
exceeds the median, with a share of labels flipped. Every other column is noise. With ``time=True`` customers get
a cutoff and orders a time; orders after the cutoff carry a leak (their ``amount`` is the label), which only a
time-unsafe aggregate can see.
"""

from __future__ import annotations

import numpy as np

from streamforest.relational.tables import Column, Database, Link, Table

CHANNELS = ("phone", "store", "web")
CATEGORIES = tuple("abcdefgh")


def make_relational(n_targets: int = 1000, orders_per_target: float = 4.0, items_per_order: float = 3.0,
                    noise: float = 0.05, unlabelled: float = 0.0, time: bool = False, seed: int = 0) -> Database:
    """A database of ``n_targets`` customers with Poisson numbers of orders and items.

    Examples
    --------
    >>> db = make_relational(n_targets=100, seed=1)
    >>> db.target, sorted(db.tables), db.tables["item"].n_rows > db.tables["order"].n_rows > 100
    ('customer', ['customer', 'item', 'order'], True)
    """
    rng = np.random.default_rng(seed)
    n_orders = rng.poisson(orders_per_target, n_targets)
    order_owner = np.repeat(np.arange(n_targets), n_orders)
    n_o = order_owner.size
    n_items = 1 + rng.poisson(max(items_per_order - 1, 0), n_o)
    item_owner = np.repeat(np.arange(n_o), n_items)
    n_i = item_owner.size
    price = rng.gamma(2.0, 10.0, n_i)
    category = rng.integers(0, len(CATEGORIES), n_i).astype(np.int32)
    cust = order_owner[item_owner]
    # customers differ in how expensive their 'c' items are: that is the planted signal
    taste = rng.normal(0.0, 1.0, n_targets)
    is_c = category == CATEGORIES.index("c")
    price = np.where(is_c, price * np.exp(0.5 * taste[cust]), price)
    order_time = rng.uniform(0.0, 100.0, n_o)
    cutoff = rng.uniform(40.0, 100.0, n_targets)
    visible = (order_time <= cutoff[order_owner])[item_owner] if time else np.ones(n_i, dtype=bool)
    sel = is_c & visible
    s = np.bincount(cust[sel], weights=price[sel], minlength=n_targets)
    c = np.bincount(cust[sel], minlength=n_targets)
    with np.errstate(invalid="ignore"):
        mean_c = s / c
    score = np.where(c > 0, mean_c, np.nanmedian(mean_c))
    y = (score > np.median(score)).astype(int)
    flip = rng.random(n_targets) < noise
    y = np.where(flip, 1 - y, y)
    amount = rng.gamma(2.0, 50.0, n_o)
    if time:  # future orders leak the label: a time-safe aggregate must not see them
        future = order_time > cutoff[order_owner]
        amount = np.where(future, y[order_owner] * 1000.0 + rng.random(n_o), amount)
    labels = y.astype(str)
    labels[rng.random(n_targets) < unlabelled] = ""
    tables = {
        "customer": Table("customer", n_targets, {
            "age": Column("age", rng.normal(40, 10, n_targets)),
            "region": Column("region", rng.integers(0, 4, n_targets).astype(np.int32), ("n", "s", "e", "w")),
        }),
        "order": Table("order", n_o, {
            "amount": Column("amount", amount),
            "channel": Column("channel", rng.integers(0, 3, n_o).astype(np.int32), CHANNELS),
        }, [Link("customer_id", "customer", order_owner.astype(np.int64))],
            time=order_time if time else None, time_column="time" if time else None),
        "item": Table("item", n_i, {
            "price": Column("price", price),
            "category": Column("category", category, CATEGORIES),
            "quantity": Column("quantity", rng.integers(1, 6, n_i).astype(np.float64)),
        }, [Link("order_id", "order", item_owner.astype(np.int64))]),
    }
    return Database(tables, "customer", "label", np.arange(n_targets).astype(str), labels,
                    cutoff if time else None, "customer_id")
