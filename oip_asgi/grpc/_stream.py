"""Triton's ModelStreamInfer: the requests of one call run concurrently, their responses written as Triton
writes them.

A decoupled model's responses go out as they come, whichever request they answer (each carries its
request's id); a model that answers once is answered in the order its requests came, as is a request
refused before its model was known. A request that fails is answered in the stream with its
``error_message``, and the stream goes on; unless the call was opened with Triton's
``triton_grpc_error: true`` header, where a failure of the model (once the request was read and
checked) ends the call with its gRPC status instead, as Triton's does.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Protocol

import grpc

from .._declarations.errors import OIPError
from .._protobuf import inference_pb2 as pb

# Requests of one stream in flight at once: later ones wait to be read until one is answered.
STREAM_WINDOW = 64
# A stream that sends no request for this long after it opens is ended.
DEFAULT_FIRST_REQUEST_TIMEOUT = 60.0
FINAL = "triton_final_response"
# The header that asks for Triton's error mode: a model's failure ends the call with its status.
GRPC_ERROR_MODE = "triton_grpc_error"

Context = grpc.aio.ServicerContext[Any, Any]


# A message, the future its sender awaits (None: nobody waits) and what counts it once sent (None: nothing).
_Item = tuple[bytes, "asyncio.Future[None] | None", "Counts | None"] | OIPError | None


class _Messages:
    """The call's messages to write, in order (`items`): a queue of one reader, the call, which awaits a future
    (`waiter`) while it is empty. A message costs at most a call to put, not asyncio.Queue's dozen."""

    __slots__ = ("items", "waiter")

    def __init__(self) -> None:
        self.items: deque[_Item] = deque()
        self.waiter: asyncio.Future[None] | None = None  # the reader's, while it waits for the next message

    def put_nowait(self, item: _Item) -> None:
        self.items.append(item)
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():  # (its reader may have been cancelled)
                waiter.set_result(None)


class _Call:
    """One ModelStreamInfer call's responses, in the order they are to be written, and its requests' count."""

    def __init__(self, error_mode: bool) -> None:
        self.error_mode = error_mode
        # Each message with the future its sender awaits (None: nobody waits), the error that ends the
        # call, or None once every request has been answered.
        self.loop = asyncio.get_running_loop()
        self.messages = _Messages()
        self.window = asyncio.Semaphore(STREAM_WINDOW)
        self.open = 0  # requests whose responses have not all been queued
        self.reading = True
        self._turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._turn.set_result(None)  # the first request's turn has come

    async def outlet(self) -> Outlet:
        """The next request's outlet (once the window has room): in order after the requests before it,
        until it turns out decoupled."""
        await self.window.acquire()
        self.open += 1
        outlet = Outlet(self, self._turn)
        self._turn = outlet.done
        return outlet

    def done(self) -> None:
        """A request's responses are all queued."""
        self.open -= 1
        self.window.release()
        self._check_end()

    def stop_reading(self) -> None:
        self.reading = False
        self._check_end()

    def end_with(self, error: OIPError) -> None:
        self.messages.put_nowait(error)

    def _check_end(self) -> None:
        if not self.reading and not self.open:
            self.messages.put_nowait(None)


class Counts(Protocol):
    """What counts a request's responses sent (its exchange)."""

    sent: int
    responses: int


