"""The server core, under every wire: the models' repository and lifecycle, metadata, statistics, and
the one inference path.

A wire (REST, gRPC) only translates: it hands `ServerCore.infer` an `Exchange` that decodes its
request into a `DecodedRequest`, encodes the outputs, and sends the response (or several). The
core's per-request shell looks the model up, waits for it to be ready, times the request, logs it
and tells a client that left; its body calls the model (queued or batched), builds and checks its
outputs and counts the statistics, the same way for every wire. Models
can be put and removed while serving: a new version serves once it has loaded, and a removed one
lets the requests that hold it finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar

import anyio

from .._declarations.errors import (
    BadRequest,
    ClientDisconnected,
    ModelError,
    ModelNotReady,
    NotFound,
    OIPError,
    answer,
    quoted,
)
from .._declarations.model import Model, ModelsArgument, Outputs, checked_models, declared_versions
from .._declarations.model_repository import ModelRepository
from .._declarations.spec import TensorSpec
from .._version import __version__
from . import heap, life
from .extensions import EXTENSIONS
from .inference import OutputTensor, model_outputs
from .logs import follow_the_host, show_unless_configured
from .metadata import ModelMetadata, ServerMetadata, TensorMetadata
from .model_config import model_config
from .request import DecodedRequest
from .served import ServedModels
from .serving import ServedModel, error_id
from .statistics import RequestTimes, now
from .streaming import END
from .tracing import tracer
from .workers import DEFAULT_MAX_THREADS, Escaped, WorkerPool

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .control import ModelControl

logger = logging.getLogger("oip_asgi")
access_logger = logging.getLogger("oip_asgi.access")

DEFAULT_MAX_BODY_SIZE = 128 * 2**20
CLIENT_LEFT = 499  # as nginx logs a client that went away

Response = TypeVar("Response")


class Exchange(Protocol[Response]):
    """One inference request as a wire carries it: what the core asks of the wire.

    A request is answered once: with its one response, sent whole by `send`, or with several sent as
    they come (`start`, `send_next` for each, `finish`), which is what a streaming body uses.
    """

    @property
    def endpoint(self) -> str:
        """What serves the request, as Triton names it when it refuses a decoupled model ("HTTP end point")."""

    @property
    def received(self) -> int:
        """The request's bytes read so far."""

    @property
    def sent(self) -> int:
        """The response bytes sent so far."""

    @property
    def responses(self) -> int:
        """The responses sent so far."""

    def decode(self, model: ServedModel) -> Awaitable[DecodedRequest]:
        """The request, checked against `model` and decoded into arrays."""

    def encode(
        self,
        model: ServedModel,
        request: DecodedRequest,
        outputs: list[OutputTensor],
        parameters: dict[str, Any] | None,
    ) -> Response:
        """A response to `request`: its outputs and parameters in the wire's form."""

    async def send(self, response: Response) -> None:
        """Send `response` as the request's one answer, whole (or leave that to the wire's server)."""

    async def start(self) -> None:
        """Begin an answer of several responses (REST: its status and headers)."""

    async def send_next(self, response: Response) -> None:
        """Send one response of the answer begun, at once; it returns once the wire has taken it."""

    async def finish(self) -> None:
        """End the answer begun: no response follows."""


# What answers a request once the shell has found its model ready: it decodes the request, calls
# the model, and sends through the exchange what the wire hands back (today one response; a
# streaming body, one per value the model yields). It counts the model's statistics.
Body = Callable[[ServedModel, Exchange[Response], RequestTimes], Awaitable[Response]]


class CoreOptions(TypedDict, total=False):
    """`ServerCore`'s options, as `oip_app` and the REST app pass them on."""

    name: str
    max_body_size: int
    expose_errors: bool
    max_threads: int
    metrics: bool | CollectorRegistry
    tracing: bool
    access_log: bool
    model_repository: ModelRepository | str | os.PathLike[str] | None
    load_switch_interval: float | None
    strict_readiness: bool
    freeze_heap: bool


