"""W10's and W11's shared terms: one model, `tokens`, that answers a request with `max_tokens` one-token responses.

W10: inputs `text_input` BYTES [1] and `max_tokens` INT32 [1]; W11: `text_input` and `sampling_parameters` (the
LLM convention, `max_tokens` inside). Each response carries `text_output` BYTES [1], the same small token every
time (the model's own work is nil: what is measured is the server's cost per frame). `vllm_tokens_model` is the
same with the vLLM backend's whole convention (issue 38): each response also carries the outputs its `return_*`
inputs ask for (finish_reason, num_input_tokens, num_output_tokens, logprobs), built once, as constant as the token.
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


def vllm_tokens_model() -> Any:
    """`tokens` declaring the vLLM backend's inputs and outputs: what a request's `return_*` inputs ask for comes
    with every token (precomputed per combination of them, so the model's work stays nil)."""
    import json

    import numpy as np

    from oip_asgi import Model, TensorSpec

    def constant(value: Any, dtype: Any) -> Any:
        return np.array([value], dtype=dtype)

    # The vLLM backend's logprobs of one token: the sampled one, which is also the likeliest (top_logprobs 1).
    logprobs = json.dumps([{"11": {"logprob": -0.25, "rank": 1, "decoded_token": TOKEN}}]).encode()
    extras = {
        "finish_reason": constant(b"None", object),
        "num_input_tokens": constant(200, np.uint32),
        "num_output_tokens": constant(1, np.uint32),
        "logprobs": constant(logprobs, object),
    }
    returns = tuple(extras)
    responses: dict[tuple[str, ...], dict[str, Any]] = {}

    async def tokens(text_input: Any, sampling_parameters: Any, **inputs: Any) -> AsyncIterator[dict[str, Any]]:
        asked = tuple(name for name in returns if f"return_{name}" in inputs and inputs[f"return_{name}"][0])
        response = responses.get(asked)
        if response is None:
            response = responses[asked] = {
                "text_output": constant(TOKEN.encode(), object),
                **{name: extras[name] for name in asked},
            }
        for _ in range(int(json.loads(sampling_parameters[0]).get("max_tokens", 16))):
            yield response

    inputs = [TensorSpec("text_input", "BYTES", [1]), TensorSpec("sampling_parameters", "BYTES", [1])]
    inputs += [TensorSpec(f"return_{name}", "BOOL", [1], optional=True) for name in returns]
    outputs = [
        TensorSpec("text_output", "BYTES", [1]),
        TensorSpec("finish_reason", "BYTES", [-1]),
        TensorSpec("num_input_tokens", "UINT32", [1]),
        TensorSpec("num_output_tokens", "UINT32", [-1]),
        TensorSpec("logprobs", "BYTES", [-1]),
    ]
    return Model(tokens, inputs=inputs, outputs=outputs)