class Outlet:
    """One request's responses on the call. Until its turn has come (the requests before it, that answer
    in order, have ended) its messages are held; a decoupled model's request (`unordered`) has no turn."""

    __slots__ = ("_after", "_call", "_held", "done", "ended")

    def __init__(self, call: _Call, after: asyncio.Future[None]) -> None:
        self._call = call
        self._after = after
        self._held: list[bytes] | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # its turn is over
        self.ended = False
        if not after.done():
            self._held = []
            after.add_done_callback(self._turn_came)

    @property
    def error_mode(self) -> bool:
        return self._call.error_mode

    def end_call(self, error: OIPError) -> None:
        """End the whole call with `error`'s status (Triton's error mode)."""
        self._call.end_with(error)

    def unordered(self) -> None:
        """A decoupled model's request: its responses go as they come, and the next request waits not for it."""
        self._held = None  # (nothing is held yet: it turns out decoupled before it answers)
        if self._after.done():
            self._pass_turn()
        else:
            self._after.add_done_callback(lambda _: self._pass_turn())

    def put(self, message: bytes) -> None:
        assert not self.ended, "a response after the end of a request's responses"
        if self._held is not None:
            self._held.append(message)
        else:
            self._call.messages.put_nowait((message, None, None))

    def put_taken(self, message: bytes, counts: Counts | None = None) -> Awaitable[None]:
        """Queue `message`: what is awaited until it has been handed to grpcio (a slow client slows the model),
        and counted in `counts`, if given. Its future, awaited by the sender itself: no coroutine a message."""
        assert not self.ended, "a response after the end of a request's responses"
        if self._held is not None:  # not its turn yet (a model that answers once, answering several times)
            return self._put_in_turn(message, counts)
        call = self._call
        taken = call.loop.create_future()
        messages = call.messages
        messages.items.append((message, taken, counts))  # `put_nowait`'s, inline: one call fewer a frame
        waiter = messages.waiter
        if waiter is not None:
            messages.waiter = None
            if not waiter.done():
                waiter.set_result(None)
        return taken

    async def _put_in_turn(self, message: bytes, counts: Counts | None) -> None:
        await asyncio.shield(self._after)
        await self.put_taken(message, counts)

    def end(self) -> None:
        if self.ended:
            return
        self.ended = True
        if self._held is None:  # its messages are all queued (else once its turn comes)
            self._call.done()
            if self._after.done():
                self._pass_turn()

    def _turn_came(self, _: asyncio.Future[None]) -> None:
        held, self._held = self._held, None
        if held is None:  # it turned out decoupled: it had no turn to wait for
            return
        for message in held:
            self._call.messages.put_nowait((message, None, None))
        if self.ended:
            self._call.done()
            self._pass_turn()

    def _pass_turn(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def first_within(requests: AsyncIterator[bytes], timeout: float, context: Context) -> AsyncIterator[bytes]:
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


def error_mode(context: Context) -> bool:
    """Whether the call was opened with ``triton_grpc_error: true``, as Triton reads it."""
    metadata = context.invocation_metadata() if context is not None else None
    return any(key == GRPC_ERROR_MODE and value == "true" for key, value in metadata or ())


async def answer_stream(
    requests: AsyncIterator[bytes],
    context: Context,
    answer: Callable[[bytes, Outlet], Coroutine[Any, Any, None]],
    opening: Callable[[AsyncIterator[bytes], Context], Awaitable[AsyncIterator[bytes]]] | None = None,
) -> AsyncIterator[bytes]:
    """The call's responses, each request answered by `answer` into its outlet, as Triton writes them;
    `opening` checks the call before a request is read, and gives the requests to read."""
    if opening is not None:
        requests = await opening(requests, context)
    loop = asyncio.get_running_loop()
    call = _Call(error_mode(context))
    running: set[asyncio.Task[None]] = set()

    async def read() -> None:
        try:
            async for body in requests:
                task = loop.create_task(answer(body, await call.outlet()))
                running.add(task)
                task.add_done_callback(running.discard)
        finally:
            call.stop_reading()

    reader = loop.create_task(read())
    try:
        messages = call.messages
        items = messages.items
        while True:
            if not items:  # a future awaited here, done by the next message put: no coroutine of its own
                waiter = messages.waiter = loop.create_future()
                await waiter
                continue
            item = items.popleft()
            if item is None:
                break
            if isinstance(item, OIPError):
                await context.abort(grpc.StatusCode[item.grpc_code], item.message)
            message, taken, counts = item
            # Handed to grpcio: counted, and its sender may go on to the next while grpcio sends this one (so
            # the next is queued by the time grpcio asks for it; a request holds at most one more message).
            if counts is not None:
                counts.sent += len(message)
                counts.responses += 1
            if taken is not None and not taken.done():
                taken.set_result(None)
            yield message  # returns once grpcio has sent it
        await reader  # the client's half ended, or broke: its error ends the call
    finally:
        reader.cancel()
        for task in list(running):
            task.cancel()  # the requests still answered, when the call ends before their responses do


def stream_end(
    request: pb.ModelInferRequest, error: str = "", version: str | None = None
) -> pb.ModelStreamInferResponse:
    """A request's last response on a stream with no outputs: its empty final response, or its error.

    It carries the request's id and model name, and the version served (the request's, if none was
    looked up), so that a client matches it to its request.
    """
    response = pb.ModelStreamInferResponse(error_message=error)
    infer_response = response.infer_response
    infer_response.id = request.id
    infer_response.model_name = request.model_name
    infer_response.model_version = request.model_version if version is None else version
    infer_response.parameters[FINAL].bool_param = True
    return response
