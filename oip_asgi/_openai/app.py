"""The OpenAI-compatible API as an ASGI app over the same served models as an `OIPApp` (one `ServerCore`).

Mounted where a host likes (``/v1`` by convention), it answers ``GET /models``, ``GET /models/{id}``,
``POST /completions``, ``POST /chat/completions`` and ``POST /embeddings`` below that point, every error
as OpenAI's error object. A request names its model by its served name; the newest version answers.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Mapping
from typing import Any

from starlette.types import Receive, Scope, Send

from .._core.responding import Exchange
from .._core.server import HasCore, ServerCore, core_of
from .._core.serving import ServedModel
from .._core.statistics import RequestTimes
from .._declarations.errors import NotFound
from .._declarations.restricted import Restriction, RestrictionsArgument, restrictions
from .._http.disconnect import answer_streamed
from .._http.routing import Route, Table, WireApp
from .errors import UnknownModel, UnknownPath
from .exchange import EmbeddingExchange, TextExchange, embedding_convention
from .http import read_body, send_body, send_error
from .schemas import chat_decoder, completion_decoder, embedding_decoder, encoder
from .texts import decoded

# A body larger than this is no chat: REST's bound on a JSON body, and no more than the core's bound.
MAX_JSON_SIZE = 32 * 2**20


class OpenAIApp(WireApp):
    """OpenAI's API over the models an `OIPApp` (or a `ServerCore`) serves; see `openai_app`."""

    def __init__(self, app: HasCore | ServerCore, *, restricted_apis: RestrictionsArgument | None = None) -> None:
        self.core = core_of(app)
        # The groups the protocol's app restricts guard the same models here, unless told otherwise.
        inherited: Mapping[str, Restriction] = getattr(app, "restrictions", {})
        rules = dict(inherited) if restricted_apis is None else restrictions(restricted_apis)
        self.max_body_size = min(MAX_JSON_SIZE, self.core.max_body_size)
        self.created = int(time.time())  # a model's `created`: when this server began serving it, near enough
        # Triton's API groups, as its OpenAI frontend has them: listing models is the repository's.
        self.routes = [
            Route("/chat/completions", self._chat, "inference", methods=["POST"], name="chat"),
            Route("/completions", self._completion, "inference", methods=["POST"], name="completion"),
            Route("/embeddings", self._embeddings, "inference", methods=["POST"], name="embeddings"),
            Route("/models", self._models, "model-repository", name="models"),
            Route("/models/{id:path}", self._model, "model-repository", name="model"),
        ]
        super().__init__(
            Table(self.routes, self.core, send_error=send_error, not_found=_invalid_url, restrictions=rules)
        )

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

    # Plain functions handing back the coroutine that answers: one coroutine frame fewer a request.

    def _completion(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> Awaitable[None]:
        return self._text(scope, receive, send, completion_decoder)

    def _chat(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> Awaitable[None]:
        return self._text(scope, receive, send, chat_decoder)

    async def _text(self, scope: Scope, receive: Receive, send: Send, decoder: Any) -> None:
        body = await read_body(scope, receive, self.max_body_size)
        request = decoded(decoder, body)
        exchange = TextExchange(request, send, receive, received=len(body), created=int(time.time()))
        try:
            await answer_streamed(self.core, request.model, None, exchange, f"POST {scope.get('path')}")
        except NotFound as exc:  # raised before the stream started: the error object with its status
            raise self._not_found(exc, request.model) from None

    async def _embeddings(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        body = await read_body(scope, receive, self.max_body_size)
        request = decoded(embedding_decoder, body)
        exchange = EmbeddingExchange(request, send, received=len(body))
        try:
            await self.core.infer(request.model, None, exchange, self._embedding)
        except NotFound as exc:
            raise self._not_found(exc, request.model) from None

    async def _embedding(self, model: ServedModel, exchange: Exchange[bytes], times: RequestTimes) -> bytes:
        """The unary body, for a model of the embedding convention only: one that is not says what it lacks
        (the unary body's own refusal of a decoupled model would name no convention)."""
        embedding_convention(model)
        return await self.core.respond.once(model, exchange, times)


def _invalid_url(scope: Scope, path: str) -> UnknownPath:
    full = scope.get("root_path", "") + path
    return UnknownPath(f"Invalid URL ({scope['method']} {full}): this server answers /models, /completions, "
                       "/chat/completions and /embeddings")  # fmt: skip


def openai_app(app: HasCore | ServerCore, *, restricted_apis: RestrictionsArgument | None = None) -> OpenAIApp:
    """OpenAI's API (``/models``, ``/completions``, ``/chat/completions``, ``/embeddings``) over the models
    that `app` (an `OIPApp`, from `oip_app`) serves, as an ASGI app to mount at ``/v1``.

    Both apps serve the same models, with the same loads, statistics and worker threads. A model is
    usable for text when it follows the LLM convention (Triton's vLLM-backend inputs and outputs:
    ``text_input`` in, ``text_output`` out; a generator streams), for embeddings when it takes one
    BYTES input ``[-1]`` and gives one FP32 output ``[-1, d]`` (docs/openai.md). `restricted_apis`
    guards the groups ``inference`` (completions, chats, embeddings) and ``model-repository`` (the
    model list); by default the rules of `app` apply here too.
    """
    return OpenAIApp(app, restricted_apis=restricted_apis)
