"""A batch of fitted trees as flat arrays (scikit-learn's ``tree_`` layout, many trees end to end).

Node ``i`` of tree ``t`` lives at ``offsets[t] + i``; ``left``/``right`` are indices local to the tree (-1 at a
leaf). A numeric split sends bin ``b`` left when ``b <= threshold``; a nominal split when bit ``b`` of its category
words is set (row ``cat_row`` of ``cats``, which holds a row only for the nodes whose words are not all zero: 32
bytes a node where most nodes have none); the missing bin follows ``missing_left``. Everything is a plain numpy
array, so a batch is trivial to route in numba (the batch is one named tuple: kernels read ``trees.left[...]``), to
concatenate, to save without pickle and to hash.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from streamforest.binning import BIN_WORDS
from streamforest.threads import threads_for
from streamforest.tree.grow import GrownNodes, TrainingSet, TreePlans, TreeSettings, grow_trees

#: The depth bound of ``max_depth=None``: deeper than any tree the samples can fill.
UNBOUNDED_DEPTH = 10_000
#: The most bytes of node rows allocated at once while growing (see :func:`grow`).
GROW_BUFFER_BYTES = 128 * 2**20
#: Bytes of one node in the growing rows, besides its ``value`` (8 bytes per output).
_NODE_BYTES = 4 + 1 + 1 + 1 + 8 * BIN_WORDS + 4 + 4 + 8 + 8


@njit(cache=True)
def _parents_and_depths(offsets, left, right, parent, depth):
    # Children always come after their parent, so one pass in node order suffices.
    for t in range(offsets.shape[0] - 1):
        base = offsets[t]
        parent[base] = -1
        depth[base] = 0
        for i in range(offsets[t + 1] - base):
            if left[base + i] >= 0:
                for c in (left[base + i], right[base + i]):
                    parent[base + c] = i
                    depth[base + c] = depth[base + i] + 1


@njit(cache=True)
def _pack(grown, trees):
    """Each tree's row of ``grown`` (a :class:`GrownNodes`) up to its node count, rows end to end into ``trees``;
    the category words of the nodes that have any, in node order, into ``trees.cats`` (sized by
    :func:`_count_cats`)."""
    row = 0
    for t in range(grown.n_nodes.shape[0]):
        a = trees.offsets[t]
        b = trees.offsets[t + 1]
        k = b - a
        trees.feature[a:b] = grown.feature[t, :k]
        trees.threshold[a:b] = grown.threshold[t, :k]
        trees.missing_left[a:b] = grown.missing_left[t, :k]
        trees.nominal[a:b] = grown.nominal[t, :k]
        trees.left[a:b] = grown.left[t, :k]
        trees.right[a:b] = grown.right[t, :k]
        trees.value[a:b] = grown.value[t, :k]
        trees.gain[a:b] = grown.gain[t, :k]
        trees.weight[a:b] = grown.weight[t, :k]
        for i in range(k):
            trees.cat_row[a + i] = -1
            for w in range(grown.cats.shape[2]):
                if grown.cats[t, i, w] != 0:
                    trees.cats[row] = grown.cats[t, i]
                    trees.cat_row[a + i] = row
                    row += 1
                    break


@njit(cache=True)
def _count_cats(cats, n_nodes):
    """How many grown nodes have category words that are not all zero."""
    out = 0
    for t in range(n_nodes.shape[0]):
        for i in range(n_nodes[t]):
            for w in range(cats.shape[2]):
                if cats[t, i, w] != 0:
                    out += 1
                    break
    return out


#: The per-node arrays (``cats`` is per row of ``cat_row``, ``offsets`` per tree).
ARRAYS = ("feature", "threshold", "missing_left", "nominal", "cat_row", "left", "right", "value", "gain", "weight")
#: The largest in-bag weight a node's ``weight`` holds as float32 (integer draw counts, exact up to 2**24).
EXACT_FLOAT32 = 2**24


class Trees(NamedTuple):
    """Trees end to end as flat arrays; a named tuple, so numba kernels take the whole batch as one argument."""

    feature: np.ndarray  # int32 (N,), -1 at leaves
    threshold: np.ndarray  # uint8 (N,)
    missing_left: np.ndarray  # uint8 (N,)
    nominal: np.ndarray  # uint8 (N,)
    cat_row: np.ndarray  # int32 (N,): the node's row of ``cats``, -1 when its category words are all zero
    left: np.ndarray  # int32 (N,)
    right: np.ndarray  # int32 (N,)
    value: np.ndarray  # float64 (N, n_outputs): class shares or mean target
    gain: np.ndarray  # float64 (N,): weighted impurity decrease of the split
    weight: np.ndarray  # float32 (N,) (float64 beyond EXACT_FLOAT32): in-bag weight reaching the node, never routed
    cats: np.ndarray  # uint64 (R, BIN_WORDS): left categories of nominal splits, one row per node that has any
    offsets: np.ndarray  # int64 (T + 1,)

    @property
    def n_trees(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_nodes(self) -> int:
        return int(self.offsets[-1])

    def node_cats(self) -> np.ndarray:
        """Every node's category words, ``(N, BIN_WORDS)`` uint64 (zeros where it has no row of ``cats``)."""
        out = np.zeros((self.n_nodes, BIN_WORDS), dtype=np.uint64)
        has = self.cat_row >= 0
        out[has] = self.cats[self.cat_row[has]]
        return out

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The trees as saved: one row of category words and a float64 weight per node (the compact rows and
        weights are how they are kept in memory, not a format)."""
        out = {f"{prefix}{name}": getattr(self, name) for name in ARRAYS if name != "cat_row"}
        out[f"{prefix}cats"] = self.node_cats()
        out[f"{prefix}weight"] = self.weight.astype(np.float64)
        out[f"{prefix}offsets"] = self.offsets
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> Trees:
        """The trees of :meth:`to_arrays`."""
        per_node = {name: arrays[f"{prefix}{name}"] for name in ARRAYS if name != "cat_row"}
        full = np.asarray(arrays[f"{prefix}cats"], dtype=np.uint64).reshape(len(per_node["feature"]), BIN_WORDS)
        has = np.flatnonzero(full.any(axis=1))
        cat_row = np.full(full.shape[0], -1, dtype=np.int32)
        cat_row[has] = np.arange(has.size, dtype=np.int32)
        per_node["weight"] = compact_weight(np.asarray(per_node["weight"]))
        return cls(cat_row=cat_row, cats=np.ascontiguousarray(full[has]), offsets=arrays[f"{prefix}offsets"],
                   **per_node)

    def take(self, tree_indices: np.ndarray) -> Trees:
        """The listed trees, in that order, as a new batch (sharing this one's arrays for a run of consecutive
        trees: batches are never changed in place)."""
        tree_indices = np.asarray(tree_indices, dtype=np.int64)
        sizes = np.diff(self.offsets)[tree_indices]
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        if len(tree_indices) and np.array_equal(tree_indices, np.arange(tree_indices[0], tree_indices[-1] + 1)):
            # A run of consecutive trees (a merge takes the first trees of a generation, then concatenates them):
            # views of one slice per array (and the same rows of category words), which nothing changes in place.
            nodes = slice(int(self.offsets[tree_indices[0]]), int(self.offsets[tree_indices[-1] + 1]))
            return Trees(offsets=offsets, cats=self.cats, **{name: getattr(self, name)[nodes] for name in ARRAYS})
        nodes = np.concatenate(
            [np.arange(self.offsets[t], self.offsets[t + 1]) for t in tree_indices]
        ) if len(tree_indices) else np.zeros(0, dtype=np.int64)
        parts = {name: getattr(self, name)[nodes] for name in ARRAYS}
        rows = parts["cat_row"]
        has = rows >= 0
        cats = self.cats[rows[has]]
        parts["cat_row"] = np.where(has, np.cumsum(has) - 1, -1).astype(np.int32)
        return Trees(offsets=offsets, cats=cats, **parts)

    def importances(self, n_features: int) -> np.ndarray:
        """Per-tree impurity-decrease importances, each row normalised to sum 1: shape ``(T, n_features)``."""
        tree_of_node = np.repeat(np.arange(self.n_trees), np.diff(self.offsets))
        split = self.feature >= 0
        # bincount adds the gains in node order, as np.add.at would, an order of magnitude faster.
        cell = tree_of_node[split] * n_features + self.feature[split]
        out = np.bincount(cell, weights=self.gain[split], minlength=self.n_trees * n_features).astype(
            np.float64, copy=False).reshape(self.n_trees, n_features)  # (an integer array when nothing splits)
        sums = out.sum(axis=1, keepdims=True)
        np.divide(out, sums, out=out, where=sums > 0)
        return out

    def parents_and_depths(self) -> tuple[np.ndarray, np.ndarray]:
        """Every node's parent (local index, -1 at roots) and depth (root 0)."""
        parent = np.empty(self.n_nodes, dtype=np.int64)
        depth = np.empty(self.n_nodes, dtype=np.int64)
        _parents_and_depths(self.offsets, self.left, self.right, parent, depth)
        return parent, depth

    def depth_of_nodes(self) -> np.ndarray:
        """The depth of every node (root 0)."""
        return self.parents_and_depths()[1]


