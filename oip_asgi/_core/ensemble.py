"""An ensemble served: its steps run on the models this server serves, as Triton's ensemble scheduler runs them.

A served ensemble is an ordinary `Model` whose callable is an `EnsembleRunner` over its `Plan`
(``ensemble_plan.py``): the core serves it as any model (lookup, readiness, statistics, both wires,
generate), and the runner routes tensors between its composing models. Each step is a request to its
model through the path every request takes (`ServerCore.infer`, through the host's in-process exchange,
as a Python model's BLS call), so each composing model counts its own executions.

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
import contextlib
import copy
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._declarations.calling import Calling
from .._declarations.datatypes import datatype_of
from .._declarations.errors import BadRequest, ModelError, OIPError
from .._declarations.model import Model, Outcome
from .._declarations.python_backend import BLSRequest, BLSResponse, PythonHost
from .._declarations.repository import DirectoryModel, RepositoryError
from .ensemble_plan import Plan, Step, plan
from .request import DecodedRequest
from .served import ServedModels
from .serving import ServedModel


def served_versions(
    directory: DirectoryModel,
    served: ServedModels,
    config_of: Callable[[ServedModel], dict[str, Any]],
    host: PythonHost | None,
) -> tuple[list[Model], dict[str, Any] | None]:
    """What serves a model folder read: its versions and config; an ensemble's planned on its models as they serve
    now, each version's steps run by a runner (ready while every composing model is)."""
    ensemble = directory.ensemble
    if ensemble is None:
        return directory.versions, directory.config
    if host is None:
        raise RepositoryError("an ensemble's steps are requests made in-process, which this server cannot make")
    planned = plan(ensemble, served, config_of)
    runner = EnsembleRunner(planned, host, served)
    calling = Calling(takes_requests=True, ready=runner.ready)
    predict = runner.stream if planned.decoupled else runner.once
    versions = [Model(predict, **{**version.options(), "calling": calling}) for version in directory.versions]
    config = dict(directory.config or {})
    if planned.decoupled:  # as Triton: an ensemble with a decoupled step is decoupled
        config["model_transaction_policy"] = {"decoupled": True}
    return versions, config


@dataclass(slots=True)
class _Value:
    array: np.ndarray
    batch: int  # the batch size of the request that made it; 0 from a model that does not batch


class EnsembleRunner:
    """Runs `plan`'s steps for each request, on the models `served` serves, through `host`'s in-process exchange."""

    def __init__(self, plan: Plan, host: PythonHost, served: ServedModels) -> None:
        self.plan = plan
        self.host = host
        self.served = served
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
        try:
            async with contextlib.aclosing(self._run(request)) as responses:
                async for outputs in responses:
                    return [outputs]
        except OIPError as error:
            return [error]
        return [
            BadRequest(
                f"in ensemble '{self.plan.name}', unexpected deadlock, at least one output is not set while no "
                "more ensemble steps can be made"
            )
        ]

    async def stream(self, request: DecodedRequest) -> AsyncIterator[dict[str, np.ndarray]]:
        """A decoupled ensemble's responses, one per set of its outputs made."""
        async with contextlib.aclosing(self._run(request)) as responses:
            async for outputs in responses:
                yield outputs

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

    async def _run(self, request: DecodedRequest) -> AsyncGenerator[dict[str, np.ndarray]]:
        run = _Run(self, request)
        try:
            pending = run.start()
            while True:
                while run.responses:
                    yield run.responses.pop(0)
                if len(pending) == 1 and not run.running and not pending[0][0].decoupled:
                    # One step to run and nothing else in flight (a chain): awaited here, no task made for it.
                    step, iteration = pending[0]
                    pending = run.took(step, iteration, await run.call(step, run.request_of(step, iteration)))
                    continue
                for step, iteration in pending:
                    run.launch(step, iteration)
                if not run.running:
                    return
                pending = await run.next_event()
        finally:
            await run.cancel()


_DONE = object()  # a step's last event: it has no more responses


