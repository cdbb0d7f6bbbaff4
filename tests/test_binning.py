"""Binning of feature columns: quantile bins, the missing bin, categories, JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from streamforest.binning import MAX_BINS, MISSING_BIN, ColumnBinner


def json_round_trip(b: ColumnBinner) -> ColumnBinner:
    return ColumnBinner.from_json(json.loads(json.dumps(b.to_json())))


# ----------------------------------------------------------------------------- numeric columns


def test_constants():
    assert MISSING_BIN == 255
    assert MAX_BINS == 255


def test_many_distinct_values_get_at_most_255_quantile_bins():
    rng = np.random.default_rng(0)
    x = rng.normal(size=5000)
    b = ColumnBinner.fit("x", x)
    assert b.kind == "numeric"
    assert b.n_bins == MAX_BINS
    bins = b.transform(x)
    assert bins.dtype == np.uint8
    assert bins.max() == b.n_bins - 1 < MISSING_BIN
    # Quantile bins: every bin holds about n / n_bins of the training values (distinct values: within one or two).
    counts = np.bincount(bins, minlength=b.n_bins)
    assert counts.min() >= np.floor(x.size / b.n_bins) - 1
    assert counts.max() <= np.ceil(x.size / b.n_bins) + 1


def test_few_distinct_values_get_one_bin_each_with_midpoint_edges():
    x = np.array([5.0, 1.0, 3.0, 3.0, 1.0, 5.0, 10.0])
    b = ColumnBinner.fit("x", x)
    np.testing.assert_array_equal(b.edges, [2.0, 4.0, 7.5])
    assert b.n_bins == 4
    np.testing.assert_array_equal(b.transform(x), [2, 0, 1, 1, 0, 2, 3])


def test_bins_are_ordered_and_follow_the_edges():
    rng = np.random.default_rng(1)
    x = rng.exponential(size=3000)
    b = ColumnBinner.fit("x", x)
    order = np.argsort(x)
    bins = b.transform(x)
    assert np.all(np.diff(bins[order].astype(int)) >= 0)
    # Bin k holds edges[k-1] < x <= edges[k]: a split "bin <= k" is the raw split "x <= threshold(k)".
    for k in range(b.n_bins - 1):
        np.testing.assert_array_equal(bins <= k, x <= b.threshold(k))
    assert b.threshold(b.n_bins - 1) == np.inf


def test_same_edges_map_new_values():
    rng = np.random.default_rng(2)
    train = rng.uniform(0, 100, size=2000)
    b = ColumnBinner.fit("x", train)
    new = np.concatenate([rng.uniform(-50, 150, size=500), b.edges[:10], train[:10]])
    bins = b.transform(new)
    np.testing.assert_array_equal(bins, np.searchsorted(b.edges, new, side="left"))
    # A value exactly on an edge belongs to the lower bin; values beyond the training range to the end bins.
    np.testing.assert_array_equal(b.transform(b.edges[:10]), np.arange(10))
    assert b.transform(np.array([-1e9]))[0] == 0
    assert b.transform(np.array([1e9]))[0] == b.n_bins - 1
    # The training values map to the bins they got at fit time.
    np.testing.assert_array_equal(b.transform(new[-10:]), b.transform(train[:10]))


def test_binning_does_not_depend_on_the_order_of_the_values():
    rng = np.random.default_rng(3)
    x = rng.normal(size=1500)
    a = ColumnBinner.fit("x", x)
    b = ColumnBinner.fit("x", rng.permutation(x))
    np.testing.assert_array_equal(a.edges, b.edges)


def test_nan_and_none_go_to_the_missing_bin():
    x = np.array([1.0, np.nan, 2.0, 3.0, np.nan])
    b = ColumnBinner.fit("x", x)
    assert b.n_bins == 3  # NaN is not a value
    np.testing.assert_array_equal(b.transform(x), [0, 255, 1, 2, 255])
    declared = ColumnBinner.fit("x", np.array([1.0, None, 2.0], dtype=object), kind="numeric")
    assert declared.kind == "numeric"
    np.testing.assert_array_equal(declared.transform(np.array([None, 2.0, 1.0], dtype=object)), [255, 1, 0])


def test_all_missing_column_has_one_value_bin():
    b = ColumnBinner.fit("x", np.full(10, np.nan))
    assert b.n_bins == 1
    np.testing.assert_array_equal(b.transform(np.array([np.nan, 0.0, 7.0])), [255, 0, 0])


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_infinite_values_raise(bad):
    x = np.array([1.0, 2.0, bad])
    with pytest.raises(ValueError, match=r"'speed'.*infinite"):
        ColumnBinner.fit("speed", x)
    b = ColumnBinner.fit("speed", np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"'speed'.*infinite"):
        b.transform(x)


def test_numeric_kind_rejects_strings_and_names_the_feature():
    with pytest.raises(TypeError, match=r"'colour'.*nominal"):
        ColumnBinner.fit("colour", np.array(["a", "b"]), kind="numeric")


def test_unknown_kind_and_bad_shape_raise():
    with pytest.raises(ValueError, match="kind must be"):
        ColumnBinner.fit("x", np.arange(3.0), kind="ordinal")
    with pytest.raises(ValueError, match=r"'x'.*1-D"):
        ColumnBinner.fit("x", np.zeros((3, 2)))
    b = ColumnBinner.fit("x", np.arange(3.0))
    with pytest.raises(ValueError, match=r"'x'.*1-D"):
        b.transform(np.zeros((3, 2)))


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        st.integers(1, 600),
        elements=st.one_of(st.floats(-1e6, 1e6, allow_subnormal=False), st.just(np.nan)),
    )
)
def test_bins_respect_thresholds_property(x):
    b = ColumnBinner.fit("x", x)
    bins = b.transform(x).astype(int)
    present = ~np.isnan(x)
    assert np.all(bins[~present] == MISSING_BIN)
    assert b.n_bins <= MAX_BINS
    assert np.all(bins[present] < b.n_bins)
    for v, k in zip(x[present], bins[present], strict=True):
        assert v <= b.threshold(k)
        if k > 0:
            assert v > b.threshold(k - 1)


# ----------------------------------------------------------------------------- nominal columns


def test_nominal_from_strings():
    x = np.array(["red", "blue", "red", "green", None], dtype=object)
    b = ColumnBinner.fit("colour", x)
    assert b.kind == "nominal" and b.is_nominal
    assert b.categories == ["blue", "green", "red"]
    assert b.n_bins == 3
    np.testing.assert_array_equal(b.transform(x), [2, 0, 2, 1, 255])
    # A numpy unicode array is nominal as well.
    u = ColumnBinner.fit("colour", np.array(["b", "a", "b"]))
    assert u.kind == "nominal" and u.categories == ["a", "b"]


def test_nominal_from_declared_kind_on_numbers():
    x = np.array([3.0, 1.0, 2.0, np.nan, 3.0])
    b = ColumnBinner.fit("code", x, kind="nominal")
    assert b.kind == "nominal"
    assert b.categories == [1, 2, 3]
    np.testing.assert_array_equal(b.transform(x), [2, 0, 1, 255, 2])
    # Integers and floats of the same value are the same category; a value that is no category is missing.
    np.testing.assert_array_equal(b.transform(np.array([2, 3, 1])), [1, 2, 0])
    np.testing.assert_array_equal(b.transform(np.array([2.5, 4.0, -1.0])), [255, 255, 255])


def test_booleans_are_nominal():
    b = ColumnBinner.fit("flag", np.array([True, False, True]))
    assert b.kind == "nominal"
    np.testing.assert_array_equal(b.transform(np.array([False, True])), [0, 1])


def test_unseen_category_goes_to_the_missing_bin():
    b = ColumnBinner.fit("colour", np.array(["red", "blue"], dtype=object))
    np.testing.assert_array_equal(b.transform(np.array(["green", "blue", "", None], dtype=object)), [255, 0, 255, 255])


@pytest.mark.parametrize("as_strings", [True, False])
def test_more_than_255_categories_fold_the_rarest_into_the_missing_bin(as_strings):
    n_frequent, n_rare = 250, 40
    frequent = np.repeat(np.arange(n_frequent), 3)  # each seen three times
    rare = np.arange(n_frequent, n_frequent + n_rare)  # each seen once
    codes = np.concatenate([frequent, rare])
    values = np.array([f"c{c:03d}" for c in codes], dtype=object) if as_strings else codes.astype(np.float64)
    b = ColumnBinner.fit("cat", values, kind="nominal")
    assert len(b.categories) == MAX_BINS == b.n_bins
    bins = b.transform(values)
    # All frequent categories keep a bin of their own ...
    freq_bins = bins[: frequent.size]
    assert np.all(freq_bins < MISSING_BIN)
    assert np.unique(freq_bins).size == n_frequent
    # ... the rest of the bins go to the most frequent of the rare ones (ties broken by value), the others fold.
    rare_bins = bins[frequent.size :]
    kept = MAX_BINS - n_frequent
    assert np.count_nonzero(rare_bins != MISSING_BIN) == kept
    assert np.unique(rare_bins[rare_bins != MISSING_BIN]).size == kept


def test_nominal_values_must_be_plain_scalars():
    with pytest.raises(TypeError, match="strings, numbers or booleans"):
        ColumnBinner.fit("bag", np.array([(1, 2), "a"], dtype=object), kind="nominal")
    # Unhashable values get the same clear message rather than Python's "unhashable type".
    with pytest.raises(TypeError, match="strings, numbers or booleans"):
        ColumnBinner.fit("bag", np.array([{"a": 1}, {"b": 2}], dtype=object))


# ----------------------------------------------------------------------------- JSON


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        (np.random.default_rng(4).normal(size=3000), None),
        (np.array([0.5, 1.5, np.nan, 1.5]), None),
        (np.array(["b", "a", None, "c"], dtype=object), None),
        (np.array([10, 20, 30, 10]), "nominal"),
        (np.array([0.25, 1.0, 0.25]), "nominal"),
        (np.array([True, False]), None),
        (np.full(4, np.nan), None),
    ],
)
def test_json_round_trip(values, kind):
    b = ColumnBinner.fit("f", values, kind)
    c = json_round_trip(b)
    assert (c.name, c.kind, c.n_bins, c.categories) == (b.name, b.kind, b.n_bins, b.categories)
    np.testing.assert_array_equal(c.edges, b.edges)
    np.testing.assert_array_equal(c.transform(values), b.transform(values))
    assert c.to_json() == b.to_json()


def test_bins_keep_their_least_and_greatest_training_values():
    # Few values: a bin is one value. Many: quantile bins, each value within its bin's edges; both survive JSON.
    few = ColumnBinner.fit("x", np.array([5.0, 1.0, 3.0, 3.0, np.nan, 10.0]))
    np.testing.assert_array_equal(few.lows, [1.0, 3.0, 5.0, 10.0])
    np.testing.assert_array_equal(few.highs, few.lows)
    x = np.random.default_rng(0).normal(size=5000)
    many = ColumnBinner.fit("x", x)
    bins = many.transform(x)
    for b in (0, 7, many.n_bins - 1):
        assert many.lows[b] == x[bins == b].min() and many.highs[b] == x[bins == b].max()
    back = ColumnBinner.from_json(many.to_json())
    np.testing.assert_array_equal(back.lows, many.lows)
    np.testing.assert_array_equal(back.highs, many.highs)


@pytest.mark.parametrize("k", [2, 3, 17, 128])
def test_gap_bins_give_each_value_a_bin_and_each_gap_its_midpoint_and_even_steps(k):
    x = np.sort(np.random.default_rng(k).choice(1000, size=k, replace=False)).astype(np.float64) / 7.0
    b = ColumnBinner.fit("x", np.concatenate([x, x[::-1], [np.nan]]), gaps=True)
    bins = b.transform(x)
    per_gap = (MAX_BINS - 1) // (k - 1) // 2 * 2
    assert b.n_bins == 1 + (k - 1) * per_gap <= MAX_BINS
    np.testing.assert_array_equal(bins, np.arange(k) * per_gap)
    np.testing.assert_array_equal(b.lows[bins], x)
    np.testing.assert_array_equal(b.highs[bins], x)
    mid = (x[:-1] + x[1:]) / 2
    np.testing.assert_array_equal(b.transform(mid), bins[:-1] + per_gap // 2)  # the midpoint closes a bin
    # A value just past a gap's midpoint is in another bin than one just before it.
    assert (b.transform(mid + 1e-9) > b.transform(mid - 1e-9)).all()


def test_gap_bins_stay_as_without_gaps_past_their_width_and_for_one_value():
    many = np.arange(129.0)
    np.testing.assert_array_equal(ColumnBinner.fit("x", many, gaps=True).edges, ColumnBinner.fit("x", many).edges)
    one = np.full(5, 3.0)
    assert ColumnBinner.fit("x", one, gaps=True).n_bins == 1
