"""The app tests/core/test_statistics.py serves from a real uvicorn process: a model of each kind of outcome."""

from __future__ import annotations

import numpy as np
from starlette.applications import Starlette

from oip_asgi import BadRequest, Model, TensorSpec, mount

ROWS = [TensorSpec("x", "FP32", [-1])]
OUT = [TensorSpec("y", "FP32", [-1])]


def refuses(x: np.ndarray) -> np.ndarray:
    raise BadRequest("no thanks")


def raises(x: np.ndarray) -> np.ndarray:
    raise ValueError("broken")


def wrong_output(x: np.ndarray) -> np.ndarray:
    return np.array(["not a number"])


app = Starlette()
mount(
    app,
    {
        "ok": Model(lambda x: x, inputs=ROWS, outputs=OUT),
        "refuses": Model(refuses, inputs=ROWS, outputs=OUT),
        "raises": Model(raises, inputs=ROWS, outputs=OUT),
        "wrong_output": Model(wrong_output, inputs=ROWS, outputs=OUT),
        "batched": [
            Model(lambda x: x * 2, inputs=ROWS, outputs=OUT, max_batch_size=8, max_batch_delay=0.5, version="1"),
            Model(lambda x: x, inputs=ROWS, outputs=OUT, version="2"),
        ],
    },
)
