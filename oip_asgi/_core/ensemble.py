"""An ensemble served: its steps run on the models this server serves, as Triton's ensemble scheduler runs them.

A served ensemble is an ordinary `Model` whose callable is an `EnsembleRunner` over its `Plan`
(``ensemble_plan.py``): the core serves it as any model (lookup, readiness, statistics, both wires,
generate), and the runner routes tensors between its composing models. Each step is a request to its
model through the path every request takes (`ServerCore.infer`, with an in-process exchange that hands
it arrays), so each composing model counts its own executions.

A step runs as soon as every tensor it takes exists, steps that are ready together run at once, and
only the steps the request's outputs need run (Triton prunes the others). Each step gets the
ensemble request's id and parameters, and asks its model for the outputs its step maps. A decoupled
step's every response flows on through the steps after it, each making one response of the (then
decoupled) ensemble: tensors are kept per response (Triton's iteration), a step runs once per response
of the tensors it takes, and the ensemble answers each time all its requested outputs exist for one.
A step's error is the request's error, in Triton's words (``in ensemble '<name>', ...``) naming the
step's model. Between a model that batches and one that does not, a tensor gains or loses its batch
dimension of one, as Triton reshapes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from .._declarations.calling import Calling
from .._declarations.datatypes import datatype_of
from .._declarations.errors import BadRequest, OIPError
from .._declarations.model import Model, Outcome
from .._declarations.repository import DirectoryModel
from .checks import check_inputs
from .ensemble_plan import Plan, Step, plan
from .request import DecodedRequest, RequestedOutput
from .responding import Body, Exchange, Reply, Responder
from .served import ServedModels
from .serving import ServedModel

Response = TypeVar("Response")


class EnsembleCore(Protocol):
    """What an ensemble's steps use of the server core: its served models, and its one inference path."""

    served: ServedModels
    respond: Responder

    def model_config(self, model: ServedModel) -> dict[str, Any]: ...

    async def infer(
        self, name: str, version: str | None, exchange: Exchange[Response], body: Body[Response] | None = None
    ) -> Response: ...


def served_versions(directory: DirectoryModel, core: EnsembleCore) -> tuple[list[Model], dict[str, Any] | None]:
    """What serves a model folder read: its versions and config; an ensemble's planned on its models as they serve
    now, each version's steps run by a runner (ready while every composing model is)."""
    ensemble = directory.ensemble
    if ensemble is None:
        return directory.versions, directory.config
    planned = plan(ensemble, core.served, core.model_config)
    runner = EnsembleRunner(planned, core)
    calling = Calling(takes_requests=True, decoupled=planned.decoupled, ready=runner.ready)
    predict = runner.streams if planned.decoupled else runner.once
    versions = [Model(predict, **{**version.options(), "calling": calling}) for version in directory.versions]
    config = dict(directory.config or {})
    if planned.decoupled:  # as Triton: an ensemble with a decoupled step is decoupled
        config["model_transaction_policy"] = {"decoupled": True}
    return versions, config


@dataclass(slots=True)
class _Value:
    array: np.ndarray
    datatype: str
    batch: int  # the batch size of the request that made it; 0 from a model that does not batch


