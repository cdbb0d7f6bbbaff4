"""Test helpers: binning raw columns, growing single trees directly (no forest around them), synthetic data."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamforest.binning import ColumnBinner
from streamforest.tree import route
from streamforest.tree.grow import TrainingSet, TreeSettings
from streamforest.tree.model import Trees, grow


@dataclass
class Binned:
    """Raw columns binned the way the forest bins them: feature-major ``uint8``."""

    binners: list[ColumnBinner]
    Xb: np.ndarray  # (d, n), C-contiguous
    is_nominal: np.ndarray

    def transform(self, columns: list[np.ndarray]) -> np.ndarray:
        return np.ascontiguousarray(np.stack([b.transform(c) for b, c in zip(self.binners, columns, strict=True)]))


def bin_columns(columns: list[np.ndarray], kinds: list[str | None] | None = None) -> Binned:
    kinds = kinds or [None] * len(columns)
    binners = [ColumnBinner.fit(f"x{j}", c, k) for j, (c, k) in enumerate(zip(columns, kinds, strict=True))]
    Xb = np.ascontiguousarray(np.stack([b.transform(c) for b, c in zip(binners, columns, strict=True)]))
    return Binned(
        binners=binners,
        Xb=Xb,
        is_nominal=np.array([b.is_nominal for b in binners], dtype=np.bool_),
    )


def grow_tree(
    data: Binned,
    y: np.ndarray,
    *,
    regression: bool = False,
    max_depth: int = 10_000,
    min_samples_leaf: float = 1,
    bootstrap: bool = False,
    seeds: tuple[int, ...] = (12345,),
    subspace: np.ndarray | None = None,
) -> Trees:
    """Grow ``len(seeds)`` trees on all (or the given) features with :func:`streamforest.tree.model.grow`."""
    d, n = data.Xb.shape
    if regression:
        y_cls = np.zeros(n, dtype=np.int32)
        y_reg = np.asarray(y, dtype=np.float64)
        n_classes = 0
    else:
        y_cls = np.asarray(y, dtype=np.int32)
        y_reg = np.zeros(n, dtype=np.float64)
        n_classes = int(y_cls.max()) + 1
    sub = np.arange(d, dtype=np.int64) if subspace is None else np.asarray(subspace, dtype=np.int64)
    return grow(TrainingSet(data.Xb, n, y_cls, y_reg, n_classes, data.is_nominal), [sub] * len(seeds),
                np.array(seeds, dtype=np.uint64), TreeSettings(max_depth, 0.0, bootstrap=bootstrap),
                min_samples_leaf=min_samples_leaf)


def tree_values(trees: Trees, Xb: np.ndarray) -> np.ndarray:
    """Leaf values of the first tree for every sample (class shares or mean target)."""
    n = Xb.shape[1]
    leaf = route.leaves(trees, np.ascontiguousarray(Xb), n)[:, 0]
    return trees.value[trees.offsets[0] + leaf]


def grid_values(rng: np.random.Generator, n: int, levels: int, gap: tuple[float, float] | None = None) -> np.ndarray:
    """``n`` draws from ``levels`` evenly spaced values in [0, 1], none of them inside ``gap``."""
    g = np.round(np.linspace(0.0, 1.0, levels), 6)
    if gap is not None:
        g = g[(g < gap[0]) | (g > gap[1])]
    return rng.choice(g, n)


# ----------------------------------------------------------------------------- forests on mixed columns, paths


def mixed_stream(n: int = 160, seed: int = 0, missing: float = 0.1) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Three numeric columns and one nominal column (strings), each with a share of missing values; binary y."""
    rng = np.random.default_rng(seed)
    x0, x1, x2 = rng.normal(size=(3, n))
    cat = rng.choice(np.array(list("abcde"), dtype=object), n)
    y = (x0 + 0.8 * np.isin(cat, ["a", "b"]) - 0.5 * x2 + 0.3 * rng.normal(size=n) > 0.2).astype(np.int64)
    for col in (x0, x1, x2):
        col[rng.uniform(size=n) < missing] = np.nan
    cat[rng.uniform(size=n) < missing] = None
    return {"x0": x0, "x1": x1, "x2": x2, "cat": cat}, y


def take_rows(columns: dict[str, np.ndarray], rows: object) -> dict[str, np.ndarray]:
    return {k: np.asarray(v)[rows] for k, v in columns.items()}


def feed_columns(forest: object, columns: dict[str, np.ndarray], y: np.ndarray) -> list:
    """Add every column as a feature, y with the first."""
    return [forest.add_feature(k, v, y=y if j == 0 else None) for j, (k, v) in enumerate(columns.items())]


def stream_in(forest: object, X: np.ndarray, y: np.ndarray) -> object:
    """Add the columns of ``X`` as features ``x0, x1, ...``, y with the first; returns the forest."""
    for j in range(X.shape[1]):
        forest.add_feature(f"x{j}", X[:, j], y=y if j == 0 else None)
    return forest


def bin_for(forest: object, columns: dict[str, np.ndarray]) -> np.ndarray:
    """Columns binned by the forest's own binners: ``(n_features, m)`` uint8."""
    return np.ascontiguousarray(
        np.stack([b.transform(np.asarray(columns[b.name])) for b in forest.state().binners]).astype(np.uint8)
    )


def tree_path(trees: Trees, t: int, xb: np.ndarray, mode: str = "default") -> dict[int, float]:
    """Pure-Python walk of tree ``t`` for one binned sample: visited local node -> mass.

    ``mode`` is ``"default"`` (missing follows ``missing_left``) or ``"split"`` (both sides, half the mass each).
    """
    base = int(trees.offsets[t])
    out: dict[int, float] = {}
    stack = [(0, 1.0)]
    while stack:
        node, mass = stack.pop()
        out[node] = out.get(node, 0.0) + mass
        g = base + node
        left, right = int(trees.left[g]), int(trees.right[g])
        if left < 0:
            continue
        b = int(xb[int(trees.feature[g])])
        if b == 255:
            if mode == "split":
                stack += [(left, mass / 2), (right, mass / 2)]
                continue
            go_left = bool(trees.missing_left[g])
        elif trees.nominal[g]:
            go_left = (int(trees.node_cats()[g, b >> 6]) >> (b & 63)) & 1 == 1
        else:
            go_left = b <= int(trees.threshold[g])
        stack.append((left if go_left else right, mass))
    return out


def path_list(trees: Trees, t: int, xb: np.ndarray) -> list[int]:
    """The nodes from the root to the leaf of tree ``t`` (default side for missing values), in order."""
    return list(tree_path(trees, t, xb))  # a single chain, visited (and so inserted) root first
