"""Adaptive batching: concurrent requests to a model share one call, their rows concatenated.

Requests of the same kind (each input's dtype and non-batch dimensions, and the parameters, the
request's and each input's, when the model takes them) queue in one open batch. It runs when it
holds `max_batch_size` rows, or `max_batch_delay` seconds after its first request arrived,
whichever comes first; the model is
called once with every input concatenated along axis 0, and each output is split back into each
request's rows. A request is checked before it gets here, so a bad one never fails a batch; one
larger than `max_batch_size` runs alone. A client that leaves before its batch runs is dropped from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from .._declarations.errors import BadRequest, ModelError
from .._declarations.result import Later, Result
from .request import DecodedRequest
from .statistics import CallTimes, ModelStatistics, RequestTimes, now

Invoke = Callable[[DecodedRequest, CallTimes], Awaitable[Any]]
# A model that takes the requests of a batch as a list (Triton's Python models): each one's outcome back.
InvokeEach = Callable[[list[DecodedRequest], CallTimes], Awaitable[list[Any]]]


@dataclass(slots=True)
class _Member:
    request: DecodedRequest
    rows: int
    future: asyncio.Future[Any]
    times: RequestTimes


@dataclass(slots=True)
class _Batch:
    key: Any
    members: list[_Member] = field(default_factory=list)
    rows: int = 0
    timer: asyncio.TimerHandle | None = None


class Batcher:
    def __init__(
        self,
        name: str,
        invoke: Invoke,
        *,
        max_batch_size: int,
        max_batch_delay: float,
        keyed_by_parameters: bool,
        single_output: str,
        statistics: ModelStatistics,
        each: InvokeEach | None = None,
    ) -> None:
        self.name = name
        self._each = each  # given: the batch's requests go to the model as a list, not concatenated
        self.single_output = single_output  # the name of an output returned as a bare array
        self.max_batch_size = max_batch_size
        self.max_batch_delay = max_batch_delay
        self._invoke = invoke
        self._keyed_by_parameters = keyed_by_parameters
        self._statistics = statistics
        self._open: dict[Any, _Batch] = {}
        self._running: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks
        self.batches = 0  # model calls made, for the statistics and the tests

    async def submit(self, request: DecodedRequest, times: RequestTimes) -> Any:
        """This request's share of its batch's result; `times` gets its batch call's times."""
        rows = _rows(self.name, request.inputs)
        member = _Member(request, rows, asyncio.get_running_loop().create_future(), times)
        times.rows, times.batched = rows, True
        if rows == 0 or rows > self.max_batch_size:
            self.batches += 1
            await self._call([member])
            return await member.future
        key = self._key(request)
        batch = self._open.get(key)
        if batch is not None and batch.rows + rows > self.max_batch_size:
            self._run(batch)  # full for this request: it goes now, and this one opens the next
            batch = None
        if batch is None:
            batch = self._open[key] = _Batch(key)
            batch.timer = asyncio.get_running_loop().call_later(self.max_batch_delay, self._run, batch)
        batch.members.append(member)
        batch.rows += rows
        if batch.rows == self.max_batch_size:
            self._run(batch)
        return await member.future

    def _key(self, request: DecodedRequest) -> Any:
        layout = tuple((name, array.dtype.str, array.shape[1:]) for name, array in sorted(request.inputs.items()))
        if not self._keyed_by_parameters:
            return layout
        return layout, msgspec.json.encode((request.parameters, request.input_parameters), order="sorted")

    def _run(self, batch: _Batch) -> None:
        if self._open.get(batch.key) is batch:
            del self._open[batch.key]
        if batch.timer is not None:
            batch.timer.cancel()
        members = [member for member in batch.members if not member.future.done()]  # done: the client left
        if members:
            self.batches += 1
            task = asyncio.get_running_loop().create_task(self._call(members))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _call(self, members: list[_Member]) -> None:
        call = CallTimes()
        rows = [member.rows for member in members]
        output_ns = None
        started = concatenated = now()
        if self._each is not None:
            await self._call_each(members, call, rows)
            return
        try:
            first = members[0].request
            if len(members) == 1:
                request = first
            else:
                inputs = {name: np.concatenate([m.request.inputs[name] for m in members]) for name in first.inputs}
                # The members share their parameters: they are part of the batch's key.
                request = DecodedRequest(inputs, parameters=first.parameters, input_parameters=first.input_parameters)
            concatenated = now()
            result = await self._invoke(request, call)
            returned = now()
            shares = _split(self.name, self.single_output, result, rows)
            output_ns = now() - returned
        except Exception as exc:  # every member shares the batch's failure
            for member in members:
                if not member.future.done():
                    member.future.set_exception(exc)
            return
        finally:
            if call.ended:
                self._statistics.executed(sum(rows), call.ended - call.started, concatenated - started, output_ns)
            for member in members:
                member.times.started, member.times.ended, member.times.batch_size = call.started, call.ended, sum(rows)
        for member, share in zip(members, shares, strict=True):
            if not member.future.done():
                member.future.set_result(share)

    async def _call_each(self, members: list[_Member], call: CallTimes, rows: list[int]) -> None:
        """The batch as a list of requests: each member gets its own outcome, a result or an error."""
        assert self._each is not None
        try:
            outcomes = await self._each([member.request for member in members], call)
        finally:
            if call.ended:
                self._statistics.executed(sum(rows), call.ended - call.started, 0, 0)
            for member in members:
                member.times.started, member.times.ended, member.times.batch_size = call.started, call.ended, sum(rows)
        for member, outcome in zip(members, outcomes, strict=True):
            if member.future.done():
                continue
            if isinstance(outcome, BaseException):
                member.future.set_exception(outcome)
            elif isinstance(outcome, Later):  # answered after the call returned (a Triton model's sender)
                outcome.deliver(member.future)
            else:
                member.future.set_result(outcome)


