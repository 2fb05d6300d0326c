"""The OpenAI-compatible API as an ASGI app over the same served models as an `OIPApp` (one `ServerCore`).

Mounted where a host likes (``/v1`` by convention), it answers ``GET /models``, ``GET /models/{id}``,
``POST /completions``, ``POST /chat/completions`` and ``POST /embeddings`` below that point, and Triton's
OpenAI frontend's model control, ``POST /models/{id}/load`` and ``/unload``; every error as OpenAI's error
object. A request names its model by its served name; the newest version answers.
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Awaitable, Mapping
from typing import Any

from starlette.types import Receive, Scope, Send

from .._core.server import HasCore, ServerCore, core_of
from .._declarations.errors import NotFound, quoted
from .._declarations.restricted import Restriction, RestrictionsArgument, restrictions
from .._http.disconnect import answer_streamed
from .._http.headers import header
from .._http.routing import Route, Table, WireApp
from .conventions import VllmEmbeddingModel
from .embeddings import EmbeddingExchange, answer_vllm, embedding_inputs
from .errors import InvalidApiKey, InvalidField, UnknownModel, UnknownPath
from .exchange import TextExchange, embedding_convention
from .http import read_body, send_body, send_error
from .sampling import asked
from .schemas import CompletionRequest, chat_decoder, completion_decoder, embedding_decoder, encoder
from .texts import decoded, prompt_of

# The largest request body unless told otherwise: Triton's (its --http-max-input-size), within the core's bound.
MAX_BODY_SIZE = 64 * 2**20


class OpenAIApp(WireApp):
    """OpenAI's API over the models an `OIPApp` (or a `ServerCore`) serves; see `openai_app`."""

    def __init__(
        self,
        app: HasCore | ServerCore,
        *,
        restricted_apis: RestrictionsArgument | None = None,
        api_key: str | None = None,
        max_body_size: int | None = None,
    ) -> None:
        self.core = core_of(app)
        # The groups the protocol's app restricts guard the same models here, unless told otherwise.
        inherited: Mapping[str, Restriction] = getattr(app, "restrictions", {})
        rules = dict(inherited) if restricted_apis is None else restrictions(restricted_apis)
        if max_body_size is not None and max_body_size < 1:
            raise ValueError(f"max_body_size must be at least 1, got {max_body_size}")
        self.max_body_size = min(MAX_BODY_SIZE, self.core.max_body_size) if max_body_size is None else max_body_size
        if api_key is not None and not api_key:
            raise ValueError("api_key must not be empty: leave it out to serve without one")
        self._bearer = None if api_key is None else b"Bearer " + api_key.encode()
        self.created = int(time.time())  # a model's `created`: when this server began serving it, near enough
        # Triton's API groups, as its OpenAI frontend has them: listing, loading, unloading models: the repository's.
        self.routes = [
            Route("/chat/completions", self._chat, "inference", methods=["POST"], name="chat"),
            Route("/completions", self._completion, "inference", methods=["POST"], name="completion"),
            Route("/embeddings", self._embeddings, "inference", methods=["POST"], name="embeddings"),
            Route("/models", self._models, "model-repository", name="models"),
            Route("/models/{id:path}/load", self._load, "model-repository", methods=["POST"], name="load"),
            Route("/models/{id:path}/unload", self._unload, "model-repository", methods=["POST"], name="unload"),
            Route("/models/{id:path}", self._model, "model-repository", name="model"),
        ]
        table = Table(self.routes, self.core, send_error=send_error, not_found=_invalid_url, restrictions=rules)
        if self._bearer is not None:
            table.authorize = self._authorize
        super().__init__(table)

    @property
    def requires_key(self) -> bool:
        return self._bearer is not None

    def _authorize(self, scope: Scope) -> None:
        """The API key, as OpenAI's clients send it (``Authorization: Bearer KEY``), compared in constant time."""
        assert self._bearer is not None
        given = header(scope, b"authorization")
        if given is None:
            raise InvalidApiKey(
                "You didn't provide an API key. You need to provide your API key in an Authorization header "
                "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
        if not hmac.compare_digest(given, self._bearer):
            raise InvalidApiKey("Incorrect API key provided.")

    async def _models(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        control = self.core.control
        if control is not None and not control.has_started:
            await control.started()  # a repository's models are listed once its control has read it
        data = [self._entry(name) for name in self.core.served.names()]
        await send_body(send, 200, encoder.encode({"object": "list", "data": data}))

    async def _model(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        try:
            model = await self.core.model(match.group("id"))
        except NotFound as exc:
            raise self._not_found(exc, match.group("id")) from None
        await send_body(send, 200, encoder.encode(self._entry(model.name)))

    def _not_found(self, error: NotFound, name: str) -> NotFound:
        """An unknown model in OpenAI's words (`code` "model_not_found"), with the models served; the core's
        own NotFound for a model known but not served now (a repository's, unloaded), which says why."""
        served = self.core.served
        return UnknownModel(name, served.names()) if served.unknown(name) else error

    def _entry(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": self.core.server_metadata.name}

    # Model control, as Triton's OpenAI frontend has it: explicit mode only; a load waits until it serves.

    async def _load(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        name = match.group("id")
        await self._controlled(scope, receive, "load")
        if name in self.core.served:
            raise InvalidField(f"Model {quoted(name)} is already loaded: unload it first", param="model")
        listed = [row["name"] for row in self.core.repository_index()]
        if name not in listed:
            raise UnknownModel(name, listed, where="the model repository holds")
        await self.core.load_model(name)
        await send_body(send, 200, encoder.encode(self._entry(name)))

    async def _unload(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        name = match.group("id")
        await self._controlled(scope, receive, "unload")
        if name not in self.core.served:
            raise UnknownModel(name, self.core.served.names())
        await self.core.unload_model(name)  # its requests in flight finish first
        await send_body(send, 200, encoder.encode({"status": "success", "model": name}))

    async def _controlled(self, scope: Scope, receive: Receive, action: str) -> None:
        """Read the body (none is needed), and refuse a model control that takes no loads and unloads."""
        await read_body(scope, receive, self.max_body_size)
        control = self.core.control
        if control is None:
            raise InvalidField(
                f"Model {action} requires --model-control-mode=explicit: this server serves no model repository "
                "(oip-asgi serve --model-repository DIR --model-control-mode explicit)",
                param=None,
            )
        if control.mode != "explicit":
            raise InvalidField(
                f"Model {action} requires --model-control-mode=explicit: this server's model control mode is "
                f"{control.mode!r}",
                param=None,
            )
        if not control.has_started:
            await control.started()

    # Plain functions handing back the coroutine that answers: one coroutine frame fewer a request.

    def _completion(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> Awaitable[None]:
        return self._text(scope, receive, send, completion_decoder)

    def _chat(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> Awaitable[None]:
        return self._text(scope, receive, send, chat_decoder)

    async def _text(self, scope: Scope, receive: Receive, send: Send, decoder: Any) -> None:
        body = await read_body(scope, receive, self.max_body_size)
        request = decoded(decoder, body)
        if isinstance(request, CompletionRequest):
            prompt_of(request)  # checked before the model is
        exchange = TextExchange(request, asked(request), send, receive, received=len(body), created=int(time.time()))
        try:
            await answer_streamed(self.core, request.model, None, exchange, f"POST {scope.get('path')}")
        except NotFound as exc:  # raised before the stream started: the error object with its status
            raise self._not_found(exc, request.model) from None

    async def _embeddings(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        body = await read_body(scope, receive, self.max_body_size)
        request = decoded(embedding_decoder, body)
        items = embedding_inputs(request)
        try:
            convention = embedding_convention(await self.core.model(request.model))
            if isinstance(convention, VllmEmbeddingModel):
                await answer_vllm(self.core, request, items, send, received=len(body))
            else:
                exchange = EmbeddingExchange(request, items, send, received=len(body))
                await self.core.infer(request.model, None, exchange, self.core.respond.once)
        except NotFound as exc:
            raise self._not_found(exc, request.model) from None


def _invalid_url(scope: Scope, path: str) -> UnknownPath:
    full = scope.get("root_path", "") + path
    return UnknownPath(f"Invalid URL ({scope['method']} {full}): this server answers /models, /completions, "
                       "/chat/completions and /embeddings")  # fmt: skip


def openai_app(
    app: HasCore | ServerCore,
    *,
    restricted_apis: RestrictionsArgument | None = None,
    api_key: str | None = None,
    max_body_size: int | None = None,
) -> OpenAIApp:
    """OpenAI's API (``/models``, ``/completions``, ``/chat/completions``, ``/embeddings``) over the models
    that `app` (an `OIPApp`, from `oip_app`) serves, as an ASGI app to mount at ``/v1``.

    Both apps serve the same models, with the same loads, statistics and worker threads. A model is
    usable for text when it follows the LLM convention (Triton's vLLM backend's inputs and outputs:
    ``text_input`` in, ``text_output`` out; a generator streams), for embeddings when it takes one
    BYTES input ``[-1]`` and gives one FP32 output ``[-1, d]``, or follows the vLLM backend's
    (docs/openai.md). `restricted_apis` guards the groups ``inference`` (completions, chats, embeddings)
    and ``model-repository`` (the model list, loads and unloads); by default the rules of `app` apply
    here too. `api_key`, where given, is required of every request as ``Authorization: Bearer KEY``
    (a 401 otherwise). `max_body_size` bounds a request body (64 MiB, Triton's default, within the
    core's bound).
    """
    return OpenAIApp(app, restricted_apis=restricted_apis, api_key=api_key, max_body_size=max_body_size)
