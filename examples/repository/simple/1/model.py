"""Version 1 of the repository's `simple`: the sum and the difference of two tensors (config.pbtxt declares them)."""

from __future__ import annotations

import numpy as np


def model(INPUT0: np.ndarray, INPUT1: np.ndarray) -> dict[str, np.ndarray]:
    return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}