def _rows(name: str, inputs: Mapping[str, np.ndarray]) -> int:
    counts = {input_name: array.shape[0] if array.ndim else -1 for input_name, array in inputs.items()}
    if len(set(counts.values())) > 1 or -1 in counts.values():
        described = ", ".join(f"'{input_name}' {count}" for input_name, count in counts.items())
        raise BadRequest(f"the inputs of batched model '{name}' must share their first (batch) dimension: {described}")
    return next(iter(counts.values()), 0)


def _split(name: str, single_output: str, result: Any, rows: list[int]) -> list[Any]:
    """Each request's rows of a batch's result, in the form the model returned it."""
    wrapper = result if isinstance(result, Result) else None
    outputs = wrapper.outputs if wrapper is not None else result
    if outputs is None:
        raise ModelError(f"model '{name}' returned nothing (None); return its outputs")
    total = sum(rows)

    def checked(output: str, value: Any) -> np.ndarray:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        if array.ndim == 0 or array.shape[0] != total:
            got = "a scalar" if array.ndim == 0 else f"{array.shape[0]} rows"
            raise ModelError(
                f"batched model '{name}' returned {got} for output '{output}' from a batch of {total} rows "
                f"(requests of {', '.join(map(str, rows))}); each output needs one row per input row"
            )
        return array

    def pieces(output: str, value: Any) -> list[Any]:
        return np.split(checked(output, value), np.cumsum(rows[:-1]))

    if len(rows) == 1:  # a batch of one (a lone request, or one of no delay): its result is its share, checked
        for output, value in outputs.items() if isinstance(outputs, Mapping) else [(single_output, outputs)]:
            checked(output, value)
        return [result]
    if isinstance(outputs, Mapping):
        split = {output: pieces(output, value) for output, value in outputs.items()}
        shares: list[Any] = [{output: parts[index] for output, parts in split.items()} for index in range(len(rows))]
    else:
        shares = pieces(single_output, outputs)
    if wrapper is None:
        return shares
    return [Result(share, wrapper.parameters, wrapper.output_parameters) for share in shares]
