"""OpenTelemetry spans of the requests the trace settings sample (`trace_settings.py`; Triton's trace extension
in its "opentelemetry" mode).

A traced request is one span, ``oip.model <name>`` (attributes ``oip.model.name``, ``oip.model.version``, and
``oip.batch_size``, the rows of the call it rode in, or ``oip.responses`` for a stream), from the request's
first byte to its response. It is the current span while the model runs, so spans the model starts nest
under it, and it nests under the request's own span where the host is instrumented. Its levels say what it
holds besides: TIMESTAMPS, the request's moments as events named as Triton names its timestamps
(REQUEST_START, QUEUE_START, COMPUTE_START, COMPUTE_INPUT_END, COMPUTE_OUTPUT_START, COMPUTE_END,
REQUEST_END; inputs are decoded before the queue here, so COMPUTE_INPUT_END is COMPUTE_START); TENSORS, an
event per input (TENSOR_QUEUE_INPUT) and per output (TENSOR_BACKEND_OUTPUT), as Triton's activities, with
the tensor's name, datatype and shape, never its data: a trace exporter is no place for what clients send.

opentelemetry-api is not a dependency: it is imported when something is first traced; a server asked
to trace without it says how to install it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from .._declarations.errors import OIPError
from .._version import __version__
from .serving import ServedModel
from .statistics import RequestTimes, now

INSTALL = "pip install opentelemetry-api"


class TracingUnavailable(OIPError, status_code=503, grpc_code="UNAVAILABLE"):
    """Tracing asked of a server without OpenTelemetry's API (Triton's UNAVAILABLE for a server without tracing)."""


def tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        raise ImportError(f"tracing needs the OpenTelemetry API: {INSTALL}") from None
    return trace.get_tracer("oip_asgi", __version__)


class Trace:
    """One sampled request's span, from its first byte (`times.start`) to its response."""

    __slots__ = ("_offset", "level", "span", "times")

    def __init__(self, tracer: Any, model: ServedModel, level: tuple[str, ...], times: RequestTimes) -> None:
        self.level = level
        self.times = times
        self._offset = time.time_ns() - now()  # OpenTelemetry's times are the wall clock's
        attributes = {"oip.model.name": model.name, "oip.model.version": model.version}
        self.span = tracer.start_span(f"oip.model {model.name}", attributes=attributes, start_time=self.at(times.start))

    def at(self, moment: int) -> int:
        return moment + self._offset

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """The span current while the block runs (a model that raises marks it an error), ended after it."""
        from opentelemetry.trace import use_span

        try:
            with use_span(self.span, end_on_exit=False, record_exception=True, set_status_on_exception=True):
                yield
        finally:
            self.end(compute=True)

    def end(self, *, compute: bool = False, responses: int | None = None) -> None:
        """End the span with its request's moments (`compute`: the model's call's too, once it returned)."""
        times, span, ended = self.times, self.span, now()
        if compute and times.returned:
            span.set_attribute("oip.batch_size", times.batch_size)
        if responses is not None:
            span.set_attribute("oip.responses", responses)
        if "TIMESTAMPS" in self.level:
            moments = [("REQUEST_START", times.start)]
            if compute and times.called:
                moments.append(("QUEUE_START", times.submitted))
            if compute and times.started:
                moments += [("COMPUTE_START", times.started), ("COMPUTE_INPUT_END", times.started)]
            if compute and times.returned and times.ended:
                output_end = times.ended + times.output
                moments += [("COMPUTE_OUTPUT_START", times.ended), ("COMPUTE_END", output_end)]
            moments.append(("REQUEST_END", ended))
            for name, moment in moments:
                span.add_event(name, timestamp=self.at(moment))
        span.end(end_time=self.at(ended))

    def tensor(self, activity: str, name: str, datatype: str, shape: tuple[int, ...]) -> None:
        attributes = {"tensor.name": name, "tensor.datatype": datatype, "tensor.shape": ",".join(map(str, shape))}
        self.span.add_event(activity, attributes=attributes)
