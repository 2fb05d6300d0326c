"""The REST wire: an ASGI app that translates HTTP to the server core and back, by a table of routes on the
HTTP wires' router (`_http/routing.py`): the protocol's own, and those of Triton's extensions, from their
registry (`_core/extensions.py`)."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from starlette.types import Receive, Scope, Send

from .._core.extensions import MODEL, REGISTRY, Extension
from .._core.logs import follow_the_host
from .._core.request import DecodedRequest
from .._core.server import CoreOptions, ServerCore
from .._core.serving import ServedModel
from .._core.unsupported import unsupported
from .._declarations.errors import BadRequest, ClientDisconnected, NotFound, quoted
from .._declarations.model import ModelsArgument
from .._declarations.restricted import RestrictionsArgument, restrictions
from .._http.disconnect import answer_streamed, listen_when_asked
from .._http.headers import headers_named
from .._http.routing import Endpoint, Route, SendFailed, Table, WireApp
from .body import BodyReader
from .json_request import json_reason
from .request import read_request
from .responses import (
    EVENT_STREAM,
    JSON,
    OCTET_STREAM,
    SLICE,
    ResponseStream,
    choose_encoding,
    event,
    inference_response,
    send_error,
    send_json,
    send_response,
)
from .schemas import ModelControlRequest, RepositoryIndexRequest
from .settings import settings_endpoints
from .shared_memory import shared_memory_endpoints

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .openapi import OpenAPI

# Triton's generate extension, the OpenAPI document and model control are imported at their first request:
# a start pays only for the inference path (`import oip_asgi` counted in bench/instructions.py).

logger = logging.getLogger("oip_asgi")

DEFAULT_MAX_JSON_SIZE = 32 * 2**20

# The request headers inference reads; one pass over the scope's list collects them (`headers_named`).
_INFERENCE_HEADERS = frozenset(
    [b"content-length", b"content-encoding", b"inference-header-content-length", b"accept-encoding"]
)

Body = TypeVar("Body", bound=msgspec.Struct)


class AppOptions(CoreOptions, total=False):
    """`OIPApp`'s options, as `oip_app`, `mount` and the adapters pass them on: the core's, and REST's own."""

    max_json_size: int
    restricted_apis: RestrictionsArgument


