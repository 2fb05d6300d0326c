"""The core's exchange for a text request (completion or chat), answered whole or as server-sent chunks.

A text request's responses are its model's ``text_output`` values, in order. Answered whole, their
texts are joined into one choice; streamed, each one that carries text (or token logprobs) is a chunk as
it comes, after a first chunk that gives a chat answer its role (and a completion's echo, its prompt),
and before a last one with the ``finish_reason``, the usage chunk asked for with
``stream_options.include_usage``, and ``data: [DONE]``. Streamed and whole, the same responses make the
same text, usage and finish_reason.

What the model tells, by what it declares (conventions.py): the vLLM backend's additional outputs, when it
declares them: ``finish_reason`` (its last value that is not "None"), ``num_input_tokens`` (the usage's
``prompt_tokens``), ``num_output_tokens`` (summed over the responses: ``completion_tokens``) and
``logprobs``. Without them, its response parameters ``prompt_tokens`` and ``completion_tokens`` (the last
value sent counts) and ``finish_reason``; without those, ``completion_tokens`` counts the responses that
carried text (one token each in the vLLM backend's streaming), ``prompt_tokens`` is 0, and
``finish_reason`` is ``length`` when ``max_tokens`` was asked for and reached, ``stop`` else.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from starlette.types import Receive, Send

from .._core.inference import OutputTensor
from .._core.request import DecodedRequest
from .._core.responding import Reply
from .._core.serving import ServedModel
from .._declarations.errors import ModelError, OIPError, quoted
from .._http.disconnect import DisconnectWatch
from .chat import render_chat
from .conventions import TEXT_OUTPUT, EmbeddingModel, TextModel, VllmEmbeddingModel, embedding_model, text_model
from .errors import InvalidField, UnsuitableModel, error_object
from .http import DONE, end_events, send_body, send_event, start_events
from .logprobs import Position, TokenLogprobs, positions
from .sampling import Asked
from .schemas import ChatRequest, CompletionRequest, encoder
from .texts import prompt_of

Convention = TypeVar("Convention", TextModel, EmbeddingModel | VllmEmbeddingModel)
# What one response tells besides its text: finish_reason, num_input_tokens, num_output_tokens, logprobs.
Extras = tuple[str | None, int | None, int | None, list[Position] | None]
Piece = tuple[str, dict[str, Any] | None, Extras | None]
_UNFINISHED = ("", "None", "none", "null")  # the vLLM backend's finish_reason of a response that is not the last


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
embedding_convention: _Readings[EmbeddingModel | VllmEmbeddingModel] = _Readings(embedding_model)


class TextExchange(DisconnectWatch):
    """A completion or chat completion request, for the core's streaming body; `asked` is what it asks."""

    def __init__(
        self,
        request: CompletionRequest | ChatRequest,
        asked: Asked,
        send: Send,
        receive: Receive,
        *,
        received: int,
        created: int,
    ) -> None:
        super().__init__(receive)
        self.received = received
        self.sent = self.responses = 0
        self.request = request
        self.asked = asked
        self.chat = isinstance(request, ChatRequest)
        self.endpoint = "/v1/chat/completions" if self.chat else "/v1/completions"
        self.streaming = request.stream
        self._send = send
        self.started = False  # the event stream's status and headers are sent: errors go as an event
        self._texts: list[str] = []
        self._tokens = 0
        self._parameters: dict[str, Any] = {}
        self._finish: str | None = None  # the model's finish_reason output
        self._prompt_tokens: int | None = None  # its num_input_tokens
        self._counted: int | None = None  # its num_output_tokens, summed
        self._echo: str | None = None  # the prompt this server puts before the answer (a completion's echo)
        self._decoded: DecodedRequest | None = None  # the model's request, once decoded
        self._logprobs = TokenLogprobs(chat=self.chat, top=asked.logprobs) if asked.logprobs is not None else None
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
            end = b',"usage":null}\n\n' if self._include_usage else b"}\n\n"
            self._close = (b"}" if self.chat else b"") + b',"logprobs":null,"finish_reason":null}]' + end
            self._middle = (b"}" if self.chat else b"") + b',"logprobs":'  # a chunk with token logprobs
            self._tail = b',"finish_reason":null}]' + end

    async def decode(self, model: ServedModel) -> DecodedRequest:
        convention = text_convention(model)
        request, asked = self.request, self.asked
        prompt = render_chat(model, request.messages) if isinstance(request, ChatRequest) else prompt_of(request)
        extras = convention.extras
        wanted = []
        if asked.logprobs is not None:
            if "logprobs" not in extras:
                raise InvalidField(
                    f"logprobs are not available: model {quoted(model.name)} gives no token logprobs (it declares "
                    "no return_logprobs input and logprobs output, as Triton's vLLM backend does)",
                    param="logprobs",
                )
            wanted.append("logprobs")
        if "finish_reason" in extras:
            wanted.append("finish_reason")
        if asked.usage or "finish_reason" not in extras:  # a count tells `length` where the model does not
            wanted += [name for name in ("num_input_tokens", "num_output_tokens") if name in extras]
        model_echoes = asked.echo and convention.echoes and not self.streaming
        if asked.echo and not model_echoes:
            self._echo = prompt  # the vLLM backend repeats no prompt when streaming: this server sends it first
        decoded = convention.request(
            prompt, stream=self.streaming, sampling=encoder.encode(asked.sampling), echo=model_echoes, extras=wanted
        )
        self._decoded = decoded
        self.watch()
        return decoded

    def encode(self, reply: Reply) -> Piece:
        outputs = reply.outputs
        text = _text(reply.model, outputs)
        if len(outputs) == 1:
            return text, reply.parameters, None
        return text, reply.parameters, _extras(reply.model, outputs)

    async def send(self, response: Piece) -> None:
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
        elif self._echo is not None:  # the prompt first, as vLLM streams a completion's echo
            await self._event(self._head + self._open + encoder.encode(self._echo) + self._close)

    async def send_next(self, response: Piece) -> None:
        text, parameters, extras = response
        self.responses += 1
        if parameters:
            self._parameters.update(parameters)
        logprobs = None
        if extras is not None:  # what the model tells besides its text (inline: a stream's every token)
            finish, prompt_tokens, tokens, found = extras
            if finish is not None:
                self._finish = finish
            if prompt_tokens is not None and self._prompt_tokens is None:
                self._prompt_tokens = prompt_tokens
                self._ask_no_more("num_input_tokens")
            if tokens is not None:
                self._counted = tokens + (self._counted or 0)
            if found and self._logprobs is not None:
                if self.streaming:
                    logprobs = self._logprobs.chunk(found)
                else:
                    self._logprobs.add(found)
        if not text and logprobs is None:
            return
        if text:
            self._tokens += 1
        if not self.streaming:
            self._texts.append(text)
        elif logprobs is None:
            await self._event(self._head + self._open + encoder.encode(text) + self._close)
        else:
            await self._event(self._head + self._open + encoder.encode(text) + self._middle + logprobs + self._tail)

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

    def _ask_no_more(self, name: str) -> None:
        """Leave output `name` out of the next responses: the vLLM backend sends it with each, and it tells the
        same each time (the prompt's tokens). The core reads a request's outputs on each response."""
        decoded = self._decoded
        if decoded is not None and decoded.outputs is not None:
            asked = decoded.outputs
            decoded.outputs = [output for output in asked if output.name != name]

    async def _event(self, data: bytes) -> None:
        await send_event(self._send, data)
        self.sent += len(data)

    def _chunk_head(self) -> dict[str, Any]:
        kind = f"{self._object}.chunk" if self.chat else self._object
        return {"id": self._id, "object": kind, "created": self._created, "model": self.request.model}

    def _finish_reason(self) -> str:
        if self._finish is not None:
            return self._finish
        given = self._parameters.get("finish_reason")
        if isinstance(given, str) and given:
            return given
        max_tokens = self.asked.max_tokens
        return "length" if max_tokens is not None and self._completion_tokens() >= max_tokens else "stop"

    def _completion_tokens(self) -> int:
        if self._counted is not None:
            return self._counted
        given = self._parameters.get("completion_tokens")
        return given if isinstance(given, int) and not isinstance(given, bool) else self._tokens

    def _usage(self) -> dict[str, int]:
        prompt = self._prompt_tokens
        if prompt is None:
            given = self._parameters.get("prompt_tokens")
            prompt = given if isinstance(given, int) and not isinstance(given, bool) else 0
        completion = self._completion_tokens()
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _whole(self, reason: str) -> dict[str, Any]:
        text = "".join(self._texts)
        if self._echo is not None:
            text = self._echo + text
        logprobs = None if self._logprobs is None else self._logprobs.whole()
        if self.chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": logprobs,
                "finish_reason": reason,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": reason}
        return {
            "id": self._id,
            "object": self._object,
            "created": self._created,
            "model": self.request.model,
            "choices": [choice],
            "usage": self._usage(),
        }


