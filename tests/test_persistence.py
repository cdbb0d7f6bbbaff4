"""Saving and loading a forest: one .npz of plain arrays and JSON, no pickle, and the stream goes on."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from streamforest import FeatureStreamForest


def make_stream(n: int = 300, d: int = 7, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.uniform(size=X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 2]) + 0.5 * rng.normal(size=n) > 0).astype(np.int64)
    return X, y


def feed(f: FeatureStreamForest, X: np.ndarray, y, start: int, stop: int) -> list:
    return [f.add_feature(f"x{j}", X[:, j], y=y if f.n_features_in_ == 0 else None) for j in range(start, stop)]


def assert_same_forest(a: FeatureStreamForest, b: FeatureStreamForest, X: np.ndarray) -> None:
    assert list(a.feature_names_in_) == list(b.feature_names_in_)
    assert a.generations_ == b.generations_
    assert a.n_trees_ == b.n_trees_
    np.testing.assert_array_equal(a.feature_importances_, b.feature_importances_)
    if a.task == "classification":
        np.testing.assert_array_equal(a.classes_, b.classes_)
        assert a.classes_.dtype == b.classes_.dtype
        np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


KW = dict(trees_per_generation=6, max_depth=4, random_state=3)


def test_round_trip_gives_the_same_forest(tmp_path):
    X, y = make_stream()
    f = FeatureStreamForest(**KW)
    feed(f, X, y, 0, 5)
    path = tmp_path / "forest.npz"
    f.save(path)
    g = FeatureStreamForest.load(path)
    assert type(g) is FeatureStreamForest
    assert repr(g) == repr(f)
    assert g.n_samples_ == f.n_samples_
    assert_same_forest(f, g, X[:, :5])


def test_file_is_plain_arrays_without_pickle(tmp_path):
    X, y = make_stream()
    f = FeatureStreamForest(**KW)
    feed(f, X, y, 0, 3)
    path = tmp_path / "forest.npz"
    f.save(path)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}  # reading every array works without pickle
    assert all(a.dtype != object for a in arrays.values())
    header = json.loads(bytes(arrays["__header__"]).decode("utf-8"))
    assert header["format"] == "streamforest.forest"
    assert [b["name"] for b in header["features"]] == ["x0", "x1", "x2"]
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left no temporary file


@pytest.mark.parametrize("n_saved", [1, 4])
def test_continuing_after_load_equals_never_saving(tmp_path, n_saved):
    X, y = make_stream()
    kw = {**KW, "max_generations": 3}  # merging happens on both paths
    a = FeatureStreamForest(**kw)
    feed(a, X, y, 0, n_saved)
    path = tmp_path / "forest.npz"
    a.save(path)
    b = FeatureStreamForest.load(path)
    ra = feed(a, X, y, n_saved, 7)
    rb = feed(b, X, y, n_saved, 7)
    for x, z in zip(ra, rb, strict=True):
        dx, dz = x.to_dict(), z.to_dict()
        dx.pop("seconds")
        dz.pop("seconds")
        assert dx == dz
    assert_same_forest(a, b, X)
    # More samples after a load, too.
    a.add_samples(X[:20], y[:20])
    b.add_samples(X[:20], y[:20])
    assert_same_forest(a, b, X)


def test_unseeded_forest_continues_identically_after_load(tmp_path):
    X, y = make_stream()
    a = FeatureStreamForest(trees_per_generation=5, max_depth=3)  # random_state=None: a fresh random seed
    feed(a, X, y, 0, 2)
    a.save(tmp_path / "f.npz")
    b = FeatureStreamForest.load(tmp_path / "f.npz")
    feed(a, X, y, 2, 4)
    feed(b, X, y, 2, 4)
    assert_same_forest(a, b, X[:, :4])


def test_round_trip_of_an_empty_forest(tmp_path):
    X, y = make_stream()
    a = FeatureStreamForest(**KW)
    a.save(tmp_path / "e.npz")
    b = FeatureStreamForest.load(tmp_path / "e.npz")
    assert b.n_features_in_ == 0 and b.n_trees_ == 0
    feed(a, X, y, 0, 2)
    feed(b, X, y, 0, 2)
    assert_same_forest(a, b, X[:, :2])


def test_round_trip_regression_and_nominal_features(tmp_path):
    rng = np.random.default_rng(1)
    n = 250
    colour = rng.choice(["red", "green", "blue", None], n).astype(object)
    code = rng.integers(0, 5, n).astype(np.float64)
    x = rng.normal(size=n)
    y = x + (colour == "red") * 2.0 + 0.1 * rng.normal(size=n)
    a = FeatureStreamForest(trees_per_generation=5, max_depth=4, task="regression", random_state=0)
    a.add_feature("colour", colour, y=y)
    a.add_feature("code", code, kind="nominal")
    a.save(tmp_path / "r.npz")
    b = FeatureStreamForest.load(tmp_path / "r.npz")
    data = {"colour": colour, "code": code}
    np.testing.assert_array_equal(a.predict(data), b.predict(data))
    assert b.state().binners[1].kind == "nominal"
    ra, rb = a.add_feature("x", x), b.add_feature("x", x)
    assert ra.oob_after == rb.oob_after
    data["x"] = x
    np.testing.assert_array_equal(a.predict(data), b.predict(data))


def test_round_trip_string_labels(tmp_path):
    X, y = make_stream()
    labels = np.where(y == 1, "spam", "ham")
    a = FeatureStreamForest(**KW)
    feed(a, X, labels, 0, 3)
    a.save(tmp_path / "s.npz")
    b = FeatureStreamForest.load(tmp_path / "s.npz")
    assert_same_forest(a, b, X[:, :3])
    b.add_samples(X[:3, :3], np.array(["ham", "spam", "ham"]))


def test_round_trip_offline_fit(tmp_path):
    X, y = make_stream()
    a = FeatureStreamForest(**KW).fit(X, y)
    a.save(tmp_path / "o.npz")
    b = FeatureStreamForest.load(tmp_path / "o.npz")
    assert_same_forest(a, b, X)


def test_numpy_scalar_parameters_can_be_saved(tmp_path):
    # Parameters often come out of numpy arrays (grids, configs); the constructor accepts numpy integers.
    X, y = make_stream()
    a = FeatureStreamForest(trees_per_generation=np.int64(4), max_depth=np.int64(3), random_state=np.int64(5))
    feed(a, X, y, 0, 2)
    a.save(tmp_path / "n.npz")
    b = FeatureStreamForest.load(tmp_path / "n.npz")
    assert_same_forest(a, b, X[:, :2])


def test_loading_something_else_fails_clearly(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, a=np.arange(3))
    with pytest.raises(ValueError, match="no streamforest header"):
        FeatureStreamForest.load(path)
    header = np.frombuffer(json.dumps({"format": "something", "version": 1}).encode(), dtype=np.uint8)
    np.savez(path, __header__=header)
    with pytest.raises(ValueError, match="not a streamforest forest"):
        FeatureStreamForest.load(path)


def test_a_deep_copy_is_independent_of_its_original(tmp_path):
    """A copy shares its trees (they never change in place) but nothing it does reaches the original: more
    features, merging the oldest generations, more samples (regrows every generation), other samples (the engine
    copies a forest before every change)."""
    X, y = make_stream(n=320, d=9)
    original = FeatureStreamForest(**{**KW, "max_generations": 7, "prune_threshold": 0.0})
    feed(original, X[:240], y[:240], 0, 5)
    original.save(tmp_path / "before.npz")
    copy_ = copy.deepcopy(original)
    feed(copy_, X[:240], y[:240], 5, 9)  # past the budget of 7: the two oldest are merged twice
    copy_.add_samples(X[240:280, :9], y[240:280])
    copy_.set_samples(X[280:, :9], y[280:])
    copy_.refresh()
    assert copy_.n_features_in_ == 9 and original.n_features_in_ == 5
    original.save(tmp_path / "after.npz")
    assert (tmp_path / "before.npz").read_bytes() == (tmp_path / "after.npz").read_bytes()
    assert_same_forest(original, FeatureStreamForest.load(tmp_path / "before.npz"), X[:, :5])


def test_a_file_saved_before_midpoint_thresholds_goes_on_with_thresholds_at_bin_edges(tmp_path):
    # Its header has neither the parameter nor the bins' values: the forest keeps the rule its trees grew with.
    X, y = make_stream()
    old = FeatureStreamForest(**KW, split_threshold="edge")
    feed(old, X, y, 0, 2)
    path = tmp_path / "old.npz"
    old.save(path)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays["__header__"]).decode("utf-8"))
    del header["params"]["split_threshold"]
    for b in header["features"]:
        del b["lows"], b["highs"]
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(path, **arrays)
    loaded = FeatureStreamForest.load(path)
    assert loaded.split_threshold == "edge"
    for f in (old, loaded):
        feed(f, X, y, 2, 4)
    assert_same_forest(old, loaded, X[:, :4])
