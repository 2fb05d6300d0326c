"""Responding to an inference request, whatever the wire: what the core asks of a wire (`Exchange`),
and the bodies that respond through it once the shell (`ServerCore.infer`) has found the model ready.

`Responder.once` calls the model once and sends its one response; `Responder.streaming` sends a
decoupled model's each value as a response of its own. Both hand the wire a `Reply` to encode, count
the model's statistics and trace the requests the trace settings sample (`tracing.py`); `log_access` is
the shell's line per request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar, cast

import msgspec

from .._declarations.datatypes import datatype_of
from .._declarations.errors import ClientDisconnected, ModelError, OIPError
from .._declarations.result import Last
from .inference import OutputTensor, model_outputs
from .request import DecodedRequest
from .serving import ServedModel, error_id
from .statistics import RequestTimes, now
from .trace_settings import TraceSettings
from .tracing import Trace, TracingUnavailable, tracer
from .workers import Escaped

logger = logging.getLogger("oip_asgi")
access_logger = logging.getLogger("oip_asgi.access")

Response = TypeVar("Response")


class Reply(msgspec.Struct, gc=False):
    """What a request's model gave, for the wire to encode as one response: the served model, the
    request, the outputs (cast and checked), the response's parameters, and whether the model marked it
    its request's last (`Last`: a Triton model's response sent with the FINAL flag)."""

    model: ServedModel
    request: DecodedRequest
    outputs: list[OutputTensor]
    parameters: dict[str, Any] | None
    last: bool = False


class Exchange(Protocol[Response]):
    """One inference request as a wire carries it: what the core asks of the wire.

    A request is responded to once: with its one response, sent whole by `send`, or with several sent
    as they come (`start`, `send_next` for each, `finish`), which is what a streaming body uses.
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

    def encode(self, reply: Reply) -> Response:
        """`reply` as one response in the wire's form."""

    async def send(self, response: Response) -> None:
        """Send `response` as the request's one response, whole (or leave that to the wire's server)."""

    async def start(self) -> None:
        """Begin a stream of several responses (REST: its status and headers)."""

    def send_next(self, response: Response) -> Awaitable[None]:
        """Send one response of the stream begun, at once; awaited, it returns once the wire has taken it."""

    async def finish(self) -> None:
        """End the stream begun: no response follows."""


# What responds to a request once the shell has found its model ready: it decodes the request, calls
# the model, and sends through the exchange what the wire encodes (one response; a streaming body, one
# per value the model yields). It counts the model's statistics.
Body = Callable[[ServedModel, Exchange[Response], RequestTimes], Awaitable[Response]]


class DecoupledUnsupported(OIPError, status_code=501, grpc_code="UNIMPLEMENTED"):
    """A decoupled model asked for one response, where the wire carries no more (REST's /infer, ModelInfer)."""


class Once(Protocol):
    """The unary body's signature (`Responder.once`)."""

    def __call__(self, model: ServedModel, exchange: Exchange[Response], times: RequestTimes, /) -> Awaitable[Response]:
        """`exchange`'s request answered by `model`, once; that response."""