def _text(model: ServedModel, outputs: list[OutputTensor]) -> str:
    """The response's ``text_output`` (the first output asked for): its elements' text, joined."""
    output = outputs[0]
    if output.name != TEXT_OUTPUT:
        raise ModelError(f"model {quoted(model.name)} answered without its output 'text_output'")
    array = output.array
    try:
        if array.size == 1:  # a token: one element
            piece = array.item(0)
            return piece.decode() if type(piece) is bytes else str(piece)
        return "".join(piece.decode() if isinstance(piece, bytes) else str(piece) for piece in array.ravel().tolist())
    except UnicodeDecodeError as exc:
        raise ModelError(f"model {quoted(model.name)}'s text_output is not UTF-8: {exc}") from None


def _extras(model: ServedModel, outputs: list[OutputTensor]) -> Extras:
    """What a response's additional outputs tell (conventions.EXTRAS), as the vLLM backend gives them."""
    finish = prompt_tokens = tokens = found = None
    for output in outputs[1:]:
        try:
            first = output.array.item(0)  # an int of a count (cast to its declared integer type), a text's bytes
        except IndexError:  # an empty array tells nothing
            continue
        name = output.name
        if name == "num_output_tokens":
            tokens = first
        elif name == "finish_reason":
            reason = first.decode(errors="replace") if type(first) is bytes else str(first)
            finish = None if reason in _UNFINISHED else reason
        elif name == "num_input_tokens":
            prompt_tokens = first
        elif name == "logprobs":
            found = positions(model.name, first)
    return finish, prompt_tokens, tokens, found
