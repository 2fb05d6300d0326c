"""Models that answer over time (docs/streaming.md): generators, each value yielded one response.

``oip-asgi serve examples.streaming:models --grpc-port 8001`` serves them over REST (``/generate``,
``/generate_stream``) and gRPC (``ModelStreamInfer``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from oip_asgi import Model, ModelError, Result, TensorSpec


def tokens(text: np.ndarray, parameters: dict[str, Any]) -> Iterator[Result]:
    """`count` responses (parameter, 3 by default), the k-th holding the text's k-th "token" and its index."""
    prompt = text.ravel()[0].decode()
    for index in range(int(parameters.get("count", 3))):
        yield Result({"token": np.array([f"{prompt}-{index}".encode()], dtype=object)}, parameters={"index": index})


async def countdown(start: np.ndarray) -> AsyncIterator[np.ndarray]:
    """start, start - 1, ..., 1: one response each, computed on the event loop."""
    for value in range(int(start.ravel()[0]), 0, -1):
        await asyncio.sleep(0)
        yield np.array([value], dtype=np.int64)


def mock_llm(
    PROMPT: np.ndarray, STREAM: np.ndarray, parameters: dict[str, Any], input_ids: np.ndarray | None = None
) -> Iterator[dict[str, np.ndarray]]:
    """Triton's mock_llm test model (its generate endpoint tests): the prompt back, REPETITION times when
    STREAM is true, once otherwise; FAIL_LAST ends with an error, OUTPUT_0_DIM answers an empty TEXT."""
    stream = bool(STREAM.ravel()[0])
    text = np.empty((1, 0), dtype=object) if parameters.get("OUTPUT_0_DIM") else PROMPT
    for _ in range(int(parameters.get("REPETITION", 1)) if stream else 1):
        if parameters.get("DELAY"):
            time.sleep(float(parameters["DELAY"]))
        yield {"TEXT": text}
    if stream and parameters.get("FAIL_LAST"):
        raise ModelError("An Error Occurred")


def endless(marker: np.ndarray) -> Iterator[np.ndarray]:
    """Responses until the client leaves; then its ``finally`` writes the file `marker` names."""
    index = 0
    try:
        while True:
            yield np.array([index], dtype=np.int64)
            index += 1
    finally:
        Path(marker.ravel()[0].decode()).write_text(f"closed after {index} responses")


async def endless_async(marker: np.ndarray) -> AsyncIterator[np.ndarray]:
    index = 0
    try:
        while True:
            yield np.array([index], dtype=np.int64)
            index += 1
            await asyncio.sleep(0)
    finally:
        Path(marker.ravel()[0].decode()).write_text(f"closed after {index} responses")


def _text(name: str, shape: list[int]) -> TensorSpec:
    return TensorSpec(name, "BYTES", shape)


MARKER = [TensorSpec("marker", "BYTES", [1])]
INDEX = [TensorSpec("index", "INT64", [1])]

models: dict[str, Any] = {
    "tokens": Model(tokens, inputs=[_text("text", [1])], outputs=[_text("token", [1])]),
    "countdown": Model(countdown, inputs=[TensorSpec("start", "INT64", [1])], outputs=INDEX),
    "mock_llm": Model(
        mock_llm,
        inputs=[
            _text("PROMPT", [1, 1]),
            TensorSpec("STREAM", "BOOL", [1, 1]),
            TensorSpec("input_ids", "INT32", [1, -1], optional=True),
        ],
        outputs=[_text("TEXT", [1, -1])],
    ),
    "endless": Model(endless, inputs=MARKER, outputs=INDEX),
    "endless_async": Model(endless_async, inputs=MARKER, outputs=INDEX),
    "once": Model(lambda x: x * 2, inputs=[TensorSpec("x", "FP32", [-1])], outputs=[TensorSpec("y", "FP32", [-1])]),
}
