"""The example models: Triton's classic `simple` and `simple_string`, an identity per datatype, a text model, a
classifier."""

from __future__ import annotations

import numpy as np

from oip_asgi import BadRequest, Model, TensorSpec

DATATYPES = [
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
]


def add_sub(INPUT0: np.ndarray, INPUT1: np.ndarray) -> dict[str, np.ndarray]:
    return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}


def add_sub_text(INPUT0: np.ndarray, INPUT1: np.ndarray) -> dict[str, np.ndarray]:
    """`simple` on integers written as text, as Triton's `simple_string` example model: the answers as text too."""
    try:
        left, right = (np.vectorize(int, otypes=[np.int64])(tensor) for tensor in (INPUT0, INPUT1))
    except ValueError as exc:
        raise BadRequest(f"simple_string adds integers written as text: {exc}") from None
    return {"OUTPUT0": (left + right).astype(np.bytes_), "OUTPUT1": (left - right).astype(np.bytes_)}


def identity(INPUT0: np.ndarray) -> np.ndarray:
    return INPUT0


def text_stats(TEXT: np.ndarray) -> dict[str, np.ndarray]:
    """Upper-cases each string and counts its UTF-8 bytes."""
    return {
        "UPPER": np.vectorize(lambda item: item.upper(), otypes=[object])(TEXT),
        "LENGTH": np.vectorize(len, otypes=[np.int64])(TEXT),
    }


def square_root(X: np.ndarray) -> np.ndarray:
    """Refuses negative input: the client gets a 400 with this message, not a model failure."""
    if (X < 0).any():
        raise BadRequest(f"sqrt takes non-negative X; X[{int(np.argmax(X < 0))}] is negative")
    return np.sqrt(X)


def double_rows(X: np.ndarray) -> dict[str, np.ndarray]:
    """Batched: one call serves many requests' rows; BATCH_ROWS tells how many rows that call held."""
    return {"Y": X * 2, "BATCH_ROWS": np.full(len(X), len(X), dtype=np.int32)}


ANIMALS = ["cat", "dog", "bird"]


def animal_scores(FEATURES: np.ndarray) -> np.ndarray:
    """A fixed linear 'classifier' over 4 features: scores for cat, dog and bird."""
    weights = np.array([[2.0, -1.0, 0.5], [-1.0, 2.0, 0.5], [0.5, 0.5, -2.0], [0.1, 0.2, 3.0]], dtype=np.float32)
    return FEATURES.astype(np.float32) @ weights


models: dict[str, object] = {
    "simple": Model(
        add_sub,
        inputs=[TensorSpec("INPUT0", "INT32", [-1, 16]), TensorSpec("INPUT1", "INT32", [-1, 16])],
        outputs=[TensorSpec("OUTPUT0", "INT32", [-1, 16]), TensorSpec("OUTPUT1", "INT32", [-1, 16])],
    ),
    "simple_string": Model(
        add_sub_text,
        inputs=[TensorSpec("INPUT0", "BYTES", [-1, 16]), TensorSpec("INPUT1", "BYTES", [-1, 16])],
        outputs=[TensorSpec("OUTPUT0", "BYTES", [-1, 16]), TensorSpec("OUTPUT1", "BYTES", [-1, 16])],
    ),
    "echo": lambda **inputs: inputs,
    "text": Model(
        text_stats,
        inputs=[TensorSpec("TEXT", "BYTES", [-1])],
        outputs=[TensorSpec("UPPER", "BYTES", [-1]), TensorSpec("LENGTH", "INT64", [-1])],
    ),
    "sqrt": Model(square_root, inputs=[TensorSpec("X", "FP32", [-1])], outputs=[TensorSpec("Y", "FP32", [-1])]),
    "batched": Model(
        double_rows,
        inputs=[TensorSpec("X", "FP32", [-1, 4])],
        outputs=[TensorSpec("Y", "FP32", [-1, 4]), TensorSpec("BATCH_ROWS", "INT32", [-1])],
        max_batch_size=32,
        max_batch_delay=0.005,
    ),
    "animals": Model(
        animal_scores,
        inputs=[TensorSpec("FEATURES", "FP32", [-1, 4])],
        outputs=[TensorSpec("SCORES", "FP32", [-1, 3])],
        labels=ANIMALS,
    ),
    **{
        f"identity_{datatype.lower()}": Model(
            identity,
            inputs=[TensorSpec("INPUT0", datatype, [-1])],
            outputs=[TensorSpec("OUTPUT0", datatype, [-1])],
        )
        for datatype in DATATYPES
    },
}
