"""An embeddings request: its input checked, then answered by a model of either embedding convention.

A model of the tensor convention gets every text in one call (`EmbeddingExchange`, for the core's unary
body). A model of the vLLM backend's convention takes one input a request, as Triton's OpenAI frontend
sends it, so each text (or list of token ids) is a request of its own, all of them at once
(`answer_vllm`): the answer is whole when each has answered, its usage the sum of their
``num_input_tokens``. ``encoding_format`` is ``float`` or ``base64`` (the float32 bytes, little-endian).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
from starlette.types import Send

from .._core.request import DecodedRequest
from .._core.responding import Reply
from .._core.server import ServerCore
from .._core.serving import ServedModel
from .._declarations.errors import ModelError, quoted
from .conventions import EmbeddingModel, VllmEmbeddingModel
from .errors import InvalidField, UnsuitableModel
from .exchange import embedding_convention
from .http import send_body
from .schemas import EmbeddingRequest, encoder

Item = str | list[int]  # a text, or a prompt's token ids
_floats = msgspec.json.Decoder(list[float])


def embedding_inputs(request: EmbeddingRequest) -> list[Item]:
    """The texts (or token id lists) of `request`'s ``input``, checked, with its other fields."""
    value = request.input
    if isinstance(value, str) or (isinstance(value, list) and value and all(map(_token, value))):
        items, named = [value], ["input"]  # one text, or one prompt's token ids
    elif isinstance(value, list):
        items, named = value, [f"input[{index}]" for index in range(len(value))]
    else:
        items, named = [value], ["input"]
    if not items:
        raise InvalidField("input must not be empty", param="input")
    for item, where in zip(items, named, strict=True):
        if not isinstance(item, (str, list)) or (isinstance(item, list) and not all(map(_token, item))):
            raise InvalidField(
                f"{where} is {type(item).__name__}: input is a text, a list of texts, token ids (non-negative "
                "integers) or lists of them",
                param=where,
            )
        if not item:
            raise InvalidField(f"{where} must not be empty", param=where)
    if request.encoding_format not in ("float", "base64"):
        raise InvalidField(
            f"encoding_format must be 'float' or 'base64', got {quoted(str(request.encoding_format))}",
            param="encoding_format",
        )
    if request.dimensions is not None and request.dimensions < 1:
        raise InvalidField(f"dimensions must be at least 1, got {request.dimensions}", param="dimensions")
    return items


def _token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def answer_body(request: EmbeddingRequest, rows: Sequence[Any], prompt_tokens: int) -> bytes:
    if request.encoding_format == "base64":  # the float32 bytes, little-endian, as OpenAI sends them
        data: list[Any] = [base64.b64encode(np.asarray(row, dtype="<f4").tobytes()).decode() for row in rows]
    else:
        data = [row.tolist() if isinstance(row, np.ndarray) else row for row in rows]
    return encoder.encode(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": index, "embedding": item} for index, item in enumerate(data)],
            "model": request.model,
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
        }
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _OneAnswer:
    """What the core's bodies ask of an exchange whose one answer is kept until the endpoint sends it."""

    endpoint = "/v1/embeddings"
    received = sent = responses = 0
    kept: Any = None

    async def send(self, response: Any) -> None:
        await self.start()
        await self.send_next(response)
        await self.finish()

    async def start(self) -> None:
        """Nothing goes out before the one answer: its status depends on the whole of it."""

    async def send_next(self, response: Any) -> None:
        if self.kept is not None:
            raise ModelError("an embedding model answers once: it sent a second response")
        self.kept = response
        self.responses += 1

    async def finish(self) -> None:
        if self.kept is None:
            raise ModelError("the embedding model sent no response")


