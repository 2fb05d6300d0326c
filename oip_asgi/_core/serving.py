"""A model version as the core serves it: the user's declaration, and what serving it takes.

The `Model` stays what the user declared; here are its load state (Triton's: LOADING, READY,
UNAVAILABLE with a reason, UNLOADING; changed only along `VERSION_TRANSITIONS`), its concurrency
limit, its batcher, its statistics and the requests that hold it (an unload waits for them, then
runs the model's ``unload``), and the one place the user's function is called.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from .._declarations.errors import ModelError, ModelNotReady, OIPError
from .._declarations.model import Model, Outcome, Outputs
from .._declarations.result import Later
from .inline import InlineCalls
from .request import DecodedRequest
from .statistics import CallTimes, ModelStatistics, RequestTimes, now
from .workers import Escaped, WorkerPool

if TYPE_CHECKING:
    from .batching import Batcher, InvokeEach
    from .lanes import Lanes
    from .streaming import Steps

# A model's batcher, its instances' lanes and a decoupled model's steps are imported by the servers whose
# models have them: a start that serves none pays for none.

logger = logging.getLogger("oip_asgi")

State = Literal["LOADING", "READY", "UNAVAILABLE", "UNLOADING"]
# What a version may become from what it is: a version unloads from any state, and never comes back.
VERSION_TRANSITIONS: dict[State, frozenset[State]] = {
    "LOADING": frozenset({"READY", "UNAVAILABLE", "UNLOADING"}),
    "READY": frozenset({"UNLOADING"}),
    "UNAVAILABLE": frozenset({"UNLOADING"}),  # failed to load
    "UNLOADING": frozenset({"UNAVAILABLE"}),  # unloaded
}


def error_id() -> str:
    """A short id that ties what a client is told to the log line holding the rest."""
    return os.urandom(4).hex()  # what secrets.token_hex(4) does, without importing secrets (and hashlib, random)


class ServedModel:
    """`model` served as `name`: what the wires look up, check requests against and call."""

    def __init__(self, name: str, model: Model, pool: WorkerPool, config: dict[str, Any] | None = None) -> None:
        self.name = name
        self.model = model
        self.config = config  # Triton's configuration of it, where one was read with it (config.pbtxt)
        self.version = model.version
        # The declaration's specs, read on every request: held here rather than reached through `model`.
        self.inputs = model.inputs
        self.outputs = model.outputs
        self.input_spec = model.input_spec
        self.output_spec = model.output_spec
        self.output_names = None if model.outputs is None else frozenset(spec.name for spec in model.outputs)
        # What a request that names no outputs gets: every declared one, in order (none declared: what it returns).
        self.every_output: tuple[tuple[str, None], ...] = tuple((spec.name, None) for spec in model.outputs or ())
        # Each output's datatype, the array dtypes and shapes found to go out as they are, whether it is BYTES
        # (inference.py).
        self.output_forms: dict[str, tuple[str, list[Any], set[tuple[int, ...]], bool]] = {}
        self.labels_for = model.labels_for
        self.decoupled = model.decoupled  # a generator: it answers over time, on a streaming body
        calling = model.calling  # how to call it: read here once, never per request
        # A Triton Python model's execute takes a list of requests and answers each (a result or its error);
        # its readiness check, where it has one, is consulted by readiness.
        self.takes_requests = calling.takes_requests
        self._ready_check = calling.ready
        # Its instances (Triton's instance_group): each runs one execute at a time, so calls beyond their
        # number wait here, on the loop, rather than hold a worker thread each.
        self._instance_count = calling.instance_count
        self._instance_slots: asyncio.Semaphore | None = None  # an async execute's
        self._lanes: Lanes | None = None
        if self._instance_count and not model.is_async:
            from .lanes import Lanes

            self._lanes = Lanes(pool, self._instance_count)
        self.pool = pool
        # A sync call that may run on the loop when measured cheaper than the hop (inline.py): a model file's
        # library call, or a plain `def` of one request's inputs (not one that batches, streams, takes requests
        # or has instances: each keeps its thread), unless the model says inline=False.
        self.inline: InlineCalls | None = None
        if model.inline and calling.computes_only:
            self.inline = InlineCalls.for_files()
        elif model.inline and not (model.is_async or model.decoupled or calling.takes_requests):
            if model.max_batch_size is None and self._instance_count is None:
                self.inline = InlineCalls.for_functions()
        self.statistics = ModelStatistics()
        self.state: State = "READY" if model.load is None else "LOADING"
        self.reason = ""  # why it is UNAVAILABLE
        self._loaded = model.load is None  # its load ran and succeeded: its unload frees what that took
        self._unloaded = False
        self._load_error: ModelNotReady | None = None
        self._load_lock: anyio.Lock | None = None
        self.in_flight = 0  # calls of the model, bounded by its max_concurrency
        self.holders = 0  # requests that looked it up and have not finished: an unload waits for them
        self._released: asyncio.Event | None = None
        self.batcher: Batcher | None = None
        if model.max_batch_size is not None:
            from .batching import Batcher

            assert model.outputs is not None  # checked when declared
            self.batcher = Batcher(
                name,
                self.invoke,
                max_batch_size=model.max_batch_size,
                max_batch_delay=model.max_batch_delay,
                keyed_by_parameters=model.takes_parameters or model.takes_input_parameters,
                single_output=model.outputs[0].name,
                statistics=self.statistics,
                each=self._each(),
            )
        # An async model of plain inputs, with no batcher, limit or instances between: the answering body awaits
        # its function itself (`Responder.once`), with no coroutine of the core between them.
        plain = not (model.takes_parameters or model.takes_input_parameters or calling.takes_requests)
        direct = model.is_async and plain and self.batcher is None and self._instance_count is None
        self.direct: Callable[..., Any] | None = model.predict if direct and model.max_concurrency is None else None

    def _each(self) -> InvokeEach | None:
        """How a batch of a model that takes requests goes to it: as a list, each request's outcome back (a
        decoupled one's: each request's stream of responses)."""
        if not self.takes_requests:
            return None
        return self._open_streams if self.decoupled else self.invoke_requests

    def __repr__(self) -> str:
        return f"<ServedModel {self.name!r} version {self.version!r} {self.state}>"

    @property
    def ready(self) -> bool:
        if self._ready_check is not None and self.state == "READY":
            return self._ready_check()
        return self.state == "READY"

    async def load(self) -> None:
        """Run the load step once, however many requests ask at the same time; a failure is kept as the reason."""
        load = self.model.load
        if self.state != "LOADING" or load is None:
            return
        if self._load_lock is None:
            self._load_lock = anyio.Lock()
        async with self._load_lock:
            if self.state != "LOADING":
                return
            try:
                # Off the event loop, so that the other models keep serving while this one loads.
                result = load() if inspect.iscoroutinefunction(load) else await anyio.to_thread.run_sync(load)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                failure = error_id()
                what = f"model '{self.name}' version {self.version} failed to load"
                self._load_error = ModelNotReady(
                    f"{what}: {type(exc).__name__}: {exc}", redacted=f"{what} (error id {failure})"
                )
                if self.state == "LOADING":  # (not unloaded meanwhile)
                    self._become("UNAVAILABLE", self._load_error.message)
                logger.exception("model %r (version %s) failed to load (error id %s)", self.name, self.version, failure)
                return
            self._loaded = True
            if self.state == "LOADING":
                self._become("READY")

    def _become(self, state: State, reason: str = "") -> None:
        if state not in VERSION_TRANSITIONS[self.state]:
            raise RuntimeError(f"model {self.name!r} version {self.version} cannot go from {self.state} to {state}")
        self.state, self.reason = state, reason

    async def ensure_ready(self) -> None:
        """Return once the model serves: load it first if it has not loaded; a 503 that says why if it cannot."""
        if self.state == "LOADING":
            await self.load()
        if self.state == "READY":
            return
        if self._load_error is not None:
            raise self._load_error
        raise ModelNotReady(f"model '{self.name}' version {self.version} is not available: {self.reason}")

    def hold(self) -> None:
        self.holders += 1

    def release(self) -> None:
        self.holders -= 1
        if not self.holders and self._released is not None:
            self._released.set()

    async def unload(self) -> None:
        """Stop serving once the requests that hold the model have finished (the caller stopped new ones),
        then run the model's ``unload`` if it loaded; once, however often it is asked."""
        if self._unloaded:
            return
        self._unloaded = True
        self._become("UNLOADING", "unloading")
        if self.holders:
            self._released = asyncio.Event()
            await self._released.wait()
        if self._load_lock is not None:  # a load that runs ends first: whether it loaded decides the unload
            async with self._load_lock:
                pass
        self._become("UNAVAILABLE", "unloaded")
        if self._loaded and self.model.unload is not None:
            await self._run_unload(self.model.unload)

    async def _run_unload(self, unload: Callable[[], Any]) -> None:
        try:
            # Off the event loop, as its load: freeing large weights can take a while.
            result = unload() if inspect.iscoroutinefunction(unload) else await anyio.to_thread.run_sync(unload)
            if inspect.isawaitable(result):
                await result
        except Exception:  # the server goes on: the model is gone from it either way
            logger.exception("model %r (version %s) failed to unload", self.name, self.version)

    async def __call__(self, request: DecodedRequest, times: RequestTimes) -> Outputs:
        """The user's function on `request` (its inputs, and the parameters it asks for), off the event loop
        unless measured cheaper than the hop to a thread (inline.py).

        A batched model answers with this request's rows of its batch's result. `times` gets the
        request's queue and model-call times, for the statistics (the core records them).
        """
        limit = self.model.max_concurrency
        if limit is not None and self.in_flight >= limit:
            raise ModelNotReady(f"model '{self.name}' is busy: {limit} requests already in flight, retry later")
        self.in_flight += 1
        try:
            times.called = True
            times.submitted = now()
            if self.batcher is not None:
                share: Outputs = await self.batcher.submit(request, times)
                return share
            return await self.invoke(request, times)
        finally:
            self.in_flight -= 1

    async def invoke(self, request: DecodedRequest, call: CallTimes) -> Outputs:
        """One call of the user's function; what it raises, unless an `OIPError`, becomes a logged `ModelError`."""
        if self.takes_requests:
            (outcome,) = await self.invoke_requests([request], call)
            if isinstance(outcome, Later):  # answered after the call returned (a Triton model's response sender)
                outcome = await outcome
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        model = self.model
        result: Outputs
        try:
            if model.is_async:
                plain = not (model.takes_parameters or model.takes_input_parameters)
                kwargs = request.inputs if plain else arguments(model, request)
                call.started = now()
                try:
                    result = await model.predict(**kwargs)  # type: ignore[misc]  # checked at construction
                finally:
                    call.ended = now()
            elif self.inline is not None:
                result = await self._computed(request, call)
            else:
                result = await self.pool.run(_timed, model, request, call)
                if inspect.isawaitable(result):
                    result = await result
        except OIPError:
            raise  # raised on purpose: the client gets its status and message
        except (Exception, SystemExit) as exc:  # a sys.exit() in a model (argparse, say) is its failure too
            raised = exc.exception if isinstance(exc, Escaped) else exc
            raise self.failure(raised) from raised
        return result

    async def _computed(self, request: DecodedRequest, call: CallTimes) -> Outputs:
        """A sync call: on the loop when it is the model's only request in flight and calls like it were
        measured cheaper than the hop (inline.py), else on a worker thread; timed either way, which decides
        the next."""
        inline = self.inline
        assert inline is not None
        size = 0
        for array in request.inputs.values():
            size += array.size
        # With other requests in flight the loop has their work to do meanwhile, and a batch forms
        # behind the call: inline at c=16 cost W9's ONNX file more CPU per request than the hop.
        here = self.in_flight == 1 and size <= inline.size and inline.streak >= inline.needed  # (inline.py)
        result: Outputs
        try:
            if here:  # as on a thread (workers.called): in a copy of the context, a BaseException wrapped
                try:
                    result = contextvars.copy_context().run(_timed, self.model, request, call)
                except Exception:
                    raise
                except BaseException as exc:
                    raise Escaped(exc) from exc
            else:
                result = await self.pool.run(_timed, self.model, request, call)
        finally:
            if call.ended:
                inline.measured(size, call.ended - call.started, here)
        if type(result) is not dict and inspect.isawaitable(result):  # a `def` that returns a coroutine: awaited
            result = await result
        return result

    async def invoke_requests(self, requests: list[DecodedRequest], call: CallTimes) -> list[Outcome]:
        """One call of a model that takes requests: each request's outputs, or the error it gets."""
        if self._lanes is not None:
            try:
                outcomes: list[Outcome] = await self._lanes.run(_timed_requests, self.model, requests, call)
            except (Exception, SystemExit) as exc:
                raised = exc.exception if isinstance(exc, Escaped) else exc
                return [self.failure(raised)] * len(requests)
            return outcomes
        slots = self._instance_slots
        if slots is None and self._instance_count is not None:
            slots = self._instance_slots = asyncio.Semaphore(self._instance_count)
        try:
            if slots is None:
                outcomes = await self._call_requests(requests, call)
            else:
                await slots.acquire()
                outcomes = await self._call_requests(requests, call, slots.release)
        except (Exception, SystemExit) as exc:
            raised = exc.exception if isinstance(exc, Escaped) else exc
            error = self.failure(raised)
            return [error] * len(requests)
        return outcomes

    async def _call_requests(
        self, requests: list[DecodedRequest], call: CallTimes, done: Callable[[], None] | None = None
    ) -> list[Outcome]:
        """The model's call; `done` once an async one has ended (a sync one with instances runs in lanes)."""
        model = self.model
        if model.is_async:
            call.started = now()
            try:
                outcomes: list[Outcome] = await model.predict(requests)  # type: ignore[call-arg,misc]
            finally:
                call.ended = now()
                if done is not None:
                    done()
            return outcomes
        outcomes = await self.pool.run(_timed_requests, model, requests, call)
        return outcomes

    def failure(self, raised: BaseException) -> ModelError:
        """What the model raised, logged with its traceback, as the error its client gets."""
        failure = error_id()
        # The client gets the message (unless the app hides it); the traceback is for whoever runs the server.
        logger.error(
            "model %r (version %s) raised (error id %s)",
            self.name,
            self.version,
            failure,
            exc_info=(type(raised), raised, raised.__traceback__),
        )
        return ModelError(
            f"model '{self.name}' raised {type(raised).__name__}: {raised}",
            redacted=f"model '{self.name}' failed (error id {failure}); the server log has the details",
            logged=True,
        )

    async def stream(self, request: DecodedRequest, times: RequestTimes) -> Steps:
        """A decoupled model's generator for `request`, to step through; it counts as one call in flight
        (against ``max_concurrency``) until `end_stream`. A model that takes requests and batches makes it
        once its batch runs."""
        limit = self.model.max_concurrency
        if limit is not None and self.in_flight >= limit:
            raise ModelNotReady(f"model '{self.name}' is busy: {limit} requests already in flight, retry later")
        model = self.model
        times.called = True
        times.submitted = now()
        try:
            produced: Any
            if self.takes_requests:
                if self.batcher is not None:
                    produced = await self.batcher.submit(request, times)
                    if isinstance(produced, BaseException):
                        raise produced
                else:
                    streams: list[Any] = model.predict([request])  # type: ignore[call-arg,assignment]
                    (produced,) = streams
            else:
                plain = not (model.takes_parameters or model.takes_input_parameters)
                kwargs = request.inputs if plain else arguments(model, request)
                # Calling a generator function runs none of its body: cheap enough for the event loop.
                produced = model.predict(**kwargs)
        except OIPError:
            raise
        except Exception as exc:
            raise self.failure(exc) from exc
        from .streaming import AsyncSteps, SyncSteps

        if inspect.isasyncgen(produced):
            steps: Steps = AsyncSteps(produced, times)
        elif inspect.isgenerator(produced):
            steps = SyncSteps(produced, self.pool, times)
        else:
            raise ModelError(
                f"model '{self.name}' is decoupled but returned a {type(produced).__name__}, not a generator"
            )
        self.in_flight += 1
        return steps

    async def _open_streams(self, requests: list[DecodedRequest], call: CallTimes) -> list[Any]:
        """A decoupled model that takes requests, on a batch of them: each one's stream (or the error)."""
        call.started = now()
        try:
            streams: list[Any] = self.model.predict(requests)  # type: ignore[call-arg,assignment]  # takes requests
            return streams
        except (Exception, SystemExit) as exc:
            return [self.failure(exc)] * len(requests)
        finally:
            call.ended = now()

    def end_stream(self) -> None:
        self.in_flight -= 1


def arguments(model: Model, request: DecodedRequest) -> dict[str, Any]:
    """The keyword arguments of `model`'s function, which asks for parameters, for `request`."""
    kwargs: dict[str, Any] = dict(request.inputs)
    if model.takes_parameters:
        kwargs["parameters"] = request.parameters
    if model.takes_input_parameters:
        given = request.input_parameters
        kwargs["input_parameters"] = {name: given.get(name, {}) for name in request.inputs}
    return kwargs


def _timed_requests(model: Model, requests: list[DecodedRequest], call: CallTimes) -> list[Outcome]:
    call.started = now()
    try:
        outcomes: list[Outcome] = model.predict(requests)  # type: ignore[call-arg,assignment]  # takes requests
        return outcomes
    finally:
        call.ended = now()


def _timed(model: Model, request: DecodedRequest, call: CallTimes) -> Any:
    plain = not (model.takes_parameters or model.takes_input_parameters)
    kwargs = request.inputs if plain else arguments(model, request)  # here: off the event loop
    call.started = now()  # on the worker thread: the wait for it was the queue
    try:
        return model.predict(**kwargs)
    finally:
        call.ended = now()
