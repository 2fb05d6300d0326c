"""How the core calls a model's callable (`Calling`): what a `Model` declares beyond its tensors.

A model written in Python is called with its inputs as keyword arguments and declares nothing here
(`BY_KEYWORD`). The server's own readers say more: a model file's runner only computes, so the core
may call it on the event loop when that costs less than the hop to a worker thread
(``_core/inline.py``); a Triton Python model's ``execute`` takes the core's requests as they are,
runs on a number of instances (one call each at a time), and has a readiness check of its own; a decoupled
one answers each request with a stream of responses. Its unload is `Model`'s own ``unload``, as any model's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Calling:
    """How the core calls ``predict``; the core reads it once, when it starts serving a version."""

    # Called with a list of `DecodedRequest`, answering each with an `Outcome`, rather than with one
    # request's inputs as keyword arguments.
    takes_requests: bool = False
    # (With `takes_requests`.) Answering each request with an async generator of its responses: a decoupled
    # model, whose requests a dynamic batch may still collect into one call.
    decoupled: bool = False
    # A library's computation, no I/O: a call may run on the event loop when cheaper than the hop.
    computes_only: bool = False
    # At most this many calls at once (each of its instances runs one); the others wait on the event loop.
    instance_count: int | None = None
    # Whether the model serves, asked (once it has loaded) whenever its readiness is.
    ready: Callable[[], bool] | None = None

    def __post_init__(self) -> None:
        if self.instance_count is not None and self.instance_count < 1:
            raise ValueError(f"instance_count must be at least 1, got {self.instance_count}")
        if self.decoupled and not self.takes_requests:
            raise ValueError("decoupled=True is for a model that takes requests; a decoupled model is a generator")
        if self.ready is not None and not callable(self.ready):
            raise TypeError(f"ready must be callable, got {type(self.ready).__name__}")


BY_KEYWORD = Calling()  # a model written in Python: `Model`'s default
COMPUTES_ONLY = Calling(computes_only=True)  # a model file's runner
