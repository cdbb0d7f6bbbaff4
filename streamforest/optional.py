"""Optional dependencies: imported on use, with an error that names the extra which installs them."""

from __future__ import annotations

import importlib
from types import ModuleType

# top-level module -> (distribution on the package index, streamforest extra that pulls it)
EXTRAS = {
    "river": ("river", "river"),
    "matplotlib": ("matplotlib", "plot"),
    "kafka": ("kafka-python", "kafka"),
    "pyarrow": ("pyarrow", "parquet"),
}


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` (one of :data:`EXTRAS` or a submodule of one) for ``purpose``.

    A missing one raises :class:`ModuleNotFoundError` saying what needed it and the ``pip install`` line of its
    extra, instead of a bare "No module named ...".

    Examples
    --------
    >>> require("json", "reading JSON").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name not in (top, module) or top not in EXTRAS:
            raise  # something else is missing: not ours to explain
        dist, extra = EXTRAS[top]
        raise ModuleNotFoundError(f"{purpose} needs {dist}, which is not installed: "
                                  f"pip install 'streamforest[{extra}]'", name=exc.name) from None
