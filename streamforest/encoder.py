"""The encoder of a forest: hashed node-path encodings of its alive trees, and deltas between its model versions.

:mod:`streamforest.encoding` holds the numba routing into CSR rows; an :class:`Encoder` is what calls it for one
forest. It keeps what encoding needs between calls: the node table of the alive trees (rebuilt only when they or
the arguments change) and the generations removed in the last :data:`~streamforest.generations.DELTA_WINDOW`
model versions, so that an encoding made earlier can be patched (:meth:`Encoder.delta`) rather than recomputed.
The forest (:meth:`FeatureStreamForest.encode`, :meth:`FeatureStreamForest.encode_delta`), the engine and the
River encoder all encode through one.
"""

from __future__ import annotations

import copy
import weakref
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from streamforest import encoding
from streamforest.encoding import DEFAULT_N_COMPONENTS
from streamforest.generations import DELTA_WINDOW, AliveTrees, Generation, Graveyard, pack
from streamforest.inputs import is_int
from streamforest.threads import threads_for


class EncodeOptions(NamedTuple):
    """The arguments of an encoding (see :meth:`FeatureStreamForest.encode`): width of the hashed space (``None``:
    unhashed), ``"binary"`` or ``"weighted"`` values, leaves only, the missing-value mode, signed hashing.

    Examples
    --------
    >>> EncodeOptions(n_components=2**10, leaves_only=True).check().values
    'binary'
    >>> EncodeOptions(values="counts").check()
    Traceback (most recent call last):
    ...
    ValueError: values must be one of ('binary', 'weighted'), got 'counts'
    """

    n_components: int | None = DEFAULT_N_COMPONENTS
    values: str = "binary"
    leaves_only: bool = False
    missing: str = "default"
    signed: bool = False

    def check(self) -> EncodeOptions:
        """These options, or a ``ValueError`` naming the bad one."""
        encoding.check_arguments(self.n_components, self.values, self.missing)
        return self


#: The defaults of :meth:`FeatureStreamForest.encode`.
DEFAULT_OPTIONS = EncodeOptions()


