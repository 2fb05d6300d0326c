"""A ModelStreamInfer call: its requests answered side by side, their responses sent in the requests' order.

Each request gets an `Outlet`; the call takes the requests in turn and sends each one's responses until its
end. On a call of grpcio's, the request whose turn it is writes its responses to grpcio itself.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import grpc

from .._declarations.errors import ClientDisconnected

# Requests of one stream in flight at once: later ones wait to be read until the oldest is answered.
STREAM_WINDOW = 64


async def _first_within(requests: AsyncIterator[bytes], timeout: float, context: Any) -> AsyncIterator[bytes]:
    """`requests`, ending the call when the first one takes longer than `timeout` seconds to come."""
    iterator = aiter(requests)
    try:
        first = await asyncio.wait_for(anext(iterator), timeout)
    except StopAsyncIteration:
        return
    except asyncio.TimeoutError:
        await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"the stream sent no request within {timeout:g} s")
        return
    yield first
    async for request in iterator:
        yield request


class Outlet:
    """One request's responses on a ModelStreamInfer call, in the order sent, until its end.

    The call sends the requests' responses one request after the other: answers keep their requests'
    order. A response put by `put_taken` waits in the outlet until the call has taken it (and `next` hands
    it over), so a request that answers many times goes no faster than its client reads. Once its request
    is the call's first, the call may give the outlet a `writer` (grpcio's write): from then on each
    response goes straight to grpcio from the request's own task, with no hand-off between tasks.
    """

    __slots__ = ("_arrived", "_queued", "_taken", "_unfinished", "ended", "writer")

    def __init__(self) -> None:
        self._queued: collections.deque[bytes] = collections.deque()
        self._unfinished = 0  # responses put and not yet taken
        self._arrived: asyncio.Future[None] | None = None  # `next` waiting for a response or the end
        self._taken: asyncio.Future[None] | None = None  # `put_taken` waiting for its responses to be taken
        self.writer: Callable[[bytes], Awaitable[None]] | None = None
        self.ended = False

    def put(self, message: bytes) -> None:
        assert not self.ended, "a response after the end of a request's responses"
        self._queued.append(message)
        self._unfinished += 1
        self._wake()

    async def put_taken(self, message: bytes) -> None:
        writer = self.writer
        if writer is not None:
            try:
                await writer(message)  # returns once grpcio has taken it
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the call has ended under it: nobody left to answer
                raise ClientDisconnected from exc
            return
        self.put(message)
        self._taken = asyncio.get_running_loop().create_future()
        await self._taken

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self._wake()

    def _wake(self) -> None:
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    async def next(self) -> bytes | None:
        """The next response; None at the end."""
        while not self._queued:
            if self.ended:
                return None
            self._arrived = asyncio.get_running_loop().create_future()
            await self._arrived
        return self._queued.popleft()

    def taken(self) -> None:
        """The response `next` gave has gone to grpcio."""
        self._unfinished -= 1
        if not self._unfinished:
            self._release()

    def take(self) -> list[bytes]:
        """Every response waiting, in order, for the call to send; `put_taken` waits on until `write_itself`."""
        messages = list(self._queued)
        self._queued.clear()
        return messages

    def _release(self) -> None:
        if self._taken is not None and not self._taken.done():
            self._taken.set_result(None)

    def write_itself(self, writer: Callable[[bytes], Awaitable[None]]) -> None:
        """From now on its responses go to `writer` as they come; those taken have been sent (none is waiting)."""
        self.writer = writer
        self._unfinished = 0
        self._release()


async def responses(
    requests: AsyncIterator[bytes],
    context: Any,
    respond: Callable[[bytes, Outlet], Coroutine[Any, Any, None]],
    write: Callable[[bytes], Awaitable[None]] | None,
    check: Callable[[Any], Awaitable[None]] | None,
    first_request_timeout: float | None,
) -> AsyncIterator[bytes]:
    """A ModelStreamInfer call's responses: `respond` answers each request (a task each, `STREAM_WINDOW` at
    once) into its outlet, and the requests' responses come in turn, yielded, or with `write`, written, the
    first request's straight from its own task (`Outlet.write_itself`). `check` vets the call before any
    request is read; the first request must come within `first_request_timeout` seconds."""
    if check is not None:  # ended before a request is read, as Triton does
        await check(context)
    if first_request_timeout is not None:
        requests = _first_within(requests, first_request_timeout, context)
    loop = asyncio.get_running_loop()
    # The call's requests, each with its outlet, in the order they came.
    pending: asyncio.Queue[tuple[asyncio.Task[None], Outlet] | None] = asyncio.Queue()
    window = asyncio.Semaphore(STREAM_WINDOW)

    async def read() -> None:
        try:
            async for body in requests:
                await window.acquire()
                outlet = Outlet()
                pending.put_nowait((loop.create_task(respond(body, outlet)), outlet))
        finally:
            pending.put_nowait(None)

    reader = loop.create_task(read())
    task = None
    try:
        while (item := await pending.get()) is not None:
            task, outlet = item
            if write is None:
                while (message := await outlet.next()) is not None:
                    yield message  # returns once grpcio has sent it
                    outlet.taken()
            else:
                while waiting := outlet.take():  # what it answered while it waited its turn
                    for message in waiting:
                        await write(message)
                outlet.write_itself(write)  # the call's first now: it writes its own responses
                await task
                for message in outlet.take():  # what it put without waiting (an error, its one answer)
                    await write(message)
            await task
            window.release()
        await reader  # the client's half ended, or broke: its error ends the call
    finally:
        reader.cancel()
        if task is not None:
            task.cancel()  # the request being sent, when the call ends before its responses do
        while not pending.empty():
            left = pending.get_nowait()
            if left is not None:
                left[0].cancel()
