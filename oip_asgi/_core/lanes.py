"""The calls of a sync model with a fixed number of instances (a Triton Python model's instance groups).

At most `count` calls run at once, one per instance. A call waits in a queue, on the loop, and a
worker thread running calls (a lane) takes the next from the queue as soon as its call ends, without
going back to the event loop in between: under load the threads stay busy rather than being woken
for every call (bench W12: one instance, sixteen clients, a wake-up each way per request cost ~1.8x
the CPU of a model free to run on many threads). A lane ends when the queue is empty.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import threading
from collections.abc import Callable
from typing import Any

from .workers import Job, WorkerPool, called, hand_back


class Lanes:
    """Up to `count` calls at a time on `pool`'s threads, the rest queued in order."""

    def __init__(self, pool: WorkerPool, count: int) -> None:
        self.pool = pool
        self.count = count
        self._queue: collections.deque[Job] = collections.deque()
        self._lock = threading.Lock()
        self._running = 0  # lanes started and not ended

    def run(self, function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            self._queue.append((loop, future, contextvars.copy_context(), function, args))
            start = self._running < self.count
            if start:
                self._running += 1
        if start:
            self.pool.run(self._lane)
        return future

    def _lane(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running -= 1
                    return
                loop, future, context, function, args = self._queue.popleft()
            if future.cancelled():  # the client left before its turn: nothing to run
                continue
            hand_back(loop, future, *called(context, function, args))
