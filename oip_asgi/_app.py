"""The ASGI application: routing, health, metadata, inference, lifespan."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import anyio
from starlette.types import Message, Receive, Scope, Send

from ._body import BodyReader
from ._errors import BadRequest, ClientDisconnected, MethodNotAllowed, NotFound, OIPError
from ._inference import DecodedRequest, OutputTensor, model_outputs
from ._logging import show_unless_configured
from ._models import Model, ModelRepository, ModelsArgument, TensorSpec
from ._openapi import OpenAPI
from ._paths import route_path
from ._responses import choose_encoding, inference_response, send_body, send_error, send_inference, send_json
from ._rest_request import read_request
from ._schemas import ModelMetadata, ServerMetadata, TensorMetadata
from ._statistics import RequestTimes, now
from ._tracing import tracer
from ._version import __version__
from ._workers import DEFAULT_MAX_THREADS, WorkerPool

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from typing_extensions import Unpack

logger = logging.getLogger("oip_asgi")
Encoded = TypeVar("Encoded")
access_logger = logging.getLogger("oip_asgi.access")

EXTENSIONS = ["binary_tensor_data", "classification", "statistics"]
DEFAULT_MAX_BODY_SIZE = 128 * 2**20
DEFAULT_MAX_JSON_SIZE = 32 * 2**20

_MODEL_PATH = re.compile(r"/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?(?P<action>/ready|/infer|/stats)?/?")


# The request headers inference reads; one pass over the scope's list collects them.
_INFERENCE_HEADERS = frozenset(
    [b"content-length", b"content-encoding", b"inference-header-content-length", b"accept-encoding"]
)


def _inference_headers(scope: Scope) -> dict[bytes, str]:
    found: dict[bytes, str] = {}
    for key, value in scope["headers"]:
        key = key.lower()
        if key in _INFERENCE_HEADERS and key not in found:  # the first of repeated headers counts
            found[key] = value.decode("latin-1")
    return found


def _length_header(headers: dict[bytes, str], name: bytes) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit()):  # isdigit alone accepts "²", which int() refuses
        raise BadRequest(f"{name.decode().title()} must be a non-negative integer, got {value!r}")
    return int(text)


class AppOptions(TypedDict, total=False):
    """`OIPApp`'s options, as `oip_app`, `mount` and the adapters pass them on."""

    name: str
    max_body_size: int
    max_json_size: int
    expose_errors: bool
    max_threads: int
    metrics: bool | CollectorRegistry
    tracing: bool
    access_log: bool


