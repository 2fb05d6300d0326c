"""Models for the gRPC end-to-end tests that the example lacks: failures, versions, parameters, metadata."""

from __future__ import annotations

from typing import Any

import numpy as np

from oip_asgi import Model, ModelNotReady, Result, TensorSpec


def fails(X: np.ndarray) -> np.ndarray:
    raise ValueError("no luck")


def busy(X: np.ndarray) -> np.ndarray:
    raise ModelNotReady("warming up")


def broken_load() -> None:
    raise RuntimeError("weights missing")


def echo_parameters(X: np.ndarray, parameters: dict[str, Any]) -> Result:
    return Result({"Y": X}, parameters=dict(parameters))


models: dict[str, Any] = {
    "fails": fails,
    "busy": busy,
    "broken": Model(lambda X: X, load=broken_load),
    "versioned": [Model(lambda X: X + 1, version="1"), Model(lambda X: X + 2, version="2")],
    "parameters": Model(
        echo_parameters, inputs=[TensorSpec("X", "FP32", [-1])], outputs=[TensorSpec("Y", "FP32", [-1])]
    ),
    "described": Model(
        lambda X: X,
        inputs=[TensorSpec("X", "FP32", [-1, 3])],
        outputs=[TensorSpec("X", "FP32", [-1, 3])],
        properties={"task": "classification"},
        labels=["cat", "dog", "bird"],
    ),
}