class _Run:
    """One request's way through an ensemble: its tensors by name and iteration (a decoupled step's responses
    number them), the steps started, those in flight, and the ensemble's responses made."""

    def __init__(self, runner: EnsembleRunner, request: DecodedRequest) -> None:
        self.plan = plan = runner.plan
        self.host = runner.host
        self.request = request
        self.needed, self.uses = runner.pruned(request)
        self.wanted = list(plan.outputs) if request.outputs is None else [output.name for output in request.outputs]
        self.values: dict[str, dict[int, _Value | None]] = {}
        self.left: dict[tuple[str, int], int] = {}  # how many more takers each tensor's iteration waits for
        self.started: set[tuple[int, int]] = set()
        self.answered: set[int] = set()
        self.counts: dict[int, int] = {}  # a decoupled step's responses so far
        self.batches: dict[tuple[int, int], int] = {}
        self.responses: list[dict[str, np.ndarray]] = []
        self.running = 0  # steps in flight as tasks
        self.tasks: set[asyncio.Task[None]] = set()
        self.events: asyncio.Queue[tuple[Step, int, object]] = asyncio.Queue()
        self.batch = 0

    def start(self) -> list[tuple[Step, int]]:
        plan, inputs = self.plan, self.request.inputs
        if plan.max_batch_size > 0 and inputs:
            self.batch = int(next(iter(inputs.values())).shape[0]) if next(iter(inputs.values())).ndim else 0
            if self.batch > plan.max_batch_size:
                raise BadRequest(f"inference request batch-size must be <= {plan.max_batch_size} for '{plan.name}'")
        updated = []
        for name in plan.inputs:  # an optional input left out: its steps run without it, as in Triton
            array = inputs.get(name)
            self._put(name, 0, None if array is None else _Value(array, self.batch))
            updated.append((name, 0))
        return self._after(updated)

    def _put(self, tensor: str, iteration: int, value: _Value | None) -> None:
        takers = self.uses.get(tensor, 0)
        if takers:
            self.values.setdefault(tensor, {})[iteration] = value
            self.left[(tensor, iteration)] = takers

    def _taken(self, tensor: str, iteration: int) -> _Value | None:
        value = self.values[tensor][iteration]
        key = (tensor, iteration)
        self.left[key] -= 1
        if not self.left[key]:  # its last taker: freed (a long stream keeps no tensor it no longer needs)
            del self.left[key], self.values[tensor][iteration]
        return value

    def _after(self, updated: list[tuple[str, int]]) -> list[tuple[Step, int]]:
        """The steps the tensors just made let run, and the ensemble's responses they complete."""
        plan, ready = self.plan, []
        for tensor, iteration in updated:
            for index in plan.taken_by.get(tensor, ()):
                step = plan.steps[index]
                if index in self.needed and (index, iteration) not in self.started and self._has(step, iteration):
                    self.started.add((index, iteration))
                    ready.append((step, iteration))
            if tensor in self.wanted and iteration not in self.answered and self._complete(iteration):
                self.answered.add(iteration)
                self.responses.append(self._response(iteration))
        return ready

    def _has(self, step: Step, iteration: int) -> bool:
        return all(iteration in self.values.get(tensor, {}) for _, tensor in step.inputs)

    def _complete(self, iteration: int) -> bool:
        return all(self.values.get(tensor, {}).get(iteration) is not None for tensor in self.wanted)

    def _response(self, iteration: int) -> dict[str, np.ndarray]:
        batching = self.plan.max_batch_size > 0
        outputs = {}
        for tensor in self.wanted:
            value = self._taken(tensor, iteration)
            assert value is not None  # (complete)
            outputs[tensor] = _fitted(value, self.plan.outputs.get(tensor), batching)
        return outputs

    def request_of(self, step: Step, iteration: int) -> BLSRequest:
        """The step's request: the tensors it takes (fitted to its model's batching), the ensemble request's id and
        parameters, and the outputs its step maps."""
        inputs: dict[str, tuple[str, np.ndarray]] = {}
        batch = 0
        values = {
            tensor: self._taken(tensor, iteration) for tensor in dict.fromkeys(tensor for _, tensor in step.inputs)
        }
        for model_input, tensor in step.inputs:
            value = values[tensor]
            if value is None:
                continue
            array = _fitted(value, step.dims.get(model_input), step.batching)
            if step.batching and array.ndim:
                batch = int(array.shape[0])
            datatype = datatype_of(array.dtype)
            if datatype is None:
                raise ModelError(
                    f"ensemble tensor '{tensor}' has dtype {array.dtype}, which the protocol has no name for"
                )
            inputs[model_input] = (datatype, array)
        self.batches[(step.index, iteration)] = batch
        request = self.request
        outputs = [output for output, _ in step.outputs]
        return BLSRequest(step.model, step.version or "", inputs, request.id or "", request.parameters, outputs)

    async def call(self, step: Step, request: BLSRequest) -> BLSResponse:
        try:
            return await self.host.infer_async(request)
        except OIPError as error:
            raise _in_ensemble(self.plan.name, step.model, error) from error

    def took(self, step: Step, iteration: int, response: BLSResponse) -> list[tuple[Step, int]]:
        """A step's response: its outputs made tensors (a decoupled step's each response an iteration of its own)."""
        if step.decoupled:
            made = self.counts.get(step.index, 0)
            self.counts[step.index] = made + 1
        else:
            made = iteration
        batch = self.batches.get((step.index, iteration), 0)
        updated = []
        for output, tensor in step.outputs:
            array = response.outputs.get(output)
            self._put(tensor, made, None if array is None else _Value(array, batch))
            updated.append((tensor, made))
        return self._after(updated)

    def launch(self, step: Step, iteration: int) -> None:
        request = self.request_of(step, iteration)
        self.running += 1
        task = asyncio.get_running_loop().create_task(self._step(step, iteration, request))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _step(self, step: Step, iteration: int, request: BLSRequest) -> None:
        put = self.events.put_nowait
        try:
            if step.decoupled:
                async for response in self.host.stream_async(request):
                    put((step, iteration, response))
            else:
                put((step, iteration, await self.host.infer_async(request)))
        except Exception as exc:
            put((step, iteration, exc))
        finally:
            put((step, iteration, _DONE))

    async def next_event(self) -> list[tuple[Step, int]]:
        step, iteration, item = await self.events.get()
        if item is _DONE:
            self.running -= 1
            return []
        if isinstance(item, OIPError):
            raise _in_ensemble(self.plan.name, step.model, item) from item
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, BLSResponse)
        return self.took(step, iteration, item)

    async def cancel(self) -> None:
        """The steps still in flight (a step failed, or the client left) stopped, and waited for."""
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)


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
    wrapped = copy.copy(error)
    wrapped.message = _named(name, model, error.message)
    if error.redacted is not None:
        wrapped.redacted = _named(name, model, error.redacted)
    wrapped.args = (wrapped.message,)
    return wrapped


def _named(name: str, model: str, message: str) -> str:
    return f"in ensemble '{name}', " + (message if f"'{model}'" in message else f"model '{model}': {message}")
