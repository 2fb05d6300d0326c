"""Models for the hostile-client and restricted-API tests: one identity model over FP32 rows."""

from __future__ import annotations

import numpy as np

from oip_asgi import Model, TensorSpec


def _identity(X: np.ndarray) -> np.ndarray:
    return X


models = {
    "identity": Model(
        _identity,
        inputs=[TensorSpec("X", "FP32", [-1])],
        outputs=[TensorSpec("Y", "FP32", [-1])],
    )
}
