"""Models for tests/declarations/test_model_config.py, one of each kind the model configuration tells apart."""

from __future__ import annotations

from typing import Any

import numpy as np

from oip_asgi import Model, TensorSpec


def add_sub(INPUT0: np.ndarray, INPUT1: np.ndarray) -> dict[str, np.ndarray]:
    return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}


def double_rows(X: np.ndarray) -> dict[str, np.ndarray]:
    return {"Y": X * 2, "ROWS": np.full(len(X), len(X), dtype=np.int32)}


def scores(X: np.ndarray) -> dict[str, np.ndarray]:
    return {"SCORES": X[:, :3], "TOTAL": X.sum(axis=1)}


def shifted(X: np.ndarray, SHIFT: np.ndarray | None = None) -> np.ndarray:
    return X if SHIFT is None else X + SHIFT


def upper(TEXT: np.ndarray) -> np.ndarray:
    return np.char.upper(TEXT.astype(bytes)).astype(object)


ROWS_FP32 = [TensorSpec("X", "FP32", [-1])]

models: dict[str, Any] = {
    "bare": lambda **inputs: inputs,
    "declared": Model(
        add_sub,
        inputs=[TensorSpec("INPUT0", "INT32", [-1, 16]), TensorSpec("INPUT1", "INT32", [-1, 16])],
        outputs=[TensorSpec("OUTPUT0", "INT32", [-1, 16]), TensorSpec("OUTPUT1", "INT32", [-1, 16])],
        platform="onnxruntime_onnx",
        properties={"task": "arithmetic", "author": "tests"},
        max_concurrency=3,
    ),
    "batching": Model(
        double_rows,
        inputs=[TensorSpec("X", "FP32", [-1, 4])],
        outputs=[TensorSpec("Y", "FP32", [-1, 4]), TensorSpec("ROWS", "INT32", [-1])],
        max_batch_size=8,
        max_batch_delay=0.0025,
    ),
    "labelled": Model(
        scores,
        inputs=[TensorSpec("X", "FP64", [-1, 4])],
        outputs=[TensorSpec("SCORES", "FP64", [-1, 3]), TensorSpec("TOTAL", "FP64", [-1])],
        labels={"SCORES": ["cat", "dog", "bird"]},
    ),
    "versioned": [
        Model(lambda X: X, inputs=ROWS_FP32, outputs=[TensorSpec("Y", "FP32", [-1])], version="1"),
        Model(
            lambda X: X,
            inputs=[TensorSpec("X", "FP64", [-1, 2])],
            outputs=[TensorSpec("Y", "FP64", [-1, 2])],
            version="10",
        ),
    ],
    "named_versions": [Model(abs, version="1"), Model(abs, version="canary")],
    "text": Model(upper, inputs=[TensorSpec("TEXT", "BYTES", [-1])], outputs=[TensorSpec("UPPER", "BYTES", [-1])]),
    "optional": Model(
        shifted,
        inputs=[TensorSpec("X", "FP32", [-1]), TensorSpec("SHIFT", "FP32", [-1], optional=True)],
        outputs=[TensorSpec("Y", "FP32", [-1])],
    ),
}
