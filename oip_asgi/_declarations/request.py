"""A request as every wire hands it to the core: the one value that carries it through serving,
batching and the worker pool to the model, and what the client asked to get back.

It is a plain value, declared here because a model may take it as it is (`Calling.takes_requests`:
a Triton Python model's ``execute``); the core and the wires import it from ``_core/request.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
import numpy as np


@dataclass(slots=True)
class RequestedOutput:
    name: str
    classification: int | None = None
    binary: bool | None = None  # REST's `binary_data` parameter, when the request sets it
    placed: Any = None  # where the wire writes it instead of answering its data: a shared-memory slice


class Held(Protocol):
    """What a request holds until it is responded to (the shared-memory regions it reads or writes)."""

    def release(self) -> None: ...


class DecodedRequest(msgspec.Struct):  # a Struct: made for every request, in C (a dataclass's __init__ is Python)
    """A request's tensors as arrays, its parameters (the request's and each input's), and what to answer.

    `cancelled` turns true once its client has left (the core sets it when the request is cancelled, a
    wire that hears a client leave only by listening sets it once `watch` was called); a model that
    can tell its request was cancelled (Triton's ``request.is_cancelled()``) reads it.
    """

    inputs: dict[str, np.ndarray]
    id: str | None = None
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)
    outputs: list[RequestedOutput] | None = None  # None: every output
    binary_outputs: bool = False  # REST: outputs the request does not list come back binary
    input_parameters: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)  # each input's, where it has any
    # The request parameters Triton's frontends act on themselves (sequence_id, priority, timeout, ...),
    # taken out of `parameters` by the wire: a model never sees them there (`_core/reserved.py`).
    controls: dict[str, Any] | None = None
    cancelled: bool = False
    # Starts listening for the client's leaving, where the wire listens only when asked (REST's unary
    # requests); called once, with this request, from any thread, by whoever first asks whether it was
    # cancelled. (Handed the request rather than holding it: no reference cycle to collect per request.)
    watch: Callable[[DecodedRequest], None] | None = None
    held: Held | None = None  # released by the core once the request is responded to, however it ends

    def is_cancelled(self) -> bool:
        """Whether the client has left; the first time it is asked, the wire starts listening if it must."""
        watch = self.watch
        if watch is not None and not self.cancelled:
            self.watch = None
            watch(self)
        return self.cancelled
