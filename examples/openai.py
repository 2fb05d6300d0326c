"""Models for the OpenAI-compatible API (docs/openai.md), runnable with no downloads.

``oip-asgi serve examples.openai:models --openai`` serves them at /v1 (OpenAI's API) and /v2 (the protocol).

- ``echo``: a character-level toy LLM following the LLM convention (Triton's vLLM-backend inputs): it
  answers with its prompt, one character a response (a "token"), at most ``max_tokens`` of them, and
  ends before a ``stop`` string. Streamed when ``stream`` is true, the whole text in one response
  otherwise (after the prompt when ``exclude_input_in_output`` is false: a completion's ``echo``). Its
  chat template gives it the last message's content, so a chat echoes what was said last.
  ``examples/openai_vllm.py`` has a toy LLM with the vLLM backend's whole convention (counts, logprobs).
- ``shout``: the same convention answered once (not a generator): the prompt in capitals.
- ``embed``: the embedding convention: each text as 8 floats (its bytes counted by their value modulo 8,
  normalised), deterministic.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from oip_asgi import Model, Result, TensorSpec

LLM_INPUTS = [
    TensorSpec("text_input", "BYTES", [1]),
    TensorSpec("stream", "BOOL", [1], optional=True),
    TensorSpec("sampling_parameters", "BYTES", [1], optional=True),
    TensorSpec("exclude_input_in_output", "BOOL", [1], optional=True),
]
LLM_OUTPUTS = [TensorSpec("text_output", "BYTES", [-1])]


def sampling(sampling_parameters: np.ndarray | None) -> dict[str, Any]:
    """The request's sampling parameters (a JSON object), as the vLLM backend reads them."""
    if sampling_parameters is None:
        return {}
    parsed: dict[str, Any] = json.loads(sampling_parameters.ravel()[0])
    return parsed


def answer(prompt: str, settings: dict[str, Any]) -> str:
    """The echo's whole answer: the prompt cut before its first stop string and to max_tokens characters."""
    stops = settings.get("stop") or []
    for stop in [stops] if isinstance(stops, str) else stops:
        if stop and stop in prompt:
            prompt = prompt[: prompt.index(stop)]
    return prompt[: settings.get("max_tokens", len(prompt))]


def text(value: str) -> np.ndarray:
    return np.array([value.encode()], dtype=object)


async def echo(
    text_input: np.ndarray,
    stream: np.ndarray | None = None,
    sampling_parameters: np.ndarray | None = None,
    exclude_input_in_output: np.ndarray | None = None,
) -> AsyncIterator[dict[str, np.ndarray]]:
    prompt = text_input.ravel()[0].decode()
    whole = answer(prompt, sampling(sampling_parameters))
    if stream is None or not stream.ravel()[0]:  # one response: it says how many tokens it holds
        echoed = prompt if exclude_input_in_output is not None and not exclude_input_in_output.ravel()[0] else ""
        yield Result({"text_output": text(echoed + whole)}, parameters={"completion_tokens": len(whole)})
        return
    for character in whole:
        yield {"text_output": text(character)}


def shout(text_input: np.ndarray, sampling_parameters: np.ndarray | None = None) -> Result:
    prompt = text_input.ravel()[0].decode()
    whole = answer(prompt.upper(), sampling(sampling_parameters))
    counts = {"prompt_tokens": len(prompt), "completion_tokens": len(whole)}
    return Result({"text_output": text(whole)}, parameters=counts)


def embed(text: np.ndarray) -> np.ndarray:
    rows = np.zeros((len(text), 8), dtype=np.float32)
    for row, item in zip(rows, text.ravel(), strict=True):
        counts = np.bincount(np.frombuffer(item, dtype=np.uint8) % 8, minlength=8).astype(np.float32)
        row[:] = counts / max(float(np.linalg.norm(counts)), 1.0)
    return rows


models: dict[str, Any] = {
    "echo": Model(
        echo,
        inputs=LLM_INPUTS,
        outputs=LLM_OUTPUTS,
        properties={"chat_template": "{{ messages[-1]['content'] }}"},
    ),
    "shout": Model(shout, inputs=LLM_INPUTS[:1] + LLM_INPUTS[2:3], outputs=LLM_OUTPUTS),
    "embed": Model(
        embed, inputs=[TensorSpec("text", "BYTES", [-1])], outputs=[TensorSpec("embedding", "FP32", [-1, 8])]
    ),
}