class EmbeddingExchange(_OneAnswer):
    """Every text of a request for a model of the tensor convention, in one call (the core's unary body)."""

    def __init__(self, request: EmbeddingRequest, items: list[Item], send: Send, *, received: int) -> None:
        self.request = request
        self._send = send
        self.received = received
        self._texts = [item for item in items if isinstance(item, str)]
        self._items = items

    async def decode(self, model: ServedModel) -> DecodedRequest:
        convention = embedding_convention(model)
        if not isinstance(convention, EmbeddingModel):
            raise UnsuitableModel(f"model {quoted(model.name)} takes one input a request: the vLLM convention")
        if len(self._texts) != len(self._items):
            raise InvalidField(
                f"model {quoted(model.name)} embeds texts: token ids are for models of the vLLM backend's convention",
                param="input",
            )
        wanted = self.request.dimensions
        if wanted is not None and convention.dimensions is not None and wanted != convention.dimensions:
            raise InvalidField(
                f"dimensions {wanted}: model {quoted(model.name)} gives {convention.dimensions}", param="dimensions"
            )
        return convention.request(self._texts)

    def encode(self, reply: Reply) -> bytes:
        model, parameters = reply.model, reply.parameters
        array = reply.outputs[0].array
        if array.ndim != 2 or array.shape[0] != len(self._texts):
            raise ModelError(
                f"model {quoted(model.name)} answered {len(self._texts)} texts with an output of shape "
                f"{list(array.shape)}; the embedding convention wants [{len(self._texts)}, d]"
            )
        wanted = self.request.dimensions
        if wanted is not None and array.shape[1] != wanted:
            raise InvalidField(
                f"dimensions {wanted}: model {quoted(model.name)} gives {array.shape[1]}", param="dimensions"
            )
        rows = np.ascontiguousarray(array, dtype="<f4")
        return answer_body(self.request, list(rows), _count((parameters or {}).get("prompt_tokens")))

    async def finish(self) -> None:
        await super().finish()
        await send_body(self._send, 200, self.kept)
        self.sent = len(self.kept)


class VllmEmbedding(_OneAnswer):
    """One input of a request for a model of the vLLM backend's convention: its embedding and token count."""

    def __init__(self, request: EmbeddingRequest, item: Item, received: int) -> None:
        self.request = request
        self.item = item
        self.received = received

    async def decode(self, model: ServedModel) -> DecodedRequest:
        convention = embedding_convention(model)
        if not isinstance(convention, VllmEmbeddingModel):
            raise UnsuitableModel(f"model {quoted(model.name)} no longer follows the vLLM backend's convention")
        return convention.request(self.item, self.request.dimensions)

    def encode(self, reply: Reply) -> tuple[list[float], int]:
        model, outputs = reply.model, reply.outputs
        try:
            row = _floats.decode(outputs[0].array.ravel()[0])
        except (msgspec.DecodeError, IndexError) as exc:
            raise ModelError(
                f"model {quoted(model.name)}'s text_output is not an embedding (a JSON list of numbers): {exc}"
            ) from None
        wanted = self.request.dimensions
        if wanted is not None and len(row) != wanted:
            raise ModelError(f"model {quoted(model.name)} answered {len(row)} dimensions where {wanted} were asked")
        tokens = 0
        if len(outputs) > 1 and outputs[1].array.size:
            tokens = int(outputs[1].array.ravel()[0])
        return row, tokens


async def answer_vllm(
    core: ServerCore, request: EmbeddingRequest, items: list[Item], send: Send, *, received: int
) -> None:
    """Each input a request of its own to a model of the vLLM backend's convention, all at once; one answer."""
    exchanges = [VllmEmbedding(request, item, received if index == 0 else 0) for index, item in enumerate(items)]
    calls = [core.infer(request.model, None, exchange, core.respond.streaming) for exchange in exchanges]
    if len(calls) == 1:
        await calls[0]
    else:
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
    answers = [exchange.kept for exchange in exchanges]
    body = answer_body(request, [row for row, _ in answers], sum(tokens for _, tokens in answers))
    await send_body(send, 200, body)
