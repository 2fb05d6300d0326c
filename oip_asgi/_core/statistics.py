"""Per-model statistics, counted as Triton counts them (its statistics extension), so habits carry over.

What each duration covers (nanoseconds, one count per request unless said otherwise):

- ``queue``: waiting for the model: for a worker thread (sync models) or for the batch to run.
- ``compute_input``: reading the request and checking it into arrays (the body streams in meanwhile).
- ``compute_infer``: the model call (a batch's call, for each request that rode in it).
- ``compute_output``: casting, checking and encoding the outputs into the response.
- ``success``: requests answered 200, from the first byte read to the response built.
- ``fail``: requests the model (or its outputs) failed, each once, with its time until then; and a
  stream whose client left while its model ran (Triton's CANCELED).

A request refused before the model runs (a bad datatype, shape or name; a model that is busy or not
loaded) counts nowhere, not even in ``last_inference``. ``inference_count`` counts inferences: the
rows of a batched model's requests, one per request otherwise; ``execution_count`` counts model calls,
failed ones included; ``batch_stats`` has one entry per batch size executed (1 for an unbatched model).
Every count changes on the event loop's thread, so concurrent requests never lose one. What a wire
tells of them is a snapshot (`ModelStatistics.snapshot`): structs with the field names of Triton's
statistics messages, which REST encodes as they are and gRPC builds its messages from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import msgspec

now = time.perf_counter_ns


@dataclass(slots=True)
class Duration:
    count: int = 0
    ns: int = 0

    def add(self, ns: int) -> None:
        self.count += 1
        self.ns += ns

    def snapshot(self) -> StatisticDuration:
        return StatisticDuration(self.count, self.ns)


# Structs, not dataclasses: made on every request, and msgspec's __init__ is C (no Python frame).
class CallTimes(msgspec.Struct, gc=False):
    """When a model call started and ended (perf_counter_ns), as the thread or task that ran it saw."""

    started: int = 0
    ended: int = 0


class RequestTimes(CallTimes, gc=False, kw_only=True):
    """One request's way through the core, for its model's statistics (its call's times included)."""

    start: int = 0
    decoded: int = 0
    submitted: int = 0  # handed to the model: from here to `started` it queued
    output: int = 0
    rows: int = 1
    batch_size: int = 1  # the rows of the call it rode in
    batched: bool = False
    called: bool = False  # the model was called: a failure from here on is the model's
    returned: bool = False  # and returned: a failure from here on is in its outputs


@dataclass(slots=True)
class _BatchSize:
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)

    def snapshot(self, size: int) -> InferBatchStatistics:
        return InferBatchStatistics(
            size, self.compute_input.snapshot(), self.compute_infer.snapshot(), self.compute_output.snapshot()
        )


_STAGES = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss")


