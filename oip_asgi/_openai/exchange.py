"""The core's exchanges for this wire: a text request (completion or chat) answered whole or as
server-sent chunks, and an embedding request answered whole.

A text request's responses are its model's ``text_output`` values, in order. Answered whole, their
texts are joined into one choice; streamed, each non-empty one is a chunk as it comes, after a first
chunk that gives a chat answer its role, and before a last one with the ``finish_reason``, the usage
chunk asked for with ``stream_options.include_usage``, and ``data: [DONE]``.

What is counted without a tokenizer: ``completion_tokens`` is the responses that carried text (one
token each in the vLLM backend's streaming), ``prompt_tokens`` is 0; a model that knows better sets
them as its response parameters ``prompt_tokens`` and ``completion_tokens`` (the last value sent
counts), and may set ``finish_reason`` too. Otherwise ``finish_reason`` is ``length`` when
``max_tokens`` was asked for and reached, ``stop`` else.
"""

from __future__ import annotations

import base64
import uuid
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np
from starlette.types import Receive, Send

from .._core.inference import OutputTensor
from .._core.request import DecodedRequest
from .._core.responding import Reply
from .._core.serving import ServedModel
from .._declarations.errors import ModelError, OIPError, quoted
from .._http.disconnect import DisconnectWatch
from .chat import render_chat
from .conventions import EmbeddingModel, TextModel, embedding_model, text_model
from .errors import InvalidField, UnsuitableModel, error_object
from .http import DONE, end_events, send_body, send_event, start_events
from .schemas import ChatRequest, CompletionRequest, EmbeddingRequest, encoder
from .texts import max_tokens_of, prompt_of, sampling_parameters

Convention = TypeVar("Convention", TextModel, EmbeddingModel)


class _Readings(Generic[Convention]):
    """Each model's reading by one convention, once per served version: a reload serves a new ServedModel."""

    def __init__(self, read: Callable[[ServedModel], Convention]) -> None:
        self._read: Callable[[ServedModel], Convention] = read
        self._known: weakref.WeakKeyDictionary[ServedModel, Convention | UnsuitableModel] = weakref.WeakKeyDictionary()

    def __call__(self, model: ServedModel) -> Convention:
        known = self._known.get(model)
        if known is None:
            try:
                known = self._read(model)
            except UnsuitableModel as exc:
                known = exc
            self._known[model] = known
        if isinstance(known, UnsuitableModel):
            raise UnsuitableModel(known.message)  # a new one each time: a raised exception keeps its traceback
        return known


text_convention = _Readings(text_model)
embedding_convention = _Readings(embedding_model)


