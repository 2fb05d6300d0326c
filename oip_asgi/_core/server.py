"""The server core, under every wire: the models' life (load, close, readiness) and the one inference
path's per-request shell.

A wire (REST, gRPC, OpenAI) only translates: it hands `ServerCore.infer` an `Exchange`
(`responding.py`) that decodes its request into a `DecodedRequest`, encodes each `Reply`, and sends
the response (or several). The shell looks the model up, waits for it to be ready, times the request,
logs it and tells a client that left; its body (`respond.once`, `respond.streaming`) calls the model
and counts the statistics, the same way for every wire. Models can be put and removed while serving: a
new version serves once it has loaded, and a removed one lets the requests that hold it finish. What
every wire tells (metadata, configuration, statistics) is built in its own module, as typed values.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import anyio

from .._declarations.errors import BadRequest, ClientDisconnected, ModelNotReady, NotFound, OIPError, client_error
from .._declarations.model import Model, ModelsArgument, checked_models, declared_versions
from .._declarations.model_repository import ModelRepository
from .._version import __version__
from . import heap, life
from .extensions import listed
from .logs import follow_the_host, show_unless_configured
from .metadata import ModelMetadata, ServerMetadata, model_metadata
from .model_config import model_config
from .responding import Body, Exchange, Responder, Response, access_logger, log_access
from .served import ServedModels
from .serving import ServedModel
from .shared_memory import SharedMemory
from .statistics import RequestTimes, StatisticsResponse, now
from .trace_settings import Changes, TraceSettings, TraceSettingsResponse, start_setting
from .triton_json import echo
from .workers import DEFAULT_MAX_THREADS, WorkerPool

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .control import ModelControl


DEFAULT_MAX_BODY_SIZE = 128 * 2**20
CLIENT_LEFT = 499  # as nginx logs a client that went away


class CoreOptions(TypedDict, total=False):
    """`ServerCore`'s options, as `oip_app` and the REST app pass them on."""

    name: str
    max_body_size: int
    expose_errors: bool
    max_threads: int
    metrics: bool | CollectorRegistry
    tracing: bool | Mapping[str, object]
    access_log: bool
    model_repository: ModelRepository | str | os.PathLike[str] | None
    load_switch_interval: float | None
    strict_readiness: bool
    freeze_heap: bool
    shared_memory_unavailable: str | None


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
        tracing: bool | Mapping[str, object] = False,
        access_log: bool = False,
        model_repository: ModelRepository | str | os.PathLike[str] | None = None,
        load_switch_interval: float | None = None,
        strict_readiness: bool = True,
        freeze_heap: bool = False,
        shared_memory_unavailable: str | None = None,
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
        # Triton's system shared memory: the regions registered with this server (this process).
        self.shared_memory = SharedMemory(unavailable=shared_memory_unavailable)
        extensions = listed(repository=self.control is not None, shared_memory=not self.shared_memory.unavailable)
        self.server_metadata = ServerMetadata(name=name, version=__version__, extensions=extensions)
        self.traces = TraceSettings(start_setting(tracing))  # Triton's trace extension's settings
        self.respond = Responder(self.traces)  # the bodies: `respond.once`, `respond.streaming`
        self._loading: asyncio.Task[None] | None = None
        self._hosts = 0  # the lifespans and gRPC servers serving the core now (`hosted`)
        self._announced: weakref.WeakSet[ServedModel] = weakref.WeakSet()  # the versions from code logged as loaded
        if metrics is not False:
            # prometheus_client is the `metrics` extra: imported only by the servers that ask for it.
            from .metrics import register

            register(self.served.all, metrics)

    def offer_no_shared_memory(self, reason: str) -> None:
        """Answer system shared memory's calls with a 501 saying `reason`, and list it no more (the serve command's
        worker processes: each would hold regions of its own)."""
        self.shared_memory.unavailable = reason
        extensions = listed(repository=self.control is not None, shared_memory=False)
        self.server_metadata = ServerMetadata(self.server_metadata.name, __version__, extensions)

    def _served(self, name: str, versions: Sequence[Model], config: dict[str, Any] | None = None) -> list[ServedModel]:
        return [ServedModel(name, model, self.pool, config) for model in versions]

    # The lifecycle

    async def load(self) -> None:
        """Load every model now (they load lazily on first use otherwise); failures show in readiness."""
        follow_the_host()  # at startup: a host that configures its logging after building the app has now
        loads = [self._load_logged(model) for model in self.served.all()]
        if self.control is not None:
            loads.append(self.control.started())
        await _together(loads)
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
        self.shared_memory.close()

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

    async def load_model(
        self, name: str, *, config: dict[str, Any] | None = None, files: dict[str, bytes] | None = None
    ) -> None:
        """Triton's load: `config` (ModelConfig JSON) and `files` (its paths' bytes); see `load_request.py`."""
        await self._model_control().load(name, config=config, files=files)

    async def unload_model(self, name: str, *, unload_dependents: bool = False) -> None:
        """Triton's unload; `unload_dependents` unloads the models only loaded along with an ensemble too."""
        await self._model_control().unload(name, unload_dependents=unload_dependents)

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
        return model_metadata(model, self._versions(model))

    def model_config(self, model: ServedModel) -> dict[str, Any]:
        """`model`'s configuration as Triton's model configuration extension tells it, on every wire."""
        if model.config is not None:
            return model.config
        return model_config(model.name, model.model, self._versions(model))

    def _versions(self, model: ServedModel) -> list[str]:
        return self.served.versions(model.name) if model.name in self.served else [model.version]

    def statistics(self, name: str | None = None, version: str | None = None) -> StatisticsResponse:
        """Triton's statistics: every model's, a model's versions', or one version's."""
        if name is None:
            models = self.served.all()
        elif version is None:
            first = self.served.get(name)
            models = [self.served.get(first.name, known) for known in self.served.versions(first.name)]
        else:
            models = [self.served.get(name, version)]
        return StatisticsResponse([model.statistics.snapshot(model.name, model.version) for model in models])

    async def trace_settings(self, name: str | None = None, changes: Changes | None = None) -> TraceSettingsResponse:
        """Triton's trace extension: the settings of the model `name` (None: the global ones), `changes` applied."""
        if name is not None:
            try:
                await self.model(name)
            except OIPError:  # unknown, or failed to load: Triton's words
                raise BadRequest(f"Request for unknown model : {echo(name)}") from None
        if changes:
            self.traces.update(name, changes, tracing_needed=self.respond.tracing_needed)
            self.respond.follow()
        return self.traces.of(name).response()

    def client_error(self, error: BaseException, where: str) -> OIPError:
        """What the client is told of `error` (the error boundary every wire goes through)."""
        return client_error(error, expose=self.expose_errors, where=where)

    # The inference path

    async def infer(
        self, name: str, version: str | None, exchange: Exchange[Response], body: Body[Response] | None = None
    ) -> Response:
        """One inference on the model `name` (`version`, or the newest), from request to response.

        This is the shell every request goes through, whatever body responds: the lookup, the wait for
        readiness, the request's times, its status and the access log line, the client that left.
        `body` responds (`respond.once` unless given) and returns what `infer` returns.
        """
        try:
            model = self.served.get(name, version)  # the hot path: no coroutine for a model that is there
        except NotFound:
            model = await self.model(name, version)
        model.holders += 1  # held from here until it is responded to: an unload waits for it (`ServedModel.hold`)
        try:
            if model.state != "READY":
                await model.ensure_ready()
            times = RequestTimes(start=now())
            status = 500
            try:
                if body is None:  # a method call: no bound method made on the hot path
                    response = await self.respond.once(model, exchange, times)
                else:
                    response = await body(model, exchange, times)
                status = 200
                return response
            except OIPError as error:
                status = error.status_code
                raise
            except (ClientDisconnected, asyncio.CancelledError):
                status = CLIENT_LEFT
                raise
            finally:
                if self.access_log:
                    log_access(model, status, exchange, times)
        finally:
            model.release()


async def _together(calls: list[Coroutine[Any, Any, None]]) -> None:
    """Run `calls` at once on this loop, as a task group would (the first failure cancels the others), with
    asyncio's tasks alone: start-up then imports none of anyio's backend (about 20 modules) for a server's load."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)  # each finished, as a task group leaves them
        raise


async def _unload(models: list[ServedModel], *, served: bool = True) -> None:
    """Unload `models` (each once its requests have finished), in parallel; the log tells each one that `served`."""

    async def unload(model: ServedModel) -> None:
        await model.unload()
        if served:
            life.unloaded(model.name, model.version)

    async with anyio.create_task_group() as group:
        for model in models:
            group.start_soon(unload, model)


class HasCore(Protocol):
    """What the wires take: an app that has a core (an `OIPApp`), or a `ServerCore` itself."""

    @property
    def core(self) -> ServerCore: ...


def core_of(app: HasCore | ServerCore) -> ServerCore:
    return app if isinstance(app, ServerCore) else app.core