def concat(batches: list[Trees], consume: bool = False) -> Trees:
    """Trees of several batches as one batch (the alive forest, packed for routing).

    ``consume``: the batches are given up (the list is emptied), and each array of the result is made as the
    batches' arrays of that name go: a batch and its copy are then never both whole in memory (the chunks of a
    generation of 300 leaf-of-one trees on 70,000 rows and their concatenation: 2 x 90 MB otherwise).
    """
    if not batches:
        raise ValueError("no trees to concatenate")
    if len(batches) == 1:
        out = batches[0]
        if consume:
            batches.clear()
        return out
    sizes = np.concatenate([np.diff(b.offsets) for b in batches])
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    # Each batch's rows of category words after those of the batches before it (a batch may use some rows of a
    # shared ``cats``: only those it points to are taken).
    columns = [b._asdict() for b in batches]
    if consume:
        batches.clear()
    rows = [c.pop("cat_row") for c in columns]
    cat_row = np.concatenate(rows)
    has = cat_row >= 0
    if has.any():
        cats = np.concatenate([c.pop("cats")[r[r >= 0]] for c, r in zip(columns, rows, strict=True)])
        cat_row = np.where(has, np.cumsum(has) - 1, -1).astype(np.int32)
    else:  # no nominal split (every numeric stream): nothing to renumber
        cats = np.concatenate([c.pop("cats")[:0] for c in columns])
        cat_row = np.full(cat_row.shape, -1, dtype=np.int32)
    parts = {}
    for name in ARRAYS:
        if name != "cat_row":
            parts[name] = np.concatenate([c.pop(name) for c in columns])
    parts["weight"] = compact_weight(parts["weight"])
    return Trees(offsets=offsets, cat_row=cat_row, cats=cats, **parts)