class Encoder:
    """Hashed node-path encodings (Vens & Costa, 2011) of one forest's alive trees, and their deltas.

    A forest makes its own (:attr:`FeatureStreamForest.encoder`) and tells it when generations leave
    (:meth:`bury`), when the model version moves on (:meth:`forget_before`) and when every tree changed at once
    (:meth:`restart`).

    Examples
    --------
    >>> import numpy as np
    >>> from streamforest import FeatureStreamForest
    >>> x = np.linspace(-1, 1, 200)
    >>> f = FeatureStreamForest(trees_per_generation=3, max_depth=2, random_state=0)
    >>> _ = f.add_feature("x", x, y=(x > 0).astype(int))
    >>> leaves = EncodeOptions(n_components=2**10, leaves_only=True)
    >>> E, v = f.encoder.encode(x[:4, None], leaves), f.model_version_
    >>> E.shape, E.sum(axis=1).A.ravel().tolist()   # a leaf per tree
    ((4, 1024), [3.0, 3.0, 3.0, 3.0])
    >>> f.add_samples(x[:10, None], (x[:10] > 0).astype(int))   # every tree regrown: no delta reaches back
    >>> f.encoder.delta(x[:4, None], since=v, options=leaves)
    Traceback (most recent call last):
    ...
    ValueError: no delta from version 1: deltas reach back to version 2 (now 2); re-encode instead
    """

    def __init__(self, forest: Any) -> None:
        # The FeatureStreamForest it encodes for (typed loosely: the forest module imports this one), by a weak
        # reference: the forest holds its encoder, and a cycle would keep every replaced copy of a forest (the engine
        # copies it before each change) and the generations only it still holds until the cyclic collector ran.
        self._owner = weakref.ref(forest)
        self._graveyard = Graveyard()
        # Deltas reach no further back than this version (every tree changed then).
        self._floor = 0
        # Whether removed generations are kept for deltas (see without_deltas).
        self._deltas = True
        # The node table of the last encoding: (the packed alive trees, the arguments it depends on, the table).
        self._table: tuple[AliveTrees, tuple, encoding.NodeTable] | None = None

    @property
    def _forest(self) -> Any:
        return self._owner()

    def __deepcopy__(self, memo: dict) -> Encoder:
        """A copy for the forest's copy (which :func:`copy.deepcopy` of a forest has put in ``memo``)."""
        other = Encoder.__new__(Encoder)
        memo[id(self)] = other
        for name, value in self.__dict__.items():
            if name != "_owner":
                setattr(other, name, copy.deepcopy(value, memo))
        forest = self._owner()
        other._owner = weakref.ref(memo.get(id(forest), forest))
        return other

    def __getstate__(self) -> dict[str, Any]:
        """Its state with the forest itself (River pickles its estimators; a weak reference cannot be pickled)."""
        return {**self.__dict__, "_owner": self._owner()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        forest = state.pop("_owner")
        self.__dict__.update(state)
        self._owner = weakref.ref(forest)

    # ------------------------------------------------------------------ what the forest tells it

    def bury(self, gen: Generation, died: int) -> None:
        """Generation ``gen`` left the forest in model version ``died``."""
        if self._deltas:
            self._graveyard.bury(gen, died)

    def without_deltas(self) -> None:
        """The forest's owner never asks for deltas: removed generations are not kept for them.

        A delta needs the trees of every generation removed in the last :data:`DELTA_WINDOW` versions, so a forest
        that prunes and merges as features arrive would otherwise hold up to that many dead generations (the engine,
        which publishes whole encodings, never asks for one). :meth:`delta` then refuses.
        """
        self._deltas = False
        self._graveyard.clear()

    def forget_before(self, version: int) -> None:
        """The model version is now ``version``: forget the generations no delta can reach any more."""
        self._graveyard.forget_before(version)

    def restart(self, version: int) -> None:
        """Every tree changed in model version ``version``: encodings from before are re-encoded, not patched."""
        self._graveyard.clear()
        self._floor = version

    # ------------------------------------------------------------------ encodings

    def encode(self, X: Any, options: EncodeOptions = DEFAULT_OPTIONS, sample_ids: Any = None) -> sp.csr_matrix:
        """The encoding of samples ``X`` (as for :meth:`FeatureStreamForest.encode`) through every alive tree."""
        forest = self._forest
        trees, tree_w, seeds = packed = forest.alive_trees()
        Xb = forest.binned(X)
        n_components, values, leaves_only, missing, signed = options
        keys = encoding.sample_keys_from_ids(sample_ids, Xb.shape[1]) if sample_ids is not None else None
        options.check()
        # The node table is rebuilt only when the packed forest or the arguments change (a new tuple per change).
        arguments = (n_components, values, signed)
        cached = self._table
        if cached is None or cached[0] is not packed or cached[1] != arguments:
            cached = self._table = (packed, arguments, encoding.node_table(trees, seeds, tree_w, *arguments))
        with threads_for(Xb.shape[1], trees.n_trees):
            return encoding.encode_binned(trees, seeds, tree_w, Xb, n_components, values, leaves_only, missing,
                                          signed, keys, table=cached[2])

    def delta(self, X: Any, since: int, options: EncodeOptions = DEFAULT_OPTIONS,
              sample_ids: Any = None) -> sp.csr_matrix:
        """What to add to a binary encoding made at model version ``since`` to get the current one (see
        :meth:`FeatureStreamForest.encode_delta`); ``options.values`` is not read (a delta is binary)."""
        forest = self._forest
        forest._check_fitted()
        if not is_int(since):
            raise TypeError(f"since must be a model version (int), got {since!r}")
        if not self._deltas:
            raise ValueError("this forest keeps no removed generations (without_deltas): re-encode instead")
        now = forest.model_version_
        oldest = max(self._floor, now - DELTA_WINDOW)
        if not oldest <= since <= now:
            raise ValueError(
                f"no delta from version {since}: deltas reach back to version {oldest} (now {now}); re-encode instead"
            )
        n_components, _, leaves_only, missing, signed = options
        if n_components is None:
            raise ValueError("encode_delta needs hashed encodings (unhashed column ids change with the forest)")
        options._replace(values="binary").check()
        Xb = forest.binned(X)
        added = [g for g in forest._generations if g.born > since]
        removed = self._graveyard.removed_since(since)
        keys = encoding.sample_keys_from_ids(sample_ids, Xb.shape[1]) if sample_ids is not None else None
        out = sp.csr_matrix((Xb.shape[1], n_components), dtype=np.float32)
        for gens, sign in ((added, 1.0), (removed, -1.0)):
            if gens:
                trees, seeds = pack(gens)
                part = encoding.encode_binned(trees, seeds, np.ones(trees.n_trees), Xb, n_components, "binary",
                                              leaves_only, missing, signed, keys)
                out = out + sign * part
        out.eliminate_zeros()
        return out.tocsr()


class EncodingMixin:
    """The forest's :attr:`encoder` and its two methods under the forest's own names."""

    @property
    def encoder(self) -> Encoder:
        """The forest's :class:`Encoder` (the engine and the River encoder encode through it)."""
        return self._encoder

    def encode(
        self,
        X: Any,
        n_components: int | None = DEFAULT_N_COMPONENTS,
        values: str = "binary",
        leaves_only: bool = False,
        missing: str = "default",
        signed: bool = False,
        sample_ids: Any = None,
    ) -> sp.csr_matrix:
        """Hashed node-path encoding (Vens & Costa, 2011): a sparse row per sample, a column per hashed node.

        Parameters
        ----------
        X
            Samples: a 2-D array with the features in arrival order, or a mapping name -> column.
        n_components
            Width of the hashed space; ``None`` gives the exact (unhashed) encoding, one column per alive node.
        values
            ``"binary"``: 1 per visited node. ``"weighted"``: each tree's nodes carry the square root of the tree's
            weight, so the dot product of two encodings is the weighted forest's path kernel.
        leaves_only
            Only the leaves (the leaf-indicator encoding, like scikit-learn's ``RandomTreesEmbedding``).
        missing
            At a split on a missing value: ``"default"`` (the learned default side), ``"random"`` (one side drawn
            from the sample's id and the node, reproducibly) or ``"split"`` (both sides, mass 1/2 each).
        signed
            Signed hashing: each node's value gets a sign from its hash, so collisions cancel in expectation.
        sample_ids
            Ids keying ``missing="random"`` (default: the row number).

        Returns
        -------
        scipy.sparse.csr_matrix
            ``float32``, shape ``(n_samples, n_components)``, rows sorted with collisions summed.

        Examples
        --------
        >>> import numpy as np
        >>> from streamforest import FeatureStreamForest
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
        >>> f = FeatureStreamForest(trees_per_generation=4, max_depth=3, random_state=0)
        >>> _ = f.add_feature("a", X[:, 0], y=y)
        >>> E = f.encode(X[:3, :1], n_components=2**10)
        >>> E.shape, bool((E.sum(axis=1) >= 4).all())   # at least the root of each of the 4 trees
        ((3, 1024), True)
        """
        return self.encoder.encode(X, EncodeOptions(n_components, values, leaves_only, missing, signed), sample_ids)

    def encode_delta(self, X: Any, since: int, n_components: int | None = DEFAULT_N_COMPONENTS,
                     leaves_only: bool = False, missing: str = "default", signed: bool = False,
                     sample_ids: Any = None) -> sp.csr_matrix:
        """What to add to a binary encoding made at model version ``since`` to get the current one.

        Only the generations grown or removed since then change; the delta encodes the new generations' nodes with
        +1 and the removed generations' nodes with -1, so that ``encode(X)`` now equals
        ``encode(X) at since + encode_delta(X, since)`` (for the same arguments, ``values="binary"``). Versions
        older than the last ``DELTA_WINDOW`` changes, or from before :meth:`add_samples` regrew every tree, raise
        ``ValueError``: re-encode instead.

        Parameters
        ----------
        X
            The samples, as for :meth:`encode` (all features that have arrived by now).
        since
            A model version: the value of :attr:`model_version_` when the encoding you hold was made. The version
            grows by one with every change of the trees (add_feature, add_samples, set_samples, refresh, fit),
            and the engine stamps it on every published record as ``model_version``; a consumer keeps it beside its
            encodings and asks for the delta since then instead of re-encoding everything.
        n_components, leaves_only, missing, signed, sample_ids
            As for :meth:`encode` (the same values as the earlier encoding, or the sum is meaningless).

        Examples
        --------
        >>> import numpy as np
        >>> from streamforest import FeatureStreamForest
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(300, 2)); y = (X[:, 0] > 0).astype(int)
        >>> f = FeatureStreamForest(trees_per_generation=5, random_state=0)
        >>> _ = f.add_feature("a", X[:, 0], y=y)
        >>> before, v = f.encode(X[:10, :1]), f.model_version_
        >>> _ = f.add_feature("b", X[:, 1])
        >>> after = before + f.encode_delta(X[:10], since=v)
        >>> float(abs(after - f.encode(X[:10])).sum())
        0.0
        """
        return self.encoder.delta(X, since, EncodeOptions(n_components, "binary", leaves_only, missing, signed),
                                  sample_ids)
