"""Nominal features whose categories are numbers (``numeric_categories``): split by sets of categories, by the
numbers' order, or whichever the out-of-bag error of the arriving generation prefers."""

from __future__ import annotations

import numpy as np
import pytest

from streamforest import FeatureStreamForest
from streamforest.binning import ColumnBinner


def ordinal_codes(n: int = 90, n_codes: int = 30, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Many codes of a few samples each, the label rising with the code: sets of categories see each code's few
    samples (too few to be placed on their own), the order sees the trend."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_codes, size=n).astype(np.float64)
    y = ((codes + rng.normal(scale=4.0, size=n)) > n_codes / 2).astype(np.int64)
    return codes, y


def parity_codes(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ten codes, the label their parity (with noise): no threshold on the order separates them, sets do."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 10, size=n).astype(np.float64)
    y = ((codes % 2 == 1) ^ (rng.random(n) < 0.1)).astype(np.int64)
    return codes, y


def streamed(codes: np.ndarray, y: np.ndarray, rule: str, seed: int = 0) -> FeatureStreamForest:
    rng = np.random.default_rng(seed + 1)
    f = FeatureStreamForest(trees_per_generation=20, numeric_categories=rule, random_state=seed)
    f.add_feature("noise", rng.normal(size=y.size), y=y)
    f.add_feature("code", codes, kind="nominal")
    return f


def test_which_nominal_columns_can_be_split_as_numbers():
    assert ColumnBinner.fit("c", np.array([3.0, 1.0, 2.0, np.nan]), kind="nominal").numbers_in_order
    # Two categories split alike either way; text and booleans have no order to use.
    assert not ColumnBinner.fit("c", np.array([1.0, 2.0, 1.0]), kind="nominal").numbers_in_order
    assert not ColumnBinner.fit("c", np.array(["a", "b", "c"], dtype=object)).numbers_in_order
    assert not ColumnBinner.fit("c", np.array([True, False, True], dtype=object), kind="nominal").numbers_in_order
    assert not ColumnBinner.fit("c", np.array([1.0, 2.0, 3.0])).numbers_in_order  # numeric already


def test_auto_takes_the_order_of_ordinal_codes_and_sets_of_parity_codes():
    f = streamed(*ordinal_codes(), "auto")
    assert [b.ordered for b in f._columns.binners] == [False, True]
    assert f._columns.is_nominal().tolist() == [False, False]  # split as numbers from now on
    g = streamed(*parity_codes(), "auto")
    assert [b.ordered for b in g._columns.binners] == [False, False]
    assert g._columns.is_nominal().tolist() == [False, True]


def test_the_chosen_rule_is_the_one_that_errs_less_out_of_bag():
    codes, y = ordinal_codes()
    errors = {}
    for rule in ("categories", "order"):
        f = streamed(codes, y, rule)
        errors[rule] = f._generation_oob_error(f._generations[-1])
    auto = streamed(codes, y, "auto")
    # The same plans and seeds grow the same trees: auto keeps the generation of the rule it chose.
    assert errors["order"] < errors["categories"]
    assert auto._generation_oob_error(auto._generations[-1]) == errors["order"]
    x = np.column_stack([np.zeros(5), np.arange(0.0, 30.0, 6.0)])
    assert np.array_equal(auto.predict_proba(x), streamed(codes, y, "order").predict_proba(x))


def test_order_splits_by_threshold_and_unseen_codes_go_with_missing_values():
    codes, y = ordinal_codes()
    f = streamed(codes, y, "order")
    trees = f.alive_trees().trees
    on_code = trees.feature == 1
    assert on_code.any() and not trees.nominal[on_code].any()  # thresholds, not sets of categories
    seen, unseen = np.array([[0.0, 3.0]]), np.array([[0.0, 3.5]])
    missing = np.array([[0.0, np.nan]])
    assert not np.array_equal(f.predict_proba(seen), f.predict_proba(unseen))
    assert np.array_equal(f.predict_proba(unseen), f.predict_proba(missing))


def test_categories_never_orders_and_text_categories_are_never_tried():
    f = streamed(*ordinal_codes(), "categories")
    assert [b.ordered for b in f._columns.binners] == [False, False]
    codes, y = ordinal_codes()
    text = np.array([f"c{int(c):02d}" for c in codes], dtype=object)
    g = streamed(text, y, "auto")
    assert [b.ordered for b in g._columns.binners] == [False, False]


def test_the_rule_is_saved_and_regrowing_keeps_it(tmp_path):
    codes, y = ordinal_codes()
    f = streamed(codes, y, "auto")
    f.save(tmp_path / "f.sf")
    g = FeatureStreamForest.load(tmp_path / "f.sf")
    assert [b.ordered for b in g._columns.binners] == [False, True]
    assert g.get_params()["numeric_categories"] == "auto"
    x = np.column_stack([np.zeros(4), [1.0, 7.0, 19.0, 28.0]])
    assert np.array_equal(f.predict_proba(x), g.predict_proba(x))
    # More samples: the generations regrow with the feature split as numbers.
    g.add_samples({"noise": np.zeros(3), "code": np.array([2.0, 15.0, 27.0])}, np.array([0, 1, 1]))
    assert not g.alive_trees().trees.nominal[g.alive_trees().trees.feature == 1].any()


def test_bad_value_is_refused():
    with pytest.raises(ValueError, match="numeric_categories"):
        FeatureStreamForest(numeric_categories="ordinal")