def compact_weight(weight: np.ndarray) -> np.ndarray:
    """Node weights as float32 when that holds them exactly (integer draw counts below :data:`EXACT_FLOAT32`),
    else float64: nothing routes by them, and float32 takes 4 bytes of a node's 51."""
    if weight.dtype == np.float32:
        return weight
    small = weight.astype(np.float32)
    if weight.size and not (np.abs(weight).max() < EXACT_FLOAT32 and np.array_equal(small, weight)):
        return weight
    return small


def node_capacity(n_samples: int, max_depth: int, min_samples_leaf: float) -> int:
    """The most nodes a tree can have: bounded by depth and by how many leaves the samples can fill."""
    by_depth = 2 ** (min(max_depth, 40) + 1) - 1
    by_leaves = 2 * int(max(n_samples, 1) // max(min_samples_leaf, 1.0)) + 1
    return int(max(1, min(by_depth, by_leaves)))


def grow(
    training: TrainingSet,
    subspaces: list[np.ndarray],
    seeds: np.ndarray,
    settings: TreeSettings,
    *,
    min_samples_leaf: float | np.ndarray,
    split_features: int | np.ndarray = 0,
    oob_leaves: np.ndarray | None = None,
) -> Trees:
    """Grow one tree per subspace on the training samples (the first ``training.n_samples`` columns of its bins).

    ``training.n_classes == 0`` grows regression trees on ``y_reg``; otherwise classification trees on ``y_cls``.
    ``min_samples_leaf`` (one, or one per tree) is the least bootstrap-weighted samples of a leaf.
    ``split_features`` (one count, or one per tree) is how many of its subspace a tree draws at every split; 0 means
    all of them. ``oob_leaves``, an ``(n_trees, n_samples)`` int32 array, receives what
    :func:`~streamforest.tree.route.out_of_bag_leaves` would compute for the grown trees (each tree partitions
    the samples it left out along with its in-bag ones, down to their leaves).
    """
    n_trees = len(subspaces)
    n_samples = int(training.n_samples)
    n_classes = int(training.n_classes)
    max_depth = UNBOUNDED_DEPTH if settings.max_depth is None else int(settings.max_depth)
    width = max(1, max(len(s) for s in subspaces))
    sub = np.full((n_trees, width), -1, dtype=np.int64)
    sizes = np.zeros(n_trees, dtype=np.int64)
    for t, s in enumerate(subspaces):
        sub[t, : len(s)] = s
        sizes[t] = len(s)
    min_leaf = np.ascontiguousarray(np.broadcast_to(np.asarray(min_samples_leaf, dtype=np.float64), (n_trees,)))
    cap = node_capacity(n_samples, max_depth, float(min_leaf.min(initial=np.inf)))
    split_ks = np.ascontiguousarray(np.broadcast_to(np.asarray(split_features, dtype=np.int64), (n_trees,)))
    n_out = 1 if n_classes == 0 else n_classes
    # The same types in every call: numba compiles the growth kernels (most of a first run's compilation) once per
    # combination of argument types, and a strided target or a read-only plan array is a type of its own.
    training = training._replace(n_samples=n_samples, n_classes=n_classes, draws=int(training.draws),
                                 y_cls=np.ascontiguousarray(training.y_cls), y_reg=np.ascontiguousarray(training.y_reg))
    settings = TreeSettings(max_depth, float(settings.min_category_size), bool(settings.bootstrap),
                            int(settings.dense_from), bool(settings.midpoint))
    plans = TreePlans(sub, sizes, seeds.astype(np.uint64), split_ks, min_leaf)
    # Each tree writes into a row of ``cap`` nodes, the most it could have (131,071 at depth 16 on 100,000 samples:
    # 10 MB a tree); numpy backs such rows with huge pages, so a row is resident as soon as a tree starts it. Trees
    # are grown a chunk at a time within GROW_BUFFER_BYTES and packed to their real sizes: memory then follows the
    # trees grown, not the trees that could have been (each tree is grown from its own plan and seed: the same
    # trees, whatever the chunk).
    per_tree = cap * (_NODE_BYTES + 8 * n_out)
    chunk = max(1, min(n_trees, GROW_BUFFER_BYTES // per_tree))
    parts = []
    with threads_for(n_samples, n_trees):
        for a in range(0, n_trees, chunk):
            b = min(a + chunk, n_trees)
            part = TreePlans(*(np.array(x[a:b]) for x in plans))  # writable copies: read-only is another type
            oob = oob_leaves[a:b] if oob_leaves is not None else None
            parts.append(_grow_chunk(training, settings, part, cap, n_out, oob))
    return concat(parts, consume=True)


def _grow_chunk(training: TrainingSet, settings: TreeSettings, plans: TreePlans, cap: int, n_out: int,
                oob_leaves: np.ndarray | None) -> Trees:
    """The trees of ``plans`` grown into rows of ``cap`` nodes, packed end to end."""
    n_trees = plans.seeds.shape[0]
    # Uninitialised: the kernel writes every field of every node it creates, and only those are packed.
    out = GrownNodes(
        feature=np.empty((n_trees, cap), dtype=np.int32),
        threshold=np.empty((n_trees, cap), dtype=np.uint8),
        missing_left=np.empty((n_trees, cap), dtype=np.uint8),
        nominal=np.empty((n_trees, cap), dtype=np.uint8),
        cats=np.empty((n_trees, cap, BIN_WORDS), dtype=np.uint64),
        left=np.empty((n_trees, cap), dtype=np.int32),
        right=np.empty((n_trees, cap), dtype=np.int32),
        value=np.empty((n_trees, cap, n_out), dtype=np.float64),
        gain=np.empty((n_trees, cap), dtype=np.float64),
        weight=np.empty((n_trees, cap), dtype=np.float64),
        n_nodes=np.zeros(n_trees, dtype=np.int64),
        oob_leaf=oob_leaves if oob_leaves is not None else np.empty((0, 0), dtype=np.int32),
    )
    grow_trees(training, settings, plans, out)
    n_nodes = out.n_nodes
    offsets = np.zeros(n_trees + 1, dtype=np.int64)
    np.cumsum(n_nodes, out=offsets[1:])
    rows = {name: getattr(out, name) for name in ARRAYS if name != "cat_row"}
    packed = Trees(offsets=offsets, cat_row=np.empty(int(offsets[-1]), dtype=np.int32),
                   cats=np.empty((_count_cats(out.cats, n_nodes), BIN_WORDS), dtype=np.uint64),
                   **{name: np.empty((int(offsets[-1]), *a.shape[2:]), dtype=a.dtype) for name, a in rows.items()})
    _pack(out, packed)
    return packed._replace(weight=compact_weight(packed.weight))
