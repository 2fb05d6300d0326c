"""Worker threads for sync models: the event loop never blocks on one, and the hand-off is cheap.

anyio's ``to_thread.run_sync`` costs ~50 us of CPU per call (a capacity limiter, a task-group-aware
wait, a new future and two wake-ups); ``run_in_executor`` ~25 us. Here a call is one put on a
`queue.SimpleQueue` (C) and one ``call_soon_threadsafe`` back: measured in `bench/handoff.py`.

Threads start on demand up to `max_threads` and stay until the pool is shut down; a call that finds
no idle thread waits in the queue (each model's `max_concurrency` bounds its own calls before they
get here). Context variables reach the call, as they do through anyio. After `fork`, a child
starts with no threads and a fresh queue, and starts its own on demand.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import queue
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

DEFAULT_MAX_THREADS = 40  # anyio's default, which sync models had before


class Escaped(Exception):
    """A `BaseException` that is not an `Exception` (SystemExit, KeyboardInterrupt) raised by a call.

    Handed to the event loop wrapped, so that it fails the call instead of stopping the loop.
    """

    def __init__(self, exception: BaseException) -> None:
        super().__init__(f"{type(exception).__name__}: {exception}")
        self.exception = exception


# A call handed to a thread: the loop and future its caller waits on, its context, the function, its arguments.
Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[..., Any], tuple[Any, ...]]


class WorkerPool:
    def __init__(self, max_threads: int = DEFAULT_MAX_THREADS) -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        self.max_threads = max_threads
        self._reset()
        # The threads do not survive a fork (gunicorn --preload, a forking WSGI server): start afresh.
        os.register_at_fork(after_in_child=functools.partial(_reset_after_fork, weakref.ref(self)))

    def _reset(self) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    @property
    def threads(self) -> int:
        return self._threads

    def run(self, function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """`function(*args)` on a worker thread, in the caller's context; await the future for its result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._idle:
                self._idle -= 1  # that thread takes this job
            elif self._threads < self.max_threads:
                self._threads += 1
                threading.Thread(target=self._work, args=(self._jobs,), name="oip-asgi-model", daemon=True).start()
            self._jobs.put((loop, future, contextvars.copy_context(), function, args))
        return future

    @contextlib.contextmanager
    def lent(self) -> Iterator[None]:
        """The calling thread waits on work this pool may have to run (a model waiting on another model's
        answer): the pool may start one thread more meanwhile, so that waiting never starves it."""
        with self._lock:
            self.max_threads += 1
            if self._jobs.qsize() > self._idle:  # jobs wait that no idle thread will take: one more thread now
                self._threads += 1
                threading.Thread(target=self._work, args=(self._jobs,), name="oip-asgi-model", daemon=True).start()
        try:
            yield
        finally:
            with self._lock:
                self.max_threads -= 1

    def shutdown(self) -> None:
        """Stop the threads once their jobs are done; the pool starts new ones if it is used again."""
        with self._lock:
            for _ in range(self._threads):
                self._jobs.put(None)  # after any jobs still waiting: those are done first
            self._jobs = queue.SimpleQueue()
            self._threads = self._idle = 0

    def _work(self, jobs: queue.SimpleQueue[Job | None]) -> None:
        # `jobs` is this thread's queue, even once shutdown has given the pool a new one.
        while True:
            job = jobs.get()
            if job is None:
                return
            loop, future, context, function, args = job
            result, error = called(context, function, args)
            with self._lock:
                # Idle before the caller hears back, so that its next call finds this thread. With a
                # backlog it is counted early, which only keeps a pool at its limit from starting
                # threads it may not start anyway. A thread of a queue that shutdown replaced is no
                # longer the pool's: it drains its queue and ends.
                if jobs is self._jobs:
                    self._idle = min(self._idle + 1, self._threads)
            hand_back(loop, future, result, error)
            del job, future, result, error, function, args  # hold nothing between jobs


def _reset_after_fork(pool: weakref.ref[WorkerPool]) -> None:
    alive = pool()
    if alive is not None:
        alive._reset()


def called(context: contextvars.Context, function: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, Any]:
    """`function(*args)` run in `context`, on a thread: its result, or the error its caller gets instead."""
    try:
        return context.run(function, *args), None
    except Exception as exc:
        return None, exc
    except BaseException as exc:  # SystemExit from argparse, say: the call's failure, not the thread's
        return None, Escaped(exc)


def hand_back(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: Any) -> None:
    """Settle `future` with the call's outcome on its loop, from the thread that ran it."""
    try:
        loop.call_soon_threadsafe(_settle, future, result, error)
    except RuntimeError:  # the loop has closed: nobody is waiting
        pass


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled (the client left); the thread is free again all the same
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