class OIPApp(WireApp):
    """An ASGI app serving models over the Open Inference Protocol, relative to where it is mounted.

    Its `core` (the models, their lifecycle, statistics and the inference path) is what the gRPC
    half serves too.
    """

    def __init__(
        self,
        models: ModelsArgument | None = None,
        *,
        max_json_size: int = DEFAULT_MAX_JSON_SIZE,
        restricted_apis: RestrictionsArgument = (),
        **options: Unpack[CoreOptions],
    ) -> None:
        self.core = ServerCore({} if models is None else models, **options)
        self.max_json_size = min(max_json_size, self.core.max_body_size)
        self._seen_router = False  # the first request under a Starlette router has looked at how it mounts us
        # Tried in order, the most frequent request first; a model's metadata last, as its pattern takes any
        # /models/{name} (as in Triton, a model named "stats" has no metadata URL: that is every model's statistics).
        self.routes = [
            Route(MODEL + "/infer", self._infer, "inference", methods=["POST"], name="model_infer", front=True),
            Route("", self._server_metadata, "metadata", name="server_metadata"),
            Route("/health/live", self._live, "health", name="server_live"),
            Route("/health/ready", self._ready, "health", name="server_ready"),
            Route("/openapi.json", self._openapi_document, "metadata", name="openapi", trailing_slash=False),
            Route(MODEL + "/ready", self._model_ready, "health", name="model_ready"),
            *extension_routes(
                {
                    "model_generate": self._generate,
                    "model_generate_stream": self._generate_stream,
                    "model_config": self._model_config,
                    "model_statistics": self._statistics,
                    "repository_index": self._repository_index,
                    "repository_model_load": self._load_model,
                    "repository_model_unload": self._unload_model,
                    **shared_memory_endpoints(self.core, self._small_json),
                    **settings_endpoints(self.core, self._json_bytes),
                }
            ),
            Route(MODEL, self._model_metadata, "metadata", name="model_metadata"),
        ]
        self._openapi: OpenAPI | None = None  # made at its first request
        table = Table(
            self.routes,
            self.core,
            send_error=send_error,
            not_found=_no_such_path,
            restrictions=restrictions(restricted_apis),
            first_request=self._first_request,
        )
        super().__init__(table)

    async def load(self) -> None:
        """Load every model now (they load lazily on first use otherwise); failures show in readiness."""
        await self.core.load()

    def start_loading(self) -> None:
        """Load every model in the background: readiness answers at once, false until they have loaded."""
        self.core.start_loading()

    @contextlib.asynccontextmanager
    async def lifespan(self, host: object = None) -> AsyncIterator[None]:
        """Start and stop with the host's lifespan: ``FastAPI(lifespan=oip.lifespan)``, or inside your own::

            @contextlib.asynccontextmanager
            async def lifespan(app):
                async with oip.lifespan(app):
                    yield

        Entering loads every model (failures show in readiness) and makes a plain Starlette ``Mount`` of
        this app in `host` answer its own path (``GET /v2``, which it would redirect). Leaving stops
        serving: the requests in flight finish, then each model's ``unload`` (a Triton model's
        ``finalize``) runs, once, after every host of the app (a gRPC server started inside) has stopped.
        """
        async with self.core.hosted():
            if host is not None:
                self._answer_own_path(host)
            await self.load()
            yield

    def _answer_own_path(self, host: object) -> None:
        from .._http.mounting import answer_own_path, unanswered  # Starlette's routing: only for its hosts

        self._seen_router = True
        for path in answer_own_path(host, self):
            logger.debug("oip_asgi: the plain Mount at %s now answers GET %s itself (an OIPMount)", path, path)
        for path in unanswered(host, self):
            logger.warning(
                "oip_asgi: the Mount at %s has middleware, and Starlette answers its GET %s with a 307 redirect that "
                "protocol clients do not follow (tritonclient raises an empty InferenceServerException): mount with "
                "oip_asgi.mount(app, oip, path=%r), and put the middleware around the OIPApp",
                path,
                path,
                path,
            )

    def _first_request(self, scope: Scope) -> None:
        """What a host that ran none of our lifespans leaves to the first request: its logging, its mount."""
        follow_the_host()
        if not self._seen_router and "router" in scope:  # mounted in Starlette, without our lifespan
            self._first_under_router(scope["router"])

    def _first_under_router(self, router: object) -> None:
        from .._http.mounting import answer_own_path

        changed = answer_own_path(router, self)
        for path in changed:
            logger.warning(
                "oip_asgi: mounted with a plain Starlette Mount at %s, which answers GET %s (server metadata) with a "
                "307 redirect that protocol clients do not follow (tritonclient raises an empty "
                "InferenceServerException); it answers now, since this first request. To answer from the start, "
                "mount with oip_asgi.mount(app, oip, path=%r), or give the host lifespan=oip.lifespan",
                path,
                path,
                path,
            )
        self._answer_own_path(router)  # and a mount it could not change says so

    @property
    def ready(self) -> bool:
        return self.core.ready

    async def _server_metadata(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        await send_json(send, 200, self.core.server_metadata)

    async def _openapi_document(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        if self._openapi is None:
            from .openapi import OpenAPI

            self._openapi = OpenAPI(self.core, self.routes)
        await send_response(send, 200, [JSON], [self._openapi.render(scope.get("root_path", ""))])

    async def _live(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        await send_json(send, 200, {"live": True})

    async def _ready(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        ready = self.core.server_ready()
        await send_json(send, 200 if ready else 400, {"ready": ready})

    async def _statistics(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        name, version = match.groupdict().get("name"), match.groupdict().get("version")
        await send_json(send, 200, self.core.statistics(name, version))

    async def _model_ready(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        name, version = match.group("name", "version")
        ready = self.core.model_ready(name, version)
        await send_json(send, 200 if ready else 400, {"name": name, "ready": ready})

    async def _model_metadata(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        model = await self.core.model(*match.group("name", "version"))
        await send_json(send, 200, self.core.model_metadata(model))

    async def _model_config(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        model = await self.core.model(*match.group("name", "version"))
        await send_json(send, 200, self.core.model_config(model))

    async def _repository_index(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        request = await self._small_json(scope, receive, RepositoryIndexRequest)
        await send_json(send, 200, self.core.repository_index(ready=request.ready))

    async def _load_model(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        import base64
        import binascii

        from .._core.load_request import load_arguments

        name = match.group("name")
        request = await self._small_json(scope, receive, ModelControlRequest)
        parameters: dict[str, Any] = dict(request.parameters)
        for key, value in request.parameters.items():
            if key.startswith("file:"):  # REST carries a file's bytes as base64 text, as tritonclient sends them
                try:
                    parameters[key] = base64.b64decode(str(value), validate=True)
                except binascii.Error as exc:
                    raise BadRequest(
                        f"failed to load {quoted(name)}: parameter {quoted(key)} is not base64: {exc}"
                    ) from None
        config, files = load_arguments(name, parameters)
        await self.core.load_model(name, config=config, files=files)
        await send_response(send, 200, [JSON], [b""])

    async def _unload_model(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        from .._core.load_request import unload_dependents

        request = await self._small_json(scope, receive, ModelControlRequest)
        await self.core.unload_model(match.group("name"), unload_dependents=unload_dependents(request.parameters))
        await send_response(send, 200, [JSON], [b""])

    def _json_body(self, scope: Scope, receive: Receive) -> BodyReader:
        """The reader of a request's JSON body, within the JSON size limit."""
        headers = headers_named(scope, _INFERENCE_HEADERS)
        return BodyReader(
            receive,
            limit=self.max_json_size,
            content_length=_length_header(headers, b"content-length"),
            content_encoding=headers.get(b"content-encoding"),
        )

    async def _json_bytes(self, scope: Scope, receive: Receive) -> bytes:
        return bytes(await self._json_body(scope, receive).read_rest())

    async def _small_json(self, scope: Scope, receive: Receive, kind: type[Body]) -> Body:
        """A control request's JSON body (an empty body is the defaults), within the JSON size limit."""
        body = await self._json_body(scope, receive).read_rest()
        if not bytes(body).strip():
            return kind()
        try:
            return msgspec.json.decode(body, type=kind)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise BadRequest(f"malformed request JSON: {json_reason(exc, body)}") from None

    # The endpoints that answer through the core are plain functions handing back its coroutine: one
    # coroutine frame fewer a request.

    def _infer(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> Awaitable[object]:
        name, version = match.group("name", "version")
        return self.core.infer(name, version, _RESTExchange(self, scope, receive, send))

    def _generate(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> Awaitable[None]:
        return self._answer_generate(scope, receive, send, match, streaming=False)

    def _generate_stream(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> Awaitable[None]:
        return self._answer_generate(scope, receive, send, match, streaming=True)

    def _answer_generate(
        self, scope: Scope, receive: Receive, send: Send, match: re.Match[str], *, streaming: bool
    ) -> Awaitable[None]:
        from .generate_exchange import GenerateExchange

        exchange = GenerateExchange(self._json_body(scope, receive), receive, send, streaming=streaming)
        name, version = match.group("name", "version")
        # An error found before the model ran (or on /generate) is a JSON error body with its status.
        return answer_streamed(self.core, name, version, exchange, f"POST {scope.get('path')}")


class _RESTExchange:
    """An inference request on HTTP: its body read as it streams in; its one response sent in slices,
    or its several responses as server-sent events, each the JSON of one response."""

    __slots__ = ("_app", "_headers", "_reader", "_receive", "_send", "_stream", "responses", "sent")
    endpoint = "HTTP end point"

    def __init__(self, app: OIPApp, scope: Scope, receive: Receive, send: Send) -> None:
        self._app = app
        headers: dict[bytes, str] = {}  # `headers_named`, inline: one pass over the headers, no call
        for key, value in scope["headers"]:
            key = key.lower()
            if key in _INFERENCE_HEADERS and key not in headers:
                headers[key] = value.decode("latin-1")
        self._headers = headers
        self._receive = receive
        self._send = send
        self._reader: BodyReader | None = None
        self._stream: ResponseStream | None = None
        self.sent = self.responses = 0

    @property
    def received(self) -> int:
        return 0 if self._reader is None else self._reader.received

    def decode(self, model: ServedModel) -> Awaitable[DecodedRequest]:
        # A plain function handing back read_request's coroutine: one coroutine frame fewer a request.
        headers, core = self._headers, self._app.core
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and length.isascii():  # the usual header: no call to check it
            content_length: int | None = int(length)
        else:
            content_length = _length_header(headers, b"content-length")
        self._reader = reader = BodyReader(
            self._receive,
            limit=core.max_body_size,
            content_length=content_length,
            content_encoding=headers.get(b"content-encoding"),
        )
        header_length = None
        if b"inference-header-content-length" in headers:  # a JSON body has none: no call for it
            header_length = _length_header(headers, b"inference-header-content-length")
        # A request whose model may ask whether its client has left (a Triton model's is_cancelled()).
        watch = listen_when_asked(self._receive) if model.takes_requests else None
        return read_request(
            reader, header_length, model, core.shared_memory, max_header_size=self._app.max_json_size, watch=watch
        )

    # The reply's JSON header and binary parts: `inference_response` itself, no method between.
    encode = staticmethod(inference_response)

    async def send(self, response: tuple[bytes, list[bytes | memoryview]]) -> None:
        header, binary = response
        accepted = self._headers.get(b"accept-encoding")
        if not binary and not accepted and len(header) <= SLICE:
            # The usual reply, JSON in one message: `send_response`'s common case, written out.
            length = len(header)
            try:
                send = self._send
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [JSON, (b"content-length", b"%d" % length)],
                    }
                )
                await send({"type": "http.response.body", "body": header})
            except OSError as exc:
                raise ClientDisconnected from exc
            except Exception as exc:
                raise SendFailed from exc
            self.sent, self.responses = length, 1
            return
        headers = [OCTET_STREAM, (b"inference-header-content-length", str(len(header)).encode())] if binary else [JSON]
        encoding = choose_encoding(accepted) if accepted else None
        self.sent = await send_response(self._send, 200, headers, [header, *binary], encoding=encoding)
        self.responses = 1

    async def start(self) -> None:
        # Uncompressed: an event must reach the client when it is sent, not when a compressor's block fills.
        self._stream = ResponseStream(self._send)
        await self._stream.start(200, [EVENT_STREAM, (b"cache-control", b"no-cache")])

    async def send_next(self, response: tuple[bytes, list[bytes | memoryview]]) -> None:
        assert self._stream is not None, "send_next before start"
        header, binary = response
        if binary:  # the event is text: its tensors can only be JSON
            raise BadRequest("binary outputs cannot be sent as server-sent events; ask for their data as JSON")
        await self._stream.send(event(header))
        self.sent, self.responses = self._stream.sent, self.responses + 1

    async def finish(self) -> None:
        assert self._stream is not None, "finish before start"
        await self._stream.finish()


def extension_routes(endpoints: Mapping[str, Endpoint]) -> list[Route]:
    """The routes of Triton's extensions, from their registry: a path calls the endpoint of its operation; the
    paths of one not offered that name none answer that it is not, and what to do instead."""
    return [
        Route(
            path.pattern,
            endpoints[path.operation] if path.operation else _refusing(extension),
            extension.group,
            methods=path.methods,
            name=path.operation or extension.name,
        )
        for extension in REGISTRY
        for path in extension.paths
    ]


def _refusing(extension: Extension) -> Endpoint:
    async def refuse(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        raise unsupported(extension.group, extension.name)  # a new error each call: a raised one keeps its traceback

    return refuse


def _no_such_path(scope: Scope, path: str) -> NotFound:
    full = scope.get("root_path", "") + path
    return NotFound(f"no such path {full!r}; see the Open Inference Protocol for the endpoints")


def _length_header(headers: dict[bytes, str], name: bytes) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit()):  # isdigit alone accepts "²", which int() refuses
        raise BadRequest(f"{name.decode().title()} must be a non-negative integer, got {value!r}")
    return int(text)


def oip_app(models: ModelsArgument | None = None, **options: Unpack[AppOptions]) -> OIPApp:
    """The Open Inference Protocol for `models` as an ASGI app; mount it at ``/v2``.

    `models` maps each name to a `Model`, a bare callable, or a list of `Model` versions.
    `model_repository` serves a directory laid out as Triton's model repository as well (a path, or a
    `ModelRepository` that says how: its model-control mode, the models to load): its models can be
    listed, loaded, unloaded and reloaded while the app serves (docs/repository.md).
    `max_body_size` bounds a request body (after decompression); `max_json_size` bounds its JSON part.
    Sync models run on at most `max_threads` worker threads (started on demand; 40 by default).
    `metrics=True` registers Triton-named Prometheus metrics of these models in prometheus_client's
    default registry (or in the `CollectorRegistry` given); the host serves them where it wants.
    `tracing=True` makes an OpenTelemetry span of each request (model, version, batch size, Triton's
    timestamps); a mapping of Triton's ``--trace-config`` settings (``{"level": "TIMESTAMPS", "rate": 100}``)
    samples them, and Triton's trace extension changes that while the app serves (docs/observability.md);
    `access_log=True` logs a line per inference to the ``oip_asgi.access`` logger.
    `restricted_apis` serves groups of endpoints only to requests that carry a header, as Triton's
    ``--http-restricted-api``: rules such as ``"model-repository,statistics:admin-key=secret"``, or a
    mapping ``{"model-repository": ("admin-key", "secret")}`` (docs/security.md).
    `strict_readiness=False` (Triton's ``--strict-readiness=false``) makes ``/v2/health/ready`` true once the
    models' loads at start have ended, even where some failed (each model's own readiness tells which);
    by default, as Triton's, it is true only while every model serves.
    `freeze_heap=True` freezes what survives a collection once the models have loaded (the lifespan's
    start, or `load()`) out of later full ones (`gc.freeze`, process-wide: the serve command does it, a
    mounted app only when asked), whose pauses over a large loaded heap were most of a busy server's p99
    (docs/benchmarks.md).
    `expose_errors=False` keeps the text of a model's own exceptions out of responses: the client gets
    an error id that matches the line in the ``oip_asgi`` log holding the message and traceback.
    """
    return OIPApp(models, **options)


def as_oip_app(models: ModelsArgument | OIPApp, **options: Unpack[AppOptions]) -> OIPApp:
    """`models` when it is already an app (options then belong to that app's construction), else a new one."""
    if isinstance(models, OIPApp):
        if options:
            raise TypeError(f"options {sorted(options)} go to oip_app(models), not beside an OIPApp already built")
        return models
    return OIPApp(models, **options)
