"""What every benchmark records about the machine it ran on, so that its numbers can be read in context."""

from __future__ import annotations

import os
import platform
from typing import Any

import numba
import numpy as np

import streamforest


def environment(versions: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """Python, machine, cores, numba's threads and layer, the load at the time, and library versions."""
    try:
        layer = str(numba.threading_layer())
    except ValueError:
        layer = "not yet chosen"
    return {
        "python": platform.python_version(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
        "numba_threads": numba.get_num_threads(), "numba_threading_layer": layer,
        "load_average": list(os.getloadavg()), **extra,
        "versions": {"streamforest": streamforest.__version__, "numpy": np.__version__, "numba": numba.__version__,
                     **(versions or {})},
    }
