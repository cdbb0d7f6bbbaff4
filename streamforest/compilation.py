"""Whether the forest's numba kernels are compiled already, so that a first run can say why it is slow.

numba compiles a kernel on its first call and caches the machine code on disk (``cache=True``: in the package's
``__pycache__``, or ``NUMBA_CACHE_DIR``); the first use of the forest in a fresh install spends about a minute
there, later runs load it in well under a second.
"""

from __future__ import annotations

import importlib

# Kernels every run needs (training, out-of-bag scoring, encoding): if these are cached, the others are too.
_INDICATORS = (("streamforest.tree.grow", "grow_trees"), ("streamforest.tree.route", "_oob_votes"),
               ("streamforest.encoding", "_encode"))

COMPILE_NOTICE = ("first use: compiling the forest's numba kernels (about a minute, once; "
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
