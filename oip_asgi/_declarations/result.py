"""What a model may return besides its outputs alone."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Result:
    """What a model returns when it also sets the response's parameters, or its outputs' parameters.

    ``outputs`` is what the model would return on its own (a mapping of output name to array-like,
    or one array-like); ``parameters`` go into the response's ``parameters``, ``output_parameters``
    (output name to its parameters) into each output's. Parameter values are strings, numbers or booleans.
    """

    outputs: Any
    parameters: Mapping[str, Any] | None = None
    output_parameters: Mapping[str, Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class Last(Result):
    """A decoupled model's response that is its request's last (a Triton model's, sent with the FINAL flag):
    a wire that marks responses final marks this one, and sends no empty final response after it."""


class Later:
    """An outcome that comes after the call that took its request returned: a Triton Python model's request
    answered through its response sender from a thread or task of the model's own. The core awaits it,
    or hands it on (`deliver`), on the event loop; a client that leaves meanwhile cancels the wait."""

    __slots__ = ("future",)

    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self.future = future

    def __await__(self) -> Generator[Any, None, Any]:
        return asyncio.wrap_future(self.future).__await__()

    def deliver(self, target: asyncio.Future[Any]) -> None:
        """Settle `target` (a future of the running loop) with the outcome once it has come."""

        def settle(arrived: asyncio.Future[Any]) -> None:
            if target.done():
                return
            if arrived.cancelled():
                target.cancel()
            elif arrived.exception() is not None:
                target.set_exception(arrived.exception())  # type: ignore[arg-type]
            else:
                target.set_result(arrived.result())

        asyncio.wrap_future(self.future).add_done_callback(settle)