class EnsembleRunner:
    """Runs `plan`'s steps for each request, on the models `core` serves, through its inference path."""

    def __init__(self, plan: Plan, core: EnsembleCore) -> None:
        self.plan = plan
        self.core = core
        self.served = core.served
        self._needed: dict[frozenset[str] | None, tuple[frozenset[int], dict[str, int]]] = {}

    def ready(self) -> bool:
        """Every composing model serves and is ready (Triton unloads an ensemble whose model is unavailable)."""
        for step in self.plan.steps:
            try:
                if not self.served.get(step.model, step.version).ready:
                    return False
            except OIPError:
                return False
        return True

    async def once(self, requests: list[DecodedRequest]) -> list[Outcome]:
        """A non-decoupled ensemble's one response to its one request (a Triton-style `takes_requests` call)."""
        (request,) = requests
        run = _Run(self, request)
        try:
            pending = run.start()
            while not run.responses:
                if not pending and not run.running:
                    return [_deadlock(self.plan.name)]
                pending = await run.advance(pending)
            return [run.responses[0]]
        except OIPError as error:
            return [error]
        finally:
            if run.tasks:
                await run.cancel()

    def streams(self, requests: list[DecodedRequest]) -> list[AsyncIterator[dict[str, np.ndarray]]]:
        """A decoupled ensemble's call (a model that takes requests): each request's stream of responses."""
        return [self.stream(request) for request in requests]

    async def stream(self, request: DecodedRequest) -> AsyncIterator[dict[str, np.ndarray]]:
        """A decoupled ensemble's responses, one per set of its outputs made."""
        run = _Run(self, request)
        try:
            pending = run.start()
            while True:
                while run.responses:
                    yield run.responses.pop(0)
                if not pending and not run.running:
                    for outputs in run.rest():
                        yield outputs
                    return
                pending = await run.advance(pending)
        finally:
            await run.cancel()

    def pruned(self, request: DecodedRequest) -> tuple[frozenset[int], dict[str, int]]:
        """The steps the request's outputs need, and how many of them (and the response) take each tensor."""
        wanted = None if request.outputs is None else frozenset(output.name for output in request.outputs)
        known = self._needed.get(wanted)
        if known is not None:
            return known
        plan = self.plan
        outputs = set(plan.outputs if wanted is None else wanted)
        needed: set[int] = set()
        tensors = list(outputs)
        while tensors:
            step = plan.made_by.get(tensors.pop())
            if step is not None and step not in needed:
                needed.add(step)
                tensors.extend(tensor for _, tensor in plan.steps[step].inputs)
        uses = {tensor: sum(step in needed for step in steps) for tensor, steps in plan.taken_by.items()}
        for output in outputs:
            uses[output] = uses.get(output, 0) + 1
        known = self._needed[wanted] = (frozenset(needed), uses)
        return known


_DONE = object()  # a step's last event: it has no more responses
Tensors = dict[str, _Value]  # a step's inputs, or its response's outputs, by the model's names