class ModelStatistics:
    # One attribute per stage, not a dict of them: the success path writes five on every request.
    __slots__ = (
        "last_inference_ns", "inference_count", "calls", "failed_calls", "batches", "failures", *_STAGES
    )  # fmt: skip

    def __init__(self) -> None:
        self.last_inference_ns = 0
        self.inference_count = 0
        self.calls = 0  # a batched model's calls; an unbatched model's are its requests that reached it
        self.failed_calls = Duration()  # an unbatched model's calls whose request failed, and their time
        self.success, self.fail, self.queue = Duration(), Duration(), Duration()
        self.compute_input, self.compute_infer, self.compute_output = Duration(), Duration(), Duration()
        self.cache_hit, self.cache_miss = Duration(), Duration()  # no response cache: always zero
        self.batches: dict[int, _BatchSize] = {}  # a batched model's, by batch size
        # Failures by Triton's metric reasons: the model's call (BACKEND), or its outputs after it (OTHER).
        self.failures = {"REJECTED": 0, "CANCELED": 0, "BACKEND": 0, "OTHER": 0}

    @property
    def execution_count(self) -> int:
        return self.calls if self.batches else self.success.count + self.failed_calls.count

    @property
    def last_inference(self) -> int:
        """Milliseconds since the epoch."""
        return self.last_inference_ns // 1_000_000

    def executed(self, batch_size: int, infer_ns: int, input_ns: int, output_ns: int | None) -> None:
        """One call of a batched model, of `batch_size` rows, failed or not: its input time is the
        concatenation, its output time the split (None when the call failed)."""
        self.calls += 1
        batch = self.batches.get(batch_size)
        if batch is None:
            batch = self.batches[batch_size] = _BatchSize()
        batch.compute_infer.add(infer_ns)
        batch.compute_input.add(input_ns)
        if output_ns is not None:
            batch.compute_output.add(output_ns)

    def succeeded(self, times: RequestTimes, end: int) -> None:
        # Written out, not through Duration.add: this runs on every request. An unbatched model's
        # batch entry (size 1) is made from these figures when read, not kept twice.
        self.last_inference_ns = time.time_ns()
        self.inference_count += times.rows
        stage = self.success
        stage.count += 1
        stage.ns += end - times.start
        stage = self.queue
        stage.count += 1
        stage.ns += times.started - times.submitted
        stage = self.compute_input
        stage.count += 1
        stage.ns += times.decoded - times.start
        stage = self.compute_infer
        stage.count += 1
        stage.ns += times.ended - times.started
        stage = self.compute_output
        stage.count += 1
        stage.ns += times.output

    def failed(self, times: RequestTimes, end: int) -> None:
        self.last_inference_ns = time.time_ns()
        self.fail.add(end - times.start)
        self.failures["OTHER" if times.returned else "BACKEND"] += 1
        if not times.batched and times.ended:  # its own call ran, and failed or gave outputs that did
            self.failed_calls.add(times.ended - times.started)

    def cancelled(self, times: RequestTimes, end: int) -> None:
        """A request whose client left while its model ran (a stream cancelled): a failure, CANCELED."""
        self.last_inference_ns = time.time_ns()
        self.fail.add(end - times.start)
        self.failures["CANCELED"] += 1
        if times.ended:
            self.failed_calls.add(times.ended - times.started)

    def _batch_stats(self) -> dict[int, _BatchSize]:
        if self.batches or not self.execution_count:
            return self.batches
        single = _BatchSize(
            Duration(self.compute_input.count, self.compute_input.ns),
            Duration(self.execution_count, self.compute_infer.ns + self.failed_calls.ns),
            Duration(self.compute_output.count, self.compute_output.ns),
        )
        return {1: single}

    def snapshot(self, name: str, version: str) -> ModelStats:
        """The model's entry in Triton's ``model_stats``, as it is now."""
        return ModelStats(
            name=name,
            version=version,
            last_inference=self.last_inference,
            inference_count=self.inference_count,
            execution_count=self.execution_count,
            inference_stats=InferStatistics(*(getattr(self, stage).snapshot() for stage in _STAGES)),
            batch_stats=[batch.snapshot(size) for size, batch in sorted(self._batch_stats().items())],
        )


# Triton's statistics extension, field for field (its messages' names, but ModelStats for its
# ModelStatistics, the name of the counts above): what REST encodes and gRPC builds its messages from.


class StatisticDuration(msgspec.Struct, gc=False):
    count: int
    ns: int


class InferStatistics(msgspec.Struct, gc=False):
    success: StatisticDuration
    fail: StatisticDuration
    queue: StatisticDuration
    compute_input: StatisticDuration
    compute_infer: StatisticDuration
    compute_output: StatisticDuration
    cache_hit: StatisticDuration
    cache_miss: StatisticDuration


class InferBatchStatistics(msgspec.Struct, gc=False):
    batch_size: int
    compute_input: StatisticDuration
    compute_infer: StatisticDuration
    compute_output: StatisticDuration


class ModelStats(msgspec.Struct, gc=False):
    name: str
    version: str
    last_inference: int
    inference_count: int
    execution_count: int
    inference_stats: InferStatistics
    batch_stats: list[InferBatchStatistics]


class StatisticsResponse(msgspec.Struct, gc=False):
    model_stats: list[ModelStats]
