"""chatty: the prompt back, once (a model that answers once: a streamed request gets it as one chunk)."""

from __future__ import annotations

import numpy as np


def model(
    text_input: np.ndarray, stream: np.ndarray | None = None, sampling_parameters: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    return {"text_output": text_input.reshape(-1)}
