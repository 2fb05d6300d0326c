"""The app tests/rest/test_faults.py serves from a real uvicorn process: an echo and a large-output model."""

from __future__ import annotations

import numpy as np

from oip_asgi import Model, TensorSpec, oip_app


def fill(n: np.ndarray) -> np.ndarray:
    """`n` FP32 values 0, 1, 2, ... (mod 2**24, where float32 stays exact): a response of any size."""
    return (np.arange(int(n[0]), dtype=np.uint32) % (1 << 24)).astype(np.float32)


app = oip_app(
    {
        "echo": Model(lambda x: x, inputs=[TensorSpec("x", "FP32", [-1])], outputs=[TensorSpec("y", "FP32", [-1])]),
        "fill": Model(fill, inputs=[TensorSpec("n", "INT64", [1])], outputs=[TensorSpec("y", "FP32", [-1])]),
    }
)