class DecoupledUnsupported(OIPError, status_code=501, grpc_code="UNIMPLEMENTED"):
    """A decoupled model asked for one response, where the wire carries no more (REST's /infer, ModelInfer)."""


class NoRepository(OIPError, status_code=404, grpc_code="UNIMPLEMENTED"):
    """The repository extension asked of a server with no model repository."""


class ServerCore:
    """Models served by name and version, whatever the wire: built by `oip_app`, used by REST and gRPC."""

    def __init__(
        self,
        models: ModelsArgument,
        *,
        name: str = "oip-asgi",
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        expose_errors: bool = True,
        max_threads: int = DEFAULT_MAX_THREADS,
        metrics: bool | CollectorRegistry = False,
        tracing: bool = False,
        access_log: bool = False,
        model_repository: ModelRepository | str | os.PathLike[str] | None = None,
        load_switch_interval: float | None = None,
        strict_readiness: bool = True,
        freeze_heap: bool = False,
    ) -> None:
        self.pool = WorkerPool(max_threads)  # the threads this server's sync models run on
        self.served = ServedModels()
        for model_name, entry in checked_models(models).items():
            self.served.put(model_name, self._served(model_name, declared_versions(model_name, entry)))
        # The names served from code: a model repository's folder of one of these names is refused.
        self.code_models = frozenset(self.served.names())
        self.max_body_size = max_body_size  # the largest request, on any wire
        self.expose_errors = expose_errors
        self.strict_readiness = strict_readiness
        # The heap after loads kept out of the garbage collector's full passes (heap.py): process-wide, so
        # only when asked (the serve command, which owns its process, does).
        self.freeze_heap = freeze_heap
        self._heap = heap.Settler()
        self.access_log = access_log
        follow_the_host()  # the server's own lines (loads, errors) where the host's are, at its level
        if access_log:
            show_unless_configured(access_logger)  # plain uvicorn gives no handler that would print its lines
        # A model repository's models come and go; the models given here stay as they are.
        self.control: ModelControl | None = None
        if model_repository is not None:
            # The repository's reader is imported by the apps that serve one: no cost of every start.
            from .control import ModelControl
            from .python_host import TritonHost

            registry = None
            if metrics is not False:
                from prometheus_client.core import REGISTRY

                registry = REGISTRY if metrics is True else metrics
            self.control = ModelControl(
                self,
                model_repository,
                load_switch_interval=load_switch_interval,
                python_host=TritonHost(self, registry),
            )
        extensions = sorted([*EXTENSIONS, "model_repository"]) if self.control is not None else list(EXTENSIONS)
        self.server_metadata = ServerMetadata(name=name, version=__version__, extensions=extensions)
        self._tracer = tracer() if tracing else None
        self._loading: asyncio.Task[None] | None = None
        self._hosts = 0  # the lifespans and gRPC servers serving the core now (`hosted`)
        self._announced: weakref.WeakSet[ServedModel] = weakref.WeakSet()  # the versions from code logged as loaded
        if metrics is not False:
            # prometheus_client is the `metrics` extra: imported only by the servers that ask for it.
            from .metrics import register

            register(self.served.all, metrics)

    def _served(self, name: str, versions: Sequence[Model], config: dict[str, Any] | None = None) -> list[ServedModel]:
        return [ServedModel(name, model, self.pool, config) for model in versions]

    # The lifecycle

    async def load(self) -> None:
        """Load every model now (they load lazily on first use otherwise); failures show in readiness."""
        follow_the_host()  # at startup: a host that configures its logging after building the app has now
        async with anyio.create_task_group() as group:
            for model in self.served.all():
                group.start_soon(self._load_logged, model)
            if self.control is not None:
                group.start_soon(self.control.started)
        if self.freeze_heap:
            self._heap.settle()

    async def _load_logged(self, model: ServedModel) -> None:
        since = life.clock()
        await model.load()
        if model.ready and model not in self._announced:  # once, however often `load` runs
            self._announced.add(model)
            life.loaded(model.name, model.version, since)

    def start_loading(self) -> None:
        """Load every model in the background: readiness answers at once, false until they have loaded."""
        loop = asyncio.get_running_loop()
        if self._loading is None or self._loading.get_loop() is not loop:  # a task of a closed loop never ends
            self._loading = loop.create_task(self.load())

    @contextlib.asynccontextmanager
    async def hosted(self) -> AsyncIterator[None]:
        """While a host serves the core (an ASGI lifespan, a host's lifespan, a gRPC server): the last of
        them to leave closes it, so that hosts nested in one another (gRPC inside a host's lifespan, the
        serve command's) run each model's ``unload`` once, after every one of them has stopped."""
        self._hosts += 1
        try:
            yield
        finally:
            self._hosts -= 1
            if self._hosts == 0:
                await self.close()

    def shutdown(self) -> None:
        """Stop loading and polling, and the worker threads; the models' ``unload`` steps do not run (`close`)."""
        self._stop_background()
        self.pool.shutdown()

    async def close(self) -> None:
        """Shut down once every version has stopped serving (its requests in flight finished) and run its
        ``unload`` step. The models from code are served again, not loaded, for a later start."""
        self._stop_background()  # no load or poll may put a model back while they retire
        async with anyio.create_task_group() as group:
            for name in self.served.names():
                group.start_soon(self._retire, name)
        self.pool.shutdown()

    def _stop_background(self) -> None:
        self._heap.cancel()
        if self._loading is not None:
            self._loading.cancel()
            self._loading = None
        if self.control is not None:
            self.control.stop()

    async def _retire(self, name: str) -> None:
        async with self.served.locks.hold(name):
            if name not in self.served:
                return
            if name in self.code_models:
                serving = [self.served.get(name, version) for version in self.served.versions(name)]
                fresh = [ServedModel(name, model.model, self.pool, model.config) for model in serving]
                await _unload(self.served.put(name, fresh))
            else:
                await _unload(self.served.pop(name))

    @property
    def ready(self) -> bool:
        """Every model serves; or, without `strict_readiness`, the start-up loads have ended, whatever came of
        them (Triton's ``--strict-readiness=false``: a model that failed to load leaves the server ready)."""
        if self.strict_readiness:
            if self.control is not None and not self.control.ready:
                return False
            return all(model.ready for model in self.served.all())
        if self.control is not None and not self.control.has_started:
            return False
        return all(model.state != "LOADING" for model in self.served.all())

    async def put_model(
        self,
        name: str,
        entry: Model | Callable[..., Any] | Sequence[Model],
        *,
        config: dict[str, Any] | None = None,
        since: float | None = None,
    ) -> None:
        """Serve `entry` as `name` once every version of it has loaded, in place of what `name` served.

        Until then the versions served before go on serving; requests that hold them when they are
        replaced finish on them. A version that fails to load leaves `name` as it was, and raises
        `ModelNotReady` with the reason. `config` is the model's Triton configuration, where one was
        read with it (a model repository's config.pbtxt); the configuration extension answers it. The log
        tells each version loaded, and how long it took since `since` (a `life.clock` reading; now by default).
        """
        since = life.clock() if since is None else since
        versions = self._served(name, declared_versions(name, entry), config)
        async with self.served.locks.hold(name):
            async with anyio.create_task_group() as group:
                for model in versions:
                    group.start_soon(model.load)
            try:
                for model in versions:
                    await model.ensure_ready()
            except BaseException:
                await _unload(versions, served=False)  # never served: those that loaded free what they took
                raise
            replaced = self.served.put(name, versions)
            for model in versions:
                life.loaded(name, model.version, since, reload=bool(replaced))
            await _unload(replaced)
        if self.freeze_heap:
            self._heap.changed(unloaded=bool(replaced))

    async def remove_model(self, name: str, *, record: bool = False) -> None:
        """Stop serving `name`: new requests get 404 at once, the requests in flight finish first.

        With `record`, the name is left UNLOADING, then UNAVAILABLE "unloaded" (a model repository's
        model: its index tells it); without, it is forgotten.
        """
        async with self.served.locks.hold(name):
            if name not in self.served:
                self.served.get(name)  # the unknown model's NotFound
            await _unload(self.served.unloading(name) if record else self.served.pop(name))
            if record:
                self.served.unloaded(name)
        if self.freeze_heap:
            self._heap.changed(unloaded=True)

    # The repository extension, for every wire

    def repository_index(self, *, ready: bool = False) -> list[dict[str, str]]:
        return self._model_control().index(ready=ready)

    async def load_model(self, name: str, parameters: Mapping[str, Any]) -> None:
        """Triton's load request: its ``config`` parameter (ModelConfig JSON) and ``file:`` parameters (bytes)."""
        config: Any = None
        files: dict[str, bytes] = {}
        for key, value in parameters.items():
            if key == "config":
                try:
                    config = json.loads(value)
                except (TypeError, ValueError) as exc:
                    raise BadRequest(f"failed to load {quoted(name)}: parameter config is not JSON: {exc}") from None
                if not isinstance(config, dict):
                    raise BadRequest(f"failed to load {quoted(name)}: parameter config must be a JSON object")
            elif key.startswith("file:"):
                if not isinstance(value, bytes):
                    raise BadRequest(f"failed to load {quoted(name)}: parameter {quoted(key)} must be bytes")
                files[key.removeprefix("file:")] = value
        if files and config is None:  # as Triton: files come with the config they go with
            raise BadRequest(f"failed to load {quoted(name)}: file parameters need a config parameter too")
        await self._model_control().load(name, config=config, files=files or None)

    async def unload_model(self, name: str) -> None:
        await self._model_control().unload(name)

    def _model_control(self) -> ModelControl:
        if self.control is None:
            raise NoRepository(
                "this server serves no model repository (oip_app(model_repository=...), "
                "oip-asgi serve --model-repository DIR)"
            )
        return self.control

    # What every wire tells

    async def model(self, name: str, version: str | None = None) -> ServedModel:
        """The served model `name` (`version`, or the newest). A repository's models are listed once its
        control has started: an app mounted where no lifespan runs starts it on its first request."""
        try:
            return self.served.get(name, version)
        except NotFound:
            if self.control is None or self.control.has_started:
                raise
        await self.control.started()
        return self.served.get(name, version)

    def model_ready(self, name: str, version: str | None = None) -> bool:
        """Whether `name` serves; a probe never waits on a load: it answers, and loading goes on."""
        try:
            model = self.served.get(name, version)
        except ModelNotReady:  # failed to load
            return False
        except NotFound:
            if self.control is not None and not self.control.has_started:
                self.start_loading()  # a repository's models are not listed yet: not ready, for now
                return False
            raise
        if not model.ready:
            self.start_loading()
        return model.ready

    def server_ready(self) -> bool:
        ready = self.ready
        if not ready:
            self.start_loading()
        return ready

    def model_metadata(self, model: ServedModel) -> ModelMetadata:
        """`model`'s metadata (name, versions, platform, tensors, properties), as every wire tells it."""

        def tensors(specs: tuple[TensorSpec, ...] | None) -> list[TensorMetadata]:
            return [TensorMetadata(spec.name, spec.datatype, list(spec.shape)) for spec in specs or ()]

        declared = model.model
        return ModelMetadata(
            name=model.name,
            versions=self.served.versions(model.name) if model.name in self.served else [model.version],
            platform=declared.platform,
            inputs=tensors(declared.inputs),
            outputs=tensors(declared.outputs),
            properties=declared.properties,
        )

    def model_config(self, model: ServedModel) -> dict[str, Any]:
        """`model`'s configuration as Triton's model configuration extension answers it, on every wire."""
        if model.config is not None:
            return model.config
        versions = self.served.versions(model.name) if model.name in self.served else [model.version]
        return model_config(model.name, model.model, versions)

    def statistics(self, name: str | None = None, version: str | None = None) -> dict[str, Any]:
        """Triton's statistics response: every model's, a model's versions', or one version's."""
        if name is None:
            models = self.served.all()
        elif version is None:
            first = self.served.get(name)
            models = [self.served.get(first.name, known) for known in self.served.versions(first.name)]
        else:
            models = [self.served.get(name, version)]
        return {"model_stats": [model.statistics.as_json(model.name, model.version) for model in models]}

    def answer(self, error: BaseException, where: str) -> OIPError:
        """What the client is told of `error` (the error boundary every wire goes through)."""
        return answer(error, expose=self.expose_errors, where=where)

    # The inference path

    async def infer(
        self, name: str, version: str | None, exchange: Exchange[Response], body: Body[Response] | None = None
    ) -> Response:
        """One inference on the model `name` (`version`, or the newest), from request to answer.

        This is the shell every request goes through, whatever answers it: the lookup, the wait for
        readiness, the request's times, its status and the access log line, the client that left.
        `body` answers it (`answer_once` unless given) and returns what `infer` returns.
        """
        try:
            model = self.served.get(name, version)  # the hot path: no coroutine for a model that is there
        except NotFound:
            model = await self.model(name, version)
        model.hold()  # from here until it is answered: an unload waits for it
        try:
            if model.state != "READY":
                await model.ensure_ready()
            times = RequestTimes(start=now())
            status = 500
            try:
                if body is None:  # a method call: no bound method made on the hot path
                    answer = await self.answer_once(model, exchange, times)
                else:
                    answer = await body(model, exchange, times)
                status = 200
                return answer
            except OIPError as error:
                status = error.status_code
                raise
            except (ClientDisconnected, asyncio.CancelledError):
                status = CLIENT_LEFT
                raise
            finally:
                if self.access_log:
                    _log_access(model, status, exchange, times)
        finally:
            model.release()

    async def answer_once(self, model: ServedModel, exchange: Exchange[Response], times: RequestTimes) -> Response:
        """The unary body: the model called once, its one response sent whole; that response."""
        if model.decoupled:  # Triton's words: clients match on them
            raise DecoupledUnsupported(f"{exchange.endpoint} doesn't support models with decoupled transaction policy")
        request = await exchange.decode(model)
        times.decoded = now()
        try:
            # The model's call inline, not in a helper coroutine: one frame fewer on the hot path.
            if self._tracer is None:
                result = await model(request, times)
            else:
                result = await self._traced(model, request, times)
            returned = now()
            times.returned = True
            try:
                response = exchange.encode(model, request, *model_outputs(model, request, result))
            except ModelError as error:
                raise _logged(model, error) from error.__cause__
        except OIPError:
            if times.called:  # the model ran, or was about to: its failure, counted once
                model.statistics.failed(times, now())
            raise
        built = now()
        times.output = built - returned
        model.statistics.succeeded(times, built)
        await exchange.send(response)
        return response

    async def answer_streaming(self, model: ServedModel, exchange: Exchange[Response], times: RequestTimes) -> Any:
        """The streaming body: a decoupled model's each value sent as one response as it comes
        (`start` before the first, `finish` after the last); a model that answers once, as `answer_once`.

        The next value is asked for once the wire has taken the previous response. Whatever ends the
        request (the last value, a failure, the client that left) closes the model's generator. It
        counts as Triton counts a decoupled request: one request, one inference, one execution.
        """
        if not model.decoupled:
            return await self.answer_once(model, exchange, times)
        request = await exchange.decode(model)
        times.decoded = now()
        steps = model.stream(request, times)
        span = None
        if self._tracer is not None:  # the whole stream, from its generator made to its end
            attributes = {"oip.model.name": model.name, "oip.model.version": model.version}
            span = self._tracer.start_span(f"oip.model {model.name}", attributes=attributes)
        started = False
        try:
            while True:
                try:
                    result = await steps.next()
                except OIPError:
                    raise
                except (Exception, SystemExit) as exc:
                    raised = exc.exception if isinstance(exc, Escaped) else exc
                    raise model.failure(raised) from raised
                if result is END:
                    break
                times.returned = True  # a failure from here to the next step is in its outputs
                built = now()
                try:
                    response = exchange.encode(model, request, *model_outputs(model, request, result))
                except ModelError as error:
                    raise _logged(model, error) from error.__cause__
                times.output += now() - built
                times.returned = False
                if not started:
                    started = True
                    await exchange.start()
                await exchange.send_next(response)
            if not started:  # a generator that yields nothing: an answer of no responses
                await exchange.start()
            await exchange.finish()
        except OIPError:
            model.statistics.failed(times, now())
            raise
        except (ClientDisconnected, asyncio.CancelledError):
            model.statistics.cancelled(times, now())  # as Triton counts a request cancelled while it runs
            raise
        finally:
            model.end_stream()
            await steps.close()
            if span is not None:
                span.set_attribute("oip.responses", exchange.responses)
                span.end()
        model.statistics.succeeded(times, now())
        return None

    async def _traced(self, model: ServedModel, request: DecodedRequest, times: RequestTimes) -> Outputs:
        assert self._tracer is not None
        attributes = {"oip.model.name": model.name, "oip.model.version": model.version}
        with self._tracer.start_as_current_span(f"oip.model {model.name}", attributes=attributes) as span:
            result = await model(request, times)
            span.set_attribute("oip.batch_size", times.batch_size)
            return result