class TextExchange(DisconnectWatch):
    """A completion (`chat` false) or chat completion request, for the core's streaming body."""

    def __init__(
        self, request: CompletionRequest | ChatRequest, send: Send, receive: Receive, *, received: int, created: int
    ) -> None:
        super().__init__(receive)
        self.received = received
        self.sent = self.responses = 0
        self.request = request
        self.chat = isinstance(request, ChatRequest)
        self.endpoint = "/v1/chat/completions" if self.chat else "/v1/completions"
        self.streaming = request.stream
        self._send = send
        self.started = False  # the event stream's status and headers are sent: errors go as an event
        self._texts: list[str] = []
        self._tokens = 0
        self._parameters: dict[str, Any] = {}
        kind = "chat.completion" if self.chat else "text_completion"
        self._id = f"{'chatcmpl' if self.chat else 'cmpl'}-{uuid.uuid4().hex}"
        self._object = kind
        self._created = created
        options = request.stream_options
        self._include_usage = bool(self.streaming and options is not None and options.include_usage)
        if self.streaming:
            # Every chunk is these bytes around its text: built once, not a dict encoded per chunk.
            head = encoder.encode(
                {
                    "id": self._id,
                    "object": f"{kind}.chunk" if self.chat else kind,
                    "created": created,
                    "model": request.model,
                }
            )
            self._head = b"data: " + head[:-1] + b',"choices":[{"index":0,'
            self._open = b'"delta":{"content":' if self.chat else b'"text":'
            close = (
                b'},"logprobs":null,"finish_reason":null}]' if self.chat else b',"logprobs":null,"finish_reason":null}]'
            )
            self._close = close + (b',"usage":null}\n\n' if self._include_usage else b"}\n\n")

    async def decode(self, model: ServedModel) -> DecodedRequest:
        convention = text_convention(model)
        request = self.request
        prompt = render_chat(model, request.messages) if isinstance(request, ChatRequest) else prompt_of(request)
        decoded = convention.request(prompt, stream=self.streaming, sampling=sampling_parameters(request))
        self.watch()
        return decoded

    def encode(self, reply: Reply) -> tuple[str, dict[str, Any] | None]:
        return _text(reply.model, reply.outputs), reply.parameters

    async def send(self, response: tuple[str, dict[str, Any] | None]) -> None:
        """A model that answers once: its one response, streamed when asked, as a decoupled model's first."""
        await self.start()
        await self.send_next(response)
        await self.finish()

    async def start(self) -> None:
        if not self.streaming:
            return
        await start_events(self._send)
        self.started = True
        if self.chat:  # the role first, as OpenAI sends it
            role = self._head + b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]'
            await self._event(role + (b',"usage":null}\n\n' if self._include_usage else b"}\n\n"))

    async def send_next(self, response: tuple[str, dict[str, Any] | None]) -> None:
        text, parameters = response
        self.responses += 1
        if parameters:
            self._parameters.update(parameters)
        if not text:
            return
        self._tokens += 1
        if self.streaming:
            await self._event(self._head + self._open + encoder.encode(text) + self._close)
        else:
            self._texts.append(text)

    async def finish(self) -> None:
        reason = self._finish_reason()
        self.finished = True
        if not self.streaming:
            body = encoder.encode(self._whole(reason))
            await send_body(self._send, 200, body)
            self.sent = len(body)
            return
        choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}
        if not self.chat:
            choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": reason}
        last: dict[str, Any] = {**self._chunk_head(), "choices": [choice]}
        if self._include_usage:
            last["usage"] = None
        await self._event(b"data: " + encoder.encode(last) + b"\n\n")
        if self._include_usage:
            usage = {**self._chunk_head(), "choices": [], "usage": self._usage()}
            await self._event(b"data: " + encoder.encode(usage) + b"\n\n")
        await self._event(DONE)
        await end_events(self._send)

    @property
    def streams_errors(self) -> bool:
        return self.started

    async def error(self, error: OIPError) -> None:
        """A failure after the stream started: an event holding OpenAI's error object, then the end."""
        await self._event(b"data: " + encoder.encode(error_object(error)) + b"\n\n")
        await end_events(self._send)

    async def _event(self, data: bytes) -> None:
        await send_event(self._send, data)
        self.sent += len(data)

    def _chunk_head(self) -> dict[str, Any]:
        kind = f"{self._object}.chunk" if self.chat else self._object
        return {"id": self._id, "object": kind, "created": self._created, "model": self.request.model}

    def _finish_reason(self) -> str:
        given = self._parameters.get("finish_reason")
        if isinstance(given, str) and given:
            return given
        max_tokens = max_tokens_of(self.request)
        return "length" if max_tokens is not None and self._completion_tokens() >= max_tokens else "stop"

    def _completion_tokens(self) -> int:
        given = self._parameters.get("completion_tokens")
        return given if isinstance(given, int) and not isinstance(given, bool) else self._tokens

    def _usage(self) -> dict[str, int]:
        given = self._parameters.get("prompt_tokens")
        prompt = given if isinstance(given, int) and not isinstance(given, bool) else 0
        completion = self._completion_tokens()
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _whole(self, reason: str) -> dict[str, Any]:
        text = "".join(self._texts)
        if self.chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": reason,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        return {
            "id": self._id,
            "object": self._object,
            "created": self._created,
            "model": self.request.model,
            "choices": [choice],
            "usage": self._usage(),
        }


def _text(model: ServedModel, outputs: list[OutputTensor]) -> str:
    """The response's ``text_output``: its elements' text, joined."""
    for output in outputs:
        if output.name == "text_output":
            pieces = output.array.ravel().tolist()
            try:
                return "".join(piece.decode() if isinstance(piece, bytes) else str(piece) for piece in pieces)
            except UnicodeDecodeError as exc:
                raise ModelError(f"model {quoted(model.name)}'s text_output is not UTF-8: {exc}") from None
    raise ModelError(f"model {quoted(model.name)} answered without its output 'text_output'")


class EmbeddingExchange:
    """An embeddings request, for the core's unary body: one model call for every text of ``input``."""

    endpoint = "/v1/embeddings"

    def __init__(self, request: EmbeddingRequest, send: Send, *, received: int) -> None:
        self.request = request
        self._send = send
        self.received = received
        self.sent = self.responses = 0
        self._kept: bytes | None = None
        self._texts = [request.input] if isinstance(request.input, str) else request.input
        if not self._texts:
            raise InvalidField("input must hold at least one text", param="input")
        if request.encoding_format not in ("float", "base64"):
            raise InvalidField(
                f"encoding_format must be 'float' or 'base64', got {quoted(request.encoding_format)}",
                param="encoding_format",
            )

    async def decode(self, model: ServedModel) -> DecodedRequest:
        convention = embedding_convention(model)
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
        if self.request.encoding_format == "base64":  # the float32 bytes, little-endian, as OpenAI sends them
            data: list[Any] = [base64.b64encode(row.tobytes()).decode() for row in rows]
        else:
            data = rows.tolist()
        given = (parameters or {}).get("prompt_tokens")
        tokens = given if isinstance(given, int) and not isinstance(given, bool) else 0
        return encoder.encode(
            {
                "object": "list",
                "data": [{"object": "embedding", "index": index, "embedding": item} for index, item in enumerate(data)],
                "model": self.request.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def send(self, response: bytes) -> None:
        await self.start()
        await self.send_next(response)
        await self.finish()

    async def start(self) -> None:
        """Nothing goes out before the one answer: its status depends on the whole of it."""

    async def send_next(self, response: bytes) -> None:
        if self._kept is not None:
            raise ModelError("an embedding model answers once: it sent a second response")
        self._kept = response
        self.responses += 1

    async def finish(self) -> None:
        if self._kept is None:
            raise ModelError("the embedding model sent no response")
        await send_body(self._send, 200, self._kept)
        self.sent = len(self._kept)