class Responder:
    """The core's bodies: `once` (the default) and `streaming`; the requests `traces` samples are traced.

    `once` is the untraced body while no setting traces (`follow`): a request then costs no look at them.
    """

    __slots__ = ("once", "traced", "tracer", "traces")
    once: Once

    def __init__(self, traces: TraceSettings) -> None:
        self.traces = traces
        # OpenTelemetry's, once something is traced; an app built to trace without it fails with the install line.
        self.tracer: Any = tracer() if traces.active else None
        self.follow()

    def follow(self) -> None:
        """Serve with the bodies the trace settings ask for now (the traced one while any setting traces)."""
        self.traced = self.traces.active
        if self.traced:
            self.tracing_needed()
        self.once = self._traced_once if self.traced else self._once

    def tracing_needed(self) -> None:
        """OpenTelemetry's tracer, imported now: a server that cannot trace says so before a setting changes."""
        if self.tracer is None:
            try:
                self.tracer = tracer()
            except ImportError as exc:
                raise TracingUnavailable(f"the server does not support tracing: {exc}") from None

    async def _traced_once(self, model: ServedModel, exchange: Exchange[Response], times: RequestTimes) -> Response:
        level = _sampled(self.traces, model, exchange)
        token = _PARENT_LEVEL.set(level)  # the requests it makes (an ensemble's steps) follow its sampling
        try:
            if not level:
                return await self._once(model, exchange, times)
            trace = Trace(self.tracer, model, level, times)
            with trace.current():
                return await self._once(model, _tapped(exchange, trace), times)
        finally:
            _PARENT_LEVEL.reset(token)

    async def _once(self, model: ServedModel, exchange: Exchange[Response], times: RequestTimes) -> Response:
        """The unary body: the model called once, its one response sent whole; that response."""
        if model.decoupled:  # Triton's words: clients match on them
            raise DecoupledUnsupported(f"{exchange.endpoint} doesn't support models with decoupled transaction policy")
        request = await exchange.decode(model)
        times.decoded = decoded = now()
        try:
            try:
                # The model's call inline, not in a helper coroutine: one frame fewer on the hot path.
                try:
                    direct = model.direct
                    if direct is not None:  # an async function awaited here, as it is (from its decode's time)
                        times.called = True
                        times.submitted = times.started = decoded
                        model.in_flight += 1
                        try:
                            result = await direct(**request.inputs)
                        except OIPError:
                            raise  # raised on purpose: the client gets its status and message
                        except (Exception, SystemExit) as exc:
                            raise model.failure(exc) from exc
                        finally:
                            times.ended = returned = now()
                            model.in_flight -= 1
                    else:
                        result = await model(request, times)
                        returned = now()
                except asyncio.CancelledError:
                    request.cancelled = True  # the client left: a model that runs on sees it (is_cancelled())
                    raise
                times.returned = True
                try:
                    outputs, parameters = model_outputs(model, request, result)
                    response = exchange.encode(Reply(model, request, outputs, parameters))
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
        finally:
            if request.held is not None:  # the shared-memory regions it read or wrote
                request.held.release()

    async def streaming(self, model: ServedModel, exchange: Exchange[Response], times: RequestTimes) -> Any:
        """The streaming body: a decoupled model's each value sent as one response as it comes
        (`start` before the first, `finish` after the last); a model that responds once, as `once`.

        The next value is asked for once the wire has taken the previous response. Whatever ends the
        request (the last value, a failure, the client that left) closes the model's generator. It
        counts as Triton counts a decoupled request: one request, one inference, one execution.
        """
        if not model.decoupled:
            return await self.once(model, exchange, times)
        if not self.traced:
            return await self._stream(model, exchange, times, ())
        level = _sampled(self.traces, model, exchange)
        token = _PARENT_LEVEL.set(level)  # the requests it makes (an ensemble's steps) follow its sampling
        try:
            return await self._stream(model, exchange, times, level)
        finally:
            _PARENT_LEVEL.reset(token)

    async def _stream(
        self, model: ServedModel, exchange: Exchange[Response], times: RequestTimes, level: tuple[str, ...]
    ) -> None:
        """`streaming`'s body, traced at `level` (the whole stream, from its request to its end) unless ()."""
        from .streaming import END  # a decoupled model's: imported by the servers that serve one

        trace = None
        if level:
            trace = Trace(self.tracer, model, level, times)
            exchange = _tapped(exchange, trace)
        request = await exchange.decode(model)
        times.decoded = now()
        steps = await model.stream(request, times)
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
                    outputs, parameters = model_outputs(model, request, result)
                    response = exchange.encode(Reply(model, request, outputs, parameters, result.__class__ is Last))
                except ModelError as error:
                    raise _logged(model, error) from error.__cause__
                times.output += now() - built
                times.returned = False
                if not started:
                    started = True
                    await exchange.start()
                await exchange.send_next(response)
            if not started:  # a generator that yields nothing: a stream of no responses
                await exchange.start()
            await exchange.finish()
        except OIPError:
            model.statistics.failed(times, now())
            raise
        except (ClientDisconnected, asyncio.CancelledError):
            request.cancelled = True
            model.statistics.cancelled(times, now())  # as Triton counts a request cancelled while it runs
            raise
        finally:
            if request.held is not None:
                request.held.release()
            model.end_stream()
            await steps.close()
            if trace is not None:
                trace.end(responses=exchange.responses)
        model.statistics.succeeded(times, now())
        return None


# The trace levels of the request being answered, for the requests it makes whose exchange says
# `follows_parent_trace` (an ensemble's steps): as in Triton, those are traced when it is (a child's trace),
# never sampled on their own. None outside any request; a BLS request (which does not say it) is sampled.
_PARENT_LEVEL: ContextVar[tuple[str, ...] | None] = ContextVar("oip_asgi_parent_trace_level", default=None)


def _sampled(traces: TraceSettings, model: ServedModel, exchange: Exchange[Any]) -> tuple[str, ...]:
    """The levels `model`'s request is traced at: its parent request's (an ensemble's step), else as sampled."""
    inherited = _PARENT_LEVEL.get() if getattr(exchange, "follows_parent_trace", False) else None
    return traces.sample(model.name) if inherited is None else inherited


def _tapped(exchange: Exchange[Response], trace: Trace) -> Exchange[Response]:
    """`exchange`, telling `trace` each tensor it decodes and encodes where the trace's level is TENSORS."""
    return cast("Exchange[Response]", _TensorsTap(exchange, trace)) if "TENSORS" in trace.level else exchange


class _TensorsTap:
    """An exchange whose request's inputs and reply's outputs a trace records (names, datatypes, shapes);
    the rest is the exchange's own."""

    __slots__ = ("_exchange", "_trace")

    def __init__(self, exchange: Exchange[Any], trace: Trace) -> None:
        self._exchange = exchange
        self._trace = trace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._exchange, name)

    async def decode(self, model: ServedModel) -> DecodedRequest:
        request = await self._exchange.decode(model)
        for name, array in request.inputs.items():
            self._trace.tensor("TENSOR_QUEUE_INPUT", name, datatype_of(array.dtype) or "BYTES", array.shape)
        return request

    def encode(self, reply: Reply) -> Any:
        for output in reply.outputs:
            self._trace.tensor("TENSOR_BACKEND_OUTPUT", output.name, output.datatype, output.array.shape)
        return self._exchange.encode(reply)


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


def log_access(model: ServedModel, status: int, exchange: Exchange[Any], times: RequestTimes) -> None:
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
