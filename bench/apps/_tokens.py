"""W10's and W11's shared terms: one model, `tokens`, that answers a request with `max_tokens` one-token responses.

W10: inputs `text_input` BYTES [1] and `max_tokens` INT32 [1]; W11: `text_input` and `sampling_parameters` (the
LLM convention, `max_tokens` inside). Each response carries `text_output` BYTES [1], the same small token every
time (the model's own work is nil: what is measured is the server's cost per frame).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

MODEL = "tokens"
TOKEN = "token"


def tokens_model(count_input: str, count: Callable[[Any], int]) -> Any:
    """Ours: an async generator (on the loop, as MLServer's predict_stream) yielding `count(inputs[count_input])`
    tokens."""
    import numpy as np

    from oip_asgi import Model, TensorSpec

    token = {"text_output": np.array([TOKEN.encode()], dtype=object)}

    async def tokens(text_input: Any, **inputs: Any) -> AsyncIterator[dict[str, Any]]:
        for _ in range(count(inputs[count_input])):
            yield token

    count_type = "INT32" if count_input == "max_tokens" else "BYTES"
    inputs = [TensorSpec("text_input", "BYTES", [1]), TensorSpec(count_input, count_type, [1])]
    return Model(tokens, inputs=inputs, outputs=[TensorSpec("text_output", "BYTES", [1])])