async def _unload(models: list[ServedModel], *, served: bool = True) -> None:
    """Unload `models` (each once its requests have finished), in parallel; the log tells each one that `served`."""

    async def unload(model: ServedModel) -> None:
        await model.unload()
        if served:
            life.unloaded(model.name, model.version)

    async with anyio.create_task_group() as group:
        for model in models:
            group.start_soon(unload, model)


def _logged(model: ServedModel, error: ModelError) -> ModelError:
    """`error` (the model returned what cannot be sent), in the server log too: every 500 a model causes is."""
    if error.logged:
        return error
    failure = error_id()
    logger.error("model %r (version %s) failed (error id %s): %s", model.name, model.version, failure, error.message)
    return ModelError(
        error.message,
        redacted=error.redacted or f"model '{model.name}' failed (error id {failure}); the server log has the details",
        logged=True,
    )


def _log_access(model: ServedModel, status: int, exchange: Exchange[Any], times: RequestTimes) -> None:
    """One line per request, however many responses, for deployments without metrics: durations in microseconds."""
    input_us = (times.decoded - times.start) // 1000 if times.decoded else 0
    access_logger.info(
        "model=%s version=%s status=%d bytes_in=%d bytes_out=%d responses=%d queue_us=%d compute_input_us=%d "
        "compute_infer_us=%d compute_output_us=%d total_us=%d",
        model.name,
        model.version,
        status,
        exchange.received,
        exchange.sent,
        exchange.responses,
        (times.started - times.submitted) // 1000,
        input_us,
        (times.ended - times.started) // 1000,
        times.output // 1000,
        (now() - times.start) // 1000,
    )


class HasCore(Protocol):
    """What the wires take: an app that has a core (an `OIPApp`), or a `ServerCore` itself."""

    @property
    def core(self) -> ServerCore: ...


def core_of(app: HasCore | ServerCore) -> ServerCore:
    return app if isinstance(app, ServerCore) else app.core
