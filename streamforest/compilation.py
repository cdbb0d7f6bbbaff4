"""Whether the forest's numba kernels are compiled already, so that a first run can say why it is slow.

numba compiles a kernel on its first call and caches the machine code on disk (``cache=True``: in the package's
``__pycache__``, or ``NUMBA_CACHE_DIR``); the first use of the forest in a fresh install spends one to two minutes
there, later runs load it in well under a second. numba checks a cached kernel against its own file only, so the cache
beside the sources is dropped whenever any numba source changed (:func:`forget_stale_kernels`, at import).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from collections.abc import Iterable
from pathlib import Path

# Kernels every run needs (training, out-of-bag scoring, encoding): if these are cached, the others are too.
_INDICATORS = (("streamforest.tree.grow", "grow_trees"), ("streamforest.tree.route", "_oob_votes"),
               ("streamforest.encoding", "_encode"))

COMPILE_NOTICE = ("first use: compiling the forest's numba kernels (a minute or two, once; "
                  "later runs load them from the on-disk cache)")


def kernels_compiled() -> bool | None:
    """True if the kernels' on-disk cache holds code for the current sources, False if the first use will compile
    them, None if it cannot tell (numba changed its cache layout, or caching is off)."""
    try:
        for module, name in _INDICATORS:
            cache_file = getattr(importlib.import_module(module), name)._cache._cache_file
            if not cache_file._load_index():  # empty when absent or made from other sources
                return False
        return True
    except (AttributeError, OSError):
        return None


_STAMP = "kernels.sha256"


def _kernel_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        text = path.read_bytes()
        if b"numba" in text:
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(text)
    return digest.hexdigest()


def _package_roots() -> list[Path]:
    roots = [Path(__file__).parent]
    # the connectors are installed as a subpackage kept in a directory of their own; found without importing them
    spec = importlib.util.find_spec("streamforest.connectors")
    if spec is not None and spec.submodule_search_locations:
        roots += [Path(p) for p in spec.submodule_search_locations]
    return roots


def forget_stale_kernels(roots: Iterable[Path] | None = None) -> bool:
    """Remove the kernels' cache next to the sources when a numba source changed since it was written.

    numba checks a cached kernel against the file that defines it only: a kernel that inlines a function of
    another module (the tree growth inlines ``tree/split.py``) keeps running the old code after that module
    changes, as after checking out another branch of an editable install. Here the digest of every source of
    ``roots`` that uses numba decides. Only the ``__pycache__`` folders beside the sources are looked at (where an
    editable install keeps the cache); an install from a wheel rewrites every file, which numba's own check sees.

    Parameters
    ----------
    roots
        Package folders (default: streamforest's and its connectors').

    Returns
    -------
    bool
        Whether a cache was removed.
    """
    removed = False
    for root in _package_roots() if roots is None else roots:
        stamp = root / "__pycache__" / _STAMP
        try:
            digest = _kernel_digest(root)
            if stamp.exists() and stamp.read_text() == digest:
                continue
            for cached in [*root.rglob("__pycache__/*.nbi"), *root.rglob("__pycache__/*.nbc")]:
                cached.unlink(missing_ok=True)
                removed = True
            stamp.parent.mkdir(exist_ok=True)
            partial = stamp.with_name(f"{_STAMP}.{os.getpid()}")
            partial.write_text(digest)
            os.replace(partial, stamp)  # processes starting together each write a whole stamp
        except OSError:  # a read-only install: numba then keeps its cache elsewhere, checked by numba alone
            continue
    return removed