class _Run:
    """One request's way through an ensemble: its tensors by name and iteration (a decoupled step's responses
    number them), the steps started, those in flight, and the ensemble's responses made."""

    def __init__(self, runner: EnsembleRunner, request: DecodedRequest) -> None:
        self.plan = plan = runner.plan
        self.core = runner.core
        self.request = request
        self.needed, self.uses = runner.pruned(request)
        self.wanted = plan.outputs.keys() if request.outputs is None else [output.name for output in request.outputs]
        # Each tensor's iterations made and not yet taken by all its takers, and how many takers they wait for.
        self.values: dict[tuple[str, int], _Value | None] = {}
        self.left: dict[tuple[str, int], int] = {}
        self.started: set[tuple[int, int]] = set()
        self.answered: set[int] = set()
        self.counts: dict[int, int] = {}  # a decoupled step's responses so far
        self.responses: list[dict[str, np.ndarray]] = []  # the ensemble's, to send now
        self.held: dict[int, dict[str, np.ndarray]] = {}  # those made before one they follow
        self.following = 0  # the iteration the next response to send comes of
        self.running = 0  # steps in flight as tasks
        self.tasks: set[asyncio.Task[None]] = set()
        self.events: asyncio.Queue[tuple[Step, int, object]] | None = None  # made with the first task

    def start(self) -> list[tuple[Step, int]]:
        plan, inputs = self.plan, self.request.inputs
        batch = 0
        if plan.max_batch_size > 0 and inputs:
            first = next(iter(inputs.values()))
            batch = int(first.shape[0]) if first.ndim else 0
            if batch > plan.max_batch_size:
                raise BadRequest(f"inference request batch-size must be <= {plan.max_batch_size} for '{plan.name}'")
        for name in plan.inputs:  # an optional input left out: its steps run without it, as in Triton
            array = inputs.get(name)
            self._put(name, 0, None if array is None else _Value(array, datatype_of(array.dtype) or "BYTES", batch))
        return self._after(plan.inputs, 0)

    async def advance(self, pending: list[tuple[Step, int]]) -> list[tuple[Step, int]]:
        """Run the steps ready, and wait for the next to answer; the steps its answer lets run."""
        if len(pending) == 1 and not self.running and not pending[0][0].decoupled:
            # One step to run and nothing else in flight (a chain): awaited here, no task made for it.
            step, iteration = pending[0]
            exchange = self._exchange(step, iteration)
            try:
                await self.core.infer(step.model, step.version, exchange)
            except OIPError as error:
                raise _in_ensemble(self.plan.name, step.model, error) from error
            assert exchange.result is not None  # (sent, or its failure raised)
            return self._took(step, iteration, exchange.result)
        for step, iteration in pending:
            self._launch(step, iteration)
        return await self._next_event()

    def _put(self, tensor: str, iteration: int, value: _Value | None) -> None:
        takers = self.uses.get(tensor)
        if takers:
            key = (tensor, iteration)
            self.values[key] = value
            self.left[key] = takers

    def _taken(self, key: tuple[str, int]) -> _Value | None:
        value = self.values[key]
        left = self.left[key] - 1
        if left:
            self.left[key] = left
        else:  # its last taker: freed (a long stream keeps no tensor it no longer needs)
            del self.left[key], self.values[key]
        return value

    def _after(self, made: Iterable[str], iteration: int) -> list[tuple[Step, int]]:
        """The steps the tensors just made (at `iteration`) let run, and the ensemble's response they complete."""
        plan, values, ready = self.plan, self.values, []
        for tensor in made:
            for index in plan.taken_by.get(tensor, ()):
                if index in self.needed and (index, iteration) not in self.started:
                    step = plan.steps[index]
                    for taken in step.takes:
                        if (taken, iteration) not in values:
                            break
                    else:
                        self.started.add((index, iteration))
                        ready.append((step, iteration))
        if iteration in self.answered:
            return ready
        for tensor in self.wanted:
            if values.get((tensor, iteration)) is None:
                return ready
        self.answered.add(iteration)
        batching = plan.max_batch_size > 0
        outputs = {}
        for tensor in self.wanted:
            value = self._taken((tensor, iteration))
            assert value is not None  # (complete)
            outputs[tensor] = _fitted(value, plan.outputs.get(tensor), batching)
        # In the order of the responses they come of: a stream's order is its meaning (Triton's may differ).
        self.held[iteration] = outputs
        while self.following in self.held:
            self.responses.append(self.held.pop(self.following))
            self.following += 1
        return ready

    def rest(self) -> list[dict[str, np.ndarray]]:
        """The responses held for one that never came (a step's response without an output it maps), in order."""
        held, self.held = self.held, {}
        return [held[iteration] for iteration in sorted(held)]

    def _exchange(self, step: Step, iteration: int) -> _StepExchange:
        """The step's request: the tensors it takes (fitted to its model's batching), the ensemble request's id and
        parameters, and the outputs its step maps."""
        taken = {tensor: self._taken((tensor, iteration)) for tensor in step.takes}
        inputs: Tensors = {}
        batch = 0
        for model_input, tensor in step.inputs:
            value = taken[tensor]
            if value is not None:
                array = _fitted(value, step.dims.get(model_input), step.batching)
                if step.batching and array.ndim:
                    batch = int(array.shape[0])
                inputs[model_input] = value if array is value.array else _Value(array, value.datatype, batch)
        return _StepExchange(inputs, self.request, list(step.requested), batch)

    def _took(self, step: Step, iteration: int, response: Tensors) -> list[tuple[Step, int]]:
        """A step's response: its outputs made tensors (a decoupled step's each response an iteration of its own)."""
        if step.decoupled:
            made = self.counts.get(step.index, 0)
            self.counts[step.index] = made + 1
        else:
            made = iteration
        for output, tensor in step.outputs:
            self._put(tensor, made, response.get(output))
        return self._after(step.makes, made)

    def _launch(self, step: Step, iteration: int) -> None:
        if self.events is None:
            self.events = asyncio.Queue()
        exchange = self._exchange(step, iteration)
        self.running += 1
        task = asyncio.get_running_loop().create_task(self._step(step, iteration, exchange))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _step(self, step: Step, iteration: int, exchange: _StepExchange) -> None:
        assert self.events is not None
        put = self.events.put_nowait
        try:
            if step.decoupled:  # each response put as it comes
                exchange.outlet = lambda response: put((step, iteration, response))
                await self.core.infer(step.model, step.version, exchange, self.core.respond.streaming)
            else:
                await self.core.infer(step.model, step.version, exchange)
            if exchange.result is not None:  # one response, sent whole (a model that answers once)
                put((step, iteration, exchange.result))
        except Exception as exc:
            put((step, iteration, exc))
        finally:
            put((step, iteration, _DONE))

    async def _next_event(self) -> list[tuple[Step, int]]:
        assert self.events is not None
        step, iteration, item = await self.events.get()
        if item is _DONE:
            self.running -= 1
            return []
        if isinstance(item, OIPError):
            raise _in_ensemble(self.plan.name, step.model, item) from item
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, dict)
        return self._took(step, iteration, item)

    async def cancel(self) -> None:
        """The steps still in flight (a step failed, or the client left) stopped, and waited for."""
        if self.tasks:
            for task in self.tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)


