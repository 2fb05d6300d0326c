"""A decoupled model's responses, one at a time: its generator stepped from the event loop.

A sync generator is stepped on the worker threads, one job per ``next()``, and the next value is
asked for only once the wire has taken the previous one (back-pressure: a slow client slows the model
instead of filling memory). Closing it (the client left, or a response failed) runs its ``finally``
on a worker thread too, once a step still running has returned: a generator runs on one thread at a time.
An async generator is stepped and closed on the event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncGenerator, Generator
from typing import Any, Final

from .statistics import CallTimes, now
from .workers import WorkerPool

logger = logging.getLogger("oip_asgi")


class _End:
    def __repr__(self) -> str:
        return "END"


END: Final = _End()  # what `next` returns once the generator is done


class SyncSteps:
    """A sync generator's values, each computed on a worker thread."""

    __slots__ = ("_call", "_closed", "_generator", "_lock", "_pool")

    def __init__(self, generator: Generator[Any, Any, Any], pool: WorkerPool, call: CallTimes) -> None:
        self._generator = generator
        self._pool = pool
        self._call = call
        self._lock = threading.Lock()  # one step (or the close) at a time, whichever thread runs it
        self._closed = False

    async def next(self) -> Any:
        return await self._pool.run(self._step)

    def _step(self) -> Any:
        with self._lock:
            call = self._call
            if not call.started:
                call.started = now()  # on the worker thread: the wait for it was the queue
            try:
                return next(self._generator)
            except StopIteration:
                return END
            finally:
                call.ended = now()

    async def close(self) -> None:
        """Close the generator off the event loop; this returns at once, the close runs when it can."""
        if self._closed:
            return
        self._closed = True
        self._pool.run(self._close)  # not awaited: a client that left waits for nothing

    def _close(self) -> None:
        with self._lock:
            try:
                self._generator.close()
            except Exception:  # the request has ended: the log is the only place left for it
                logger.exception("a model's generator raised while it was closed")


class AsyncSteps:
    """An async generator's values, computed on the event loop."""

    __slots__ = ("_call", "_generator")

    def __init__(self, generator: AsyncGenerator[Any, Any], call: CallTimes) -> None:
        self._generator = generator
        self._call = call

    async def next(self) -> Any:
        call = self._call
        if not call.started:
            call.started = now()
        try:
            return await anext(self._generator)
        except StopAsyncIteration:
            return END
        finally:
            call.ended = now()

    async def close(self) -> None:
        try:
            await self._generator.aclose()
        except Exception:
            logger.exception("a model's async generator raised while it was closed")


Steps = SyncSteps | AsyncSteps
