"""The models tests/e2e/test_openai_e2e.py serves with `oip-asgi serve --openai`: examples/openai.py's, and
some that fail, never end, or follow no convention."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from examples.openai import LLM_INPUTS, LLM_OUTPUTS
from examples.openai import models as examples
from oip_asgi import Model, TensorSpec


def broken(text_input: np.ndarray, stream: np.ndarray | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Two characters of its prompt, then a failure; a prompt of "now" fails before the first."""
    prompt = text_input.ravel()[0].decode()
    if prompt == "now":
        raise ValueError("the model broke at once")
    for character in prompt[:2]:
        yield {"text_output": np.array([character.encode()], dtype=object)}
    raise ValueError("the model broke")


def endless(text_input: np.ndarray, stream: np.ndarray | None = None) -> Iterator[dict[str, np.ndarray]]:
    """ "tick" until the client leaves; then its ``finally`` writes the file its prompt names."""
    ticks = 0
    try:
        while True:
            yield {"text_output": np.array([b"tick "], dtype=object)}
            ticks += 1
    finally:
        Path(text_input.ravel()[0].decode()).write_text(f"closed after {ticks} responses")


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a + b


INTS = [TensorSpec("a", "INT32", [-1]), TensorSpec("b", "INT32", [-1])]

models: dict[str, Any] = {
    **examples,
    "broken": Model(broken, inputs=LLM_INPUTS[:2], outputs=LLM_OUTPUTS),
    "endless": Model(endless, inputs=LLM_INPUTS[:2], outputs=LLM_OUTPUTS),
    "add": Model(add, inputs=INTS, outputs=[TensorSpec("c", "INT32", [-1])]),
}