class _StepExchange:
    """A step's request as an exchange: the arrays it takes, decoded as they are; each response's outputs kept (the
    one response of a model that answers once) or handed to `outlet` (each of a decoupled model's)."""

    __slots__ = ("batch", "inputs", "outlet", "request", "responses", "result")
    endpoint = "an ensemble's step"
    received = sent = 0
    follows_parent_trace = True  # traced when the ensemble's request is, never sampled on its own (responding.py)

    def __init__(self, inputs: Tensors, request: DecodedRequest, outputs: list[RequestedOutput], batch: int) -> None:
        self.inputs = inputs
        self.request = (request.id, request.parameters, outputs)  # as DecodedRequest takes them, after the inputs
        self.batch = batch  # of the step's request: its outputs' batch size
        self.responses = 0
        self.result: Tensors | None = None
        self.outlet: Callable[[Tensors], None] | None = None

    async def decode(self, model: ServedModel) -> DecodedRequest:
        inputs = self.inputs
        if model.inputs is not None:  # the tensors are this server's: what a client's could be wrong is not checked
            for name, value in inputs.items():
                spec = model.input_spec(name)
                if spec is None or spec.datatype != value.datatype or not spec.accepts_shape(value.array.shape):
                    break
            else:
                if len(inputs) == len(model.inputs):
                    return DecodedRequest({name: value.array for name, value in inputs.items()}, *self.request)
            # Not as the model declares (or some of its optional inputs left out): as any request's, in its words.
            check_inputs(model, [_Header(name, value) for name, value in inputs.items()])
        return DecodedRequest({name: value.array for name, value in inputs.items()}, *self.request)

    def encode(self, reply: Reply) -> Tensors:
        batch = self.batch
        return {output.name: _Value(output.array, output.datatype, batch) for output in reply.outputs}

    async def send(self, response: Tensors) -> None:
        self.result = response
        self.responses += 1

    async def start(self) -> None:
        """(A decoupled step's responses go on to the steps after it, as they come.)"""

    async def send_next(self, response: Tensors) -> None:
        assert self.outlet is not None
        self.responses += 1
        self.outlet(response)

    async def finish(self) -> None:
        """(Its end is its task's.)"""


class _Header:
    """A step's input as the shared checks read a request's: its name, datatype and shape."""

    __slots__ = ("datatype", "name", "shape")

    def __init__(self, name: str, value: _Value) -> None:
        self.name, self.datatype, self.shape = name, value.datatype, value.array.shape


def _deadlock(name: str) -> OIPError:
    return BadRequest(
        f"in ensemble '{name}', unexpected deadlock, at least one output is not set while no more ensemble steps "
        "can be made"
    )


def _fitted(value: _Value, dims: tuple[int, ...] | None, batching: bool) -> np.ndarray:
    """Triton's reshape between a model that batches and one that does not: a tensor a non-batching model made
    gains a batch dimension of one where its shape is the taker's dims; a batch of one loses it where the taker
    does not batch and the shape is not its dims already."""
    array = value.array
    if dims is None or batching == (value.batch != 0):
        return array
    if batching:
        return array[np.newaxis] if _fits(dims, array.shape) else array
    if value.batch == 1 and not _fits(dims, array.shape):
        first: np.ndarray = array[0]
        return first
    return array


def _fits(dims: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    return len(dims) == len(shape) and all(want in (-1, got) for want, got in zip(dims, shape, strict=True))


def _in_ensemble(name: str, model: str, error: OIPError) -> OIPError:
    """A step's error as the ensemble request's, with its status: Triton's words, naming the step's model."""
    kind = type(error)  # its class: its HTTP status and gRPC code (made anew: its constructor may be a model's own)
    wrapped = kind.__new__(kind)
    wrapped.__dict__.update(error.__dict__)
    wrapped.message = _named(name, model, error.message)
    if error.redacted is not None:
        wrapped.redacted = _named(name, model, error.redacted)
    wrapped.args = (wrapped.message,)
    return wrapped


def _named(name: str, model: str, message: str) -> str:
    return f"in ensemble '{name}', " + (message if f"'{model}'" in message else f"model '{model}': {message}")
