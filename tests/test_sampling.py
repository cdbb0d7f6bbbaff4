"""Which features a tree may use: subspace sizes, challenger and uniform masks, importance-weighted inclusion."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamforest import sampling


def test_subspace_size():
    assert sampling.subspace_size(9, 2 / 3, None) == pytest.approx(6.0)
    assert sampling.subspace_size(9, 4, None) == 4.0
    assert sampling.subspace_size(3, 4, None) == 3.0  # a count larger than the features: all of them
    assert sampling.subspace_size(300, 2 / 3, 64) == 64.0
    assert sampling.subspace_size(1, 0.1, None) == 1.0  # at least one feature
    assert not sampling.is_capped(90, 2 / 3, 64)
    assert sampling.is_capped(100, 2 / 3, 64)
    assert not sampling.is_capped(10_000, 2 / 3, None)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(0.0, 100.0, allow_subnormal=False), min_size=1, max_size=40),
    st.floats(0.0, 50.0),
)
def test_fill_probabilities_properties(scores, budget):
    scores = np.array(scores)
    p = sampling.fill_probabilities(scores, budget)
    assert p.shape == scores.shape
    assert np.all(p >= 0) and np.all(p <= 1)
    assert p.sum() == pytest.approx(min(budget, scores.size), rel=1e-9, abs=1e-9)
    # More useful features are never less likely to be drawn.
    order = np.argsort(scores, kind="stable")
    assert np.all(np.diff(p[order]) >= -1e-12)


def test_fill_probabilities_is_proportional_below_one():
    p = sampling.fill_probabilities(np.array([8.0, 1.0, 1.0, 2.0]), 2.0)
    assert p[0] == 1.0
    np.testing.assert_allclose(p[1:], [0.25, 0.25, 0.5])


def test_challenger_masks_force_the_new_feature_and_keep_the_expected_size():
    rng = np.random.default_rng(0)
    d, k, T = 20, 8.0, 4000
    p_old = sampling.old_feature_probabilities(d, k, None)
    np.testing.assert_allclose(p_old, (k - 1) / (d - 1))
    masks = sampling.challenger(rng, T, p_old)
    assert masks.shape == (T, d) and masks.dtype == bool
    assert masks[:, -1].all()
    # Expected subspace size is k; the standard error of the mean size over T trees is below 0.05.
    assert masks.sum(axis=1).mean() == pytest.approx(k, abs=0.2)


def test_importance_sampling_favours_useful_features_but_keeps_every_one_possible():
    imp = np.array([0.7, 0.0, 0.3, 0.0, 0.0, 0.0])  # the newest (last) feature's importance is not used
    p = sampling.old_feature_probabilities(6, 3.0, imp)
    assert p.sum() == pytest.approx(2.0)
    assert p[0] > p[2] > p[1]
    assert np.all(p > 0)  # the exploration floor
    np.testing.assert_allclose(p[[1, 3, 4]], p[1])


def test_uniform_masks_never_leave_a_tree_empty():
    rng = np.random.default_rng(1)
    masks = sampling.uniform(rng, 500, 3, 0.1)
    assert masks.any(axis=1).all()
    subspaces = sampling.masks_to_subspaces(masks)
    assert all(s.dtype == np.int64 and s.size >= 1 for s in subspaces)
    np.testing.assert_array_equal(subspaces[0], np.flatnonzero(masks[0]))
