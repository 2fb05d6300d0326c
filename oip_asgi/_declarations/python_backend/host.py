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
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Protocol


class PythonHost(Protocol):
    """The server a Triton Python model runs in (the core's ``TritonHost``)."""

    def infer(self, model: str, version: str, request: Any) -> Any:
        """Run `request` (the core's ``DecodedRequest``) on a served model from any thread but the event loop's;
        its outputs (name to array) and parameters, or the `OIPError` it failed with raised."""

    async def infer_async(self, model: str, version: str, request: Any) -> Any:
        """As `infer`, awaited on the event loop."""

    def stream(self, model: str, version: str, request: Any) -> Iterator[Any]:
        """A decoupled model's responses to `request`, each as `infer` returns one, from a worker thread."""

    def stream_async(self, model: str, version: str, request: Any) -> AsyncIterator[Any]:
        """As `stream`, on the event loop."""

    def load_model(self, name: str, config: str, files: Mapping[str, bytes] | None) -> None: ...

    def unload_model(self, name: str) -> None: ...

    def is_model_ready(self, name: str, version: str) -> bool: ...

    def metric_family(self, name: str, description: str, kind: str) -> Any:
        """The server's family `name`, shown on its Prometheus /metrics as written (made on first use)."""


_current: contextvars.ContextVar[PythonHost | None] = contextvars.ContextVar("oip_asgi_python_host", default=None)
_live: weakref.WeakSet[Any] = weakref.WeakSet()


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
        found: PythonHost = live[0]
        return found
    where = "no server serves a Triton Python model" if not live else f"{len(live)} servers serve Triton Python models"
    raise RuntimeError(
        f"{what} needs the server that serves the calling model, and {where} here; call it from the model's "
        "initialize, execute or finalize (or a thread it started while one server runs)"
    )


def enter(host: PythonHost) -> contextvars.Token[PythonHost | None]:
    return _current.set(host)


def leave(token: contextvars.Token[PythonHost | None]) -> None:
    _current.reset(token)
