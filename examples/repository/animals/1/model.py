"""Version 1 of the repository's `animals`: scores for cat, dog and bird from 4 features, a batch at a time."""

from __future__ import annotations

import numpy as np

WEIGHTS = np.array([[2.0, -1.0, 0.5], [-1.0, 2.0, 0.5], [0.5, 0.5, -2.0], [0.1, 0.2, 3.0]], dtype=np.float32)


def model(FEATURES: np.ndarray) -> np.ndarray:
    return FEATURES.astype(np.float32) @ WEIGHTS
