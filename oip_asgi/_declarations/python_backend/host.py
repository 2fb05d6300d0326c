"""What a Triton Python model asks of the server that serves it, inverted: a `PythonHost` Protocol.

BLS (``InferenceRequest.exec``), ``load_model``, ``unload_model``, ``is_model_ready`` and custom
metrics reach the server serving the model that calls them, never a process-wide one: two servers
in one process keep their models apart. The core implements `PythonHost`; the model's adapter holds
its host and makes it current (a context variable) around each call into the model, so that
``pb_utils``'s module-level functions find it. A thread the model starts itself has no such context:
there the one live host is used, and with several a clear error names the problem.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import numpy as np


@dataclass(frozen=True, slots=True)
class BLSRequest:
    """A request a model makes of a model the same server serves (``InferenceRequest.exec``)."""

    model: str
    version: str  # "" for the newest
    inputs: dict[str, tuple[str, np.ndarray]]  # each input's protocol datatype and array, by name
    id: str
    parameters: dict[str, Any]
    outputs: list[str]  # those the model asked for; none: every output


@dataclass(frozen=True, slots=True)
class BLSResponse:
    """A served model's answer to a `BLSRequest`: its outputs by name and the response's parameters; `last`
    when a decoupled model sent it as its final response (then no empty final response follows)."""

    outputs: dict[str, np.ndarray]
    parameters: dict[str, Any] | None
    last: bool = False


class MetricSeries(Protocol):
    """One labelled series of a custom metric family."""

    def increment(self, value: float) -> None: ...

    def set(self, value: float) -> None: ...

    def observe(self, value: float) -> None: ...

    def value(self) -> float: ...


class MetricFamilyHandle(Protocol):
    """A custom metric family, as the server keeps it: its series by labels."""

    def series(self, labels: dict[str, str], buckets: list[float]) -> MetricSeries: ...


class PythonHost(Protocol):
    """The server a Triton Python model runs in (the core's ``TritonHost``)."""

    def infer(self, request: BLSRequest) -> BLSResponse:
        """Run `request` on a served model from any thread but the event loop's; its response, or the
        `OIPError` it failed with raised."""

    async def infer_async(self, request: BLSRequest) -> BLSResponse:
        """As `infer`, awaited on any event loop (the server's, or a model instance's own)."""

    def stream(self, request: BLSRequest) -> Iterator[BLSResponse]:
        """A decoupled model's responses to `request`, each as `infer` returns one, waited for on this
        thread (any but the event loop's)."""

    def load_model(self, name: str, config: str, files: Mapping[str, bytes] | None) -> None: ...

    def unload_model(self, name: str) -> None: ...

    def is_model_ready(self, name: str, version: str) -> bool: ...

    def metric_family(self, name: str, description: str, kind: str) -> MetricFamilyHandle:
        """The server's family `name`, shown on its Prometheus /metrics as written (made on first use)."""


_current: contextvars.ContextVar[PythonHost | None] = contextvars.ContextVar("oip_asgi_python_host", default=None)
_live: weakref.WeakSet[PythonHost] = weakref.WeakSet()


def remember(host: PythonHost) -> None:
    """`host` serves Triton Python models now (a thread of a model finds it when it is the only one)."""
    _live.add(host)


def current(what: str) -> PythonHost:
    """The host of the model running in this context; `what` names the call for the error without one."""
    host = _current.get()
    if host is not None:
        return host
    live = list(_live)
    if len(live) == 1:
        return live[0]
    where = "no server serves a Triton Python model" if not live else f"{len(live)} servers serve Triton Python models"
    raise RuntimeError(
        f"{what} needs the server that serves the calling model, and {where} here; call it from the model's "
        "initialize, execute or finalize (or a thread it started while one server runs)"
    )


# What `enter` returns for `leave`: None where there was no host to make current.
Entered: TypeAlias = "contextvars.Token[PythonHost | None] | None"


def enter(host: PythonHost | None) -> Entered:
    """`host` current in this context until `leave`; nothing to do without one."""
    return _current.set(host) if host is not None else None


def leave(token: Entered) -> None:
    if token is not None:
        _current.reset(token)


# Set while a model's initialize or finalize runs (in its context, not in the threads it starts): Triton
# serves BLS only to execute, and to what runs once initialize has returned.
_outside_execute: contextvars.ContextVar[bool] = contextvars.ContextVar("oip_asgi_outside_execute", default=False)


def outside_execute() -> contextvars.Token[bool]:
    """BLS refused in this context until `back` (a model's initialize or finalize runs)."""
    return _outside_execute.set(True)


def back(token: contextvars.Token[bool]) -> None:
    _outside_execute.reset(token)


def in_execute() -> bool:
    """Whether BLS may run here: not in a model's initialize or finalize."""
    return not _outside_execute.get()
