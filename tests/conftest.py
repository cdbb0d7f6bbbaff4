"""Shared fixtures."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def clf_data() -> tuple[np.ndarray, np.ndarray]:
    """Binary task: features 0 and 2 are informative, 1 and 3 are noise."""
    rng = np.random.default_rng(2024)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + 0.5 * X[:, 2] + 0.3 * rng.normal(size=400) > 0).astype(np.int64)
    return X, y