class OIPApp:
    """An ASGI app serving models over the Open Inference Protocol, relative to where it is mounted."""

    def __init__(
        self,
        models: ModelsArgument,
        *,
        name: str = "oip-asgi",
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        max_json_size: int = DEFAULT_MAX_JSON_SIZE,
        expose_errors: bool = True,
        max_threads: int = DEFAULT_MAX_THREADS,
        metrics: bool | CollectorRegistry = False,
        tracing: bool = False,
        access_log: bool = False,
    ) -> None:
        self.pool = WorkerPool(max_threads)  # the threads this app's sync models run on
        self.repository = ModelRepository(models, self.pool)
        self.max_body_size = max_body_size
        self.max_json_size = min(max_json_size, max_body_size)
        self.expose_errors = expose_errors
        self._loading: asyncio.Task[None] | None = None
        self._server_metadata = ServerMetadata(name=name, version=__version__, extensions=EXTENSIONS)
        self._openapi = OpenAPI(self._server_metadata, self.repository)
        self._tracer = tracer() if tracing else None
        self.access_log = access_log
        if access_log:
            show_unless_configured(access_logger)  # plain uvicorn gives no handler that would print its lines
        if metrics is not False:
            # prometheus_client is the `metrics` extra: imported only by the apps that ask for it.
            from ._metrics import register

            register(self.repository.all, metrics)

    async def load(self) -> None:
        """Load every model now (they load lazily on first use otherwise); failures show in readiness."""
        async with anyio.create_task_group() as group:
            for model in self.repository.all():
                group.start_soon(model.load)

    def start_loading(self) -> None:
        """Load every model in the background: readiness answers at once, false until they have loaded."""
        loop = asyncio.get_running_loop()
        if self._loading is None or self._loading.get_loop() is not loop:  # a task of a closed loop never ends
            self._loading = loop.create_task(self.load())

    @property
    def ready(self) -> bool:
        return all(model.ready for model in self.repository.all())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets are not part of the protocol; refusing the handshake closes them
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = True
            try:
                await send(message)
            except OSError as exc:  # ASGI: send on a closed connection raises an OSError subclass
                raise ClientDisconnected from exc

        try:
            await self._dispatch(scope, receive, tracking_send)
        except OIPError as error:
            if not started:
                await send_error(send, error.public(self.expose_errors))
        except ClientDisconnected:
            pass
        except Exception:
            logger.exception("unhandled error serving %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await send_error(send, OIPError("internal server error; see the server log"))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # The server binds its port once startup completes: loading goes on behind readiness.
                self.start_loading()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._loading is not None:
                    self._loading.cancel()
                self.pool.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = route_path(scope)
        method = scope["method"]
        if path in ("", "/"):
            _allow(method, "GET")
            await send_json(send, 200, self._server_metadata)
        elif path == "/openapi.json":
            _allow(method, "GET")
            await send_body(send, 200, self._openapi.render(scope.get("root_path", "")))
        elif path == "/health/live":
            _allow(method, "GET")
            await send_json(send, 200, {"live": True})
        elif path == "/health/ready":
            _allow(method, "GET")
            ready = self.ready
            if not ready:
                self.start_loading()  # a probe never waits on a load: it answers, and loading goes on
            await send_json(send, 200 if ready else 400, {"ready": ready})
        elif path == "/models/stats":  # every model's; as in Triton, a model named "stats" has no metadata URL
            _allow(method, "GET")
            await send_json(send, 200, self.statistics())
        elif match := _MODEL_PATH.fullmatch(path):
            name, version, action = match.group("name", "version", "action")
            if action == "/stats":
                _allow(method, "GET")
                await send_json(send, 200, self.statistics(name, version))
                return
            model = self.repository.get(name, version)
            if action == "/infer":
                _allow(method, "POST")
                await self._infer(scope, receive, send, model)
            elif action == "/ready":
                _allow(method, "GET")
                if not model.ready:
                    self.start_loading()
                await send_json(send, 200 if model.ready else 400, {"name": name, "ready": model.ready})
            else:
                _allow(method, "GET")
                await send_json(send, 200, self.model_metadata(model))
        else:
            full = scope.get("root_path", "") + path
            raise NotFound(f"no such path {full!r}; see the Open Inference Protocol for the endpoints")

    def statistics(self, name: str | None = None, version: str | None = None) -> dict[str, Any]:
        """Triton's statistics response: every model's, a model's versions', or one version's."""
        if name is None:
            models = self.repository.all()
        elif version is None:
            models = [
                self.repository.get(name, known) for known in self.repository.versions(self.repository.get(name).name)
            ]
        else:
            models = [self.repository.get(name, version)]
        return {"model_stats": [model.statistics.as_json(model.name, model.version) for model in models]}

    @property
    def server_metadata(self) -> ServerMetadata:
        """The server's name, version and extensions, as every wire tells them."""
        return self._server_metadata

    def model_metadata(self, model: Model) -> ModelMetadata:
        """`model`'s metadata (name, versions, platform, tensors, properties), as every wire tells it."""

        def tensors(specs: tuple[TensorSpec, ...] | None) -> list[TensorMetadata]:
            return [TensorMetadata(spec.name, spec.datatype, list(spec.shape)) for spec in specs or ()]

        return ModelMetadata(
            name=model.name,
            versions=self.repository.versions(model.name),
            platform=model.platform,
            inputs=tensors(model.inputs),
            outputs=tensors(model.outputs),
            properties=model.properties,
        )

    async def _infer(self, scope: Scope, receive: Receive, send: Send, model: Model) -> None:
        if not model.ready:
            await model.ensure_ready()
        headers = _inference_headers(scope)
        reader = BodyReader(
            receive,
            limit=self.max_body_size,
            content_length=_length_header(headers, b"content-length"),
            content_encoding=headers.get(b"content-encoding"),
        )
        header_length = _length_header(headers, b"inference-header-content-length")
        times = RequestTimes(start=now())
        status, size = 500, 0
        try:
            request = await read_request(reader, header_length, model, max_header_size=self.max_json_size)
            times.decoded = now()
            header, binary = await self.infer(
                model,
                request,
                times,
                lambda outputs, parameters: inference_response(model, request, outputs, parameters),
            )
            size = len(header) + sum(map(len, binary))
            await send_inference(send, header, binary, choose_encoding(headers.get(b"accept-encoding")))
            status = 200
        except OIPError as error:
            status = error.status_code
            raise
        except ClientDisconnected:
            status = 499  # as nginx logs a client that left
            raise
        finally:
            if self.access_log:
                _log_access(model, status, reader.received, size, times)

    async def infer(
        self,
        model: Model,
        request: DecodedRequest,
        times: RequestTimes,
        encode: Callable[[list[OutputTensor], dict[str, Any] | None], Encoded],
    ) -> Encoded:
        """`model` on a decoded request, its outputs built and then encoded by the wire's `encode`,
        all of it counted in the model's statistics: what every front end runs."""
        try:
            result = await self.call(model, request, times)
            returned = now()
            times.returned = True
            encoded = encode(*model_outputs(model, request, result))
        except OIPError:
            if times.called:  # the model ran, or was about to: its failure, counted once
                model.statistics.failed(times, now())
            raise
        built = now()
        times.output = built - returned
        model.statistics.succeeded(times, built)
        return encoded

    async def call(self, model: Model, request: DecodedRequest, times: RequestTimes) -> Any:
        """`model` on a decoded request, traced when tracing is on: what every front end calls."""
        if self._tracer is None:
            return await model(request.inputs, request.parameters, times)
        attributes = {"oip.model.name": model.name, "oip.model.version": model.version}
        with self._tracer.start_as_current_span(f"oip.model {model.name}", attributes=attributes) as span:
            result = await model(request.inputs, request.parameters, times)
            span.set_attribute("oip.batch_size", times.batch_size)
            return result


def _log_access(model: Model, status: int, received: int, sent: int, times: RequestTimes) -> None:
    """One line per inference, for deployments without metrics: durations in microseconds."""
    input_us = (times.decoded - times.start) // 1000 if times.decoded else 0
    access_logger.info(
        "model=%s version=%s status=%d bytes_in=%d bytes_out=%d queue_us=%d compute_input_us=%d "
        "compute_infer_us=%d compute_output_us=%d total_us=%d",
        model.name,
        model.version,
        status,
        received,
        sent,
        (times.started - times.submitted) // 1000,
        input_us,
        (times.ended - times.started) // 1000,
        times.output // 1000,
        (now() - times.start) // 1000,
    )


def _allow(method: str, allowed: str) -> None:
    if method != allowed:
        raise MethodNotAllowed(f"method {method} is not allowed here; use {allowed}", allow=allowed)


def oip_app(models: ModelsArgument, **options: Unpack[AppOptions]) -> OIPApp:
    """The Open Inference Protocol for `models` as an ASGI app; mount it at ``/v2``.

    `models` maps each name to a `Model`, a bare callable, or a list of `Model` versions.
    `max_body_size` bounds a request body (after decompression); `max_json_size` bounds its JSON part.
    Sync models run on at most `max_threads` worker threads (started on demand; 40 by default).
    `metrics=True` registers Triton-named Prometheus metrics of these models in prometheus_client's
    default registry (or in the `CollectorRegistry` given); the host serves them where it wants.
    `tracing=True` makes an OpenTelemetry span of each model call (model, version, batch size);
    `access_log=True` logs a line per inference to the ``oip_asgi.access`` logger.
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
