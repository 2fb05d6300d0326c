"""Hearing the client leave while a streamed answer goes out, cancelling the request it answers, and ending
that request quietly; and, for a unary request whose model asks (`listen_when_asked`), marking it cancelled."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from starlette.types import Receive

from .._core.request import DecodedRequest
from .._core.responding import Exchange
from .._core.server import ServerCore
from .._declarations.errors import ClientDisconnected, OIPError
from .routing import SendFailed

Response = TypeVar("Response")


class DisconnectWatch:
    """Started once the request body is read, when the client's next message can only be its leaving."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.left = False  # the client went away while it was answered
        self.finished = False  # the answer's end was sent: a disconnect after it is the connection's end
        self._watch: asyncio.Task[None] | None = None

    def watch(self) -> None:
        """Watch on behalf of the running task, which a disconnect cancels."""
        self._watch = asyncio.get_running_loop().create_task(self._until_left(asyncio.current_task()))

    async def _until_left(self, answering: asyncio.Task[Any] | None) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        if answering is not None and not self.finished:
            self.left = True
            answering.cancel()

    def stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()


class StreamedExchange(Exchange[Response], Protocol[Response]):
    """An exchange whose answer streams while a `DisconnectWatch` listens for its client."""

    left: bool

    def stop_watching(self) -> None: ...

    @property
    def streams_errors(self) -> bool:
        """Whether an error now goes into the answer (`error`), not as a response of its own."""

    async def error(self, error: OIPError) -> None: ...


async def answer_streamed(
    core: ServerCore, name: str, version: str | None, exchange: StreamedExchange[Any], where: str
) -> None:
    """The streaming body's answer to `exchange`: the client's leaving ends the request here, and an error
    goes into the answer once it streams (before that, the router's error boundary answers it)."""
    try:
        await core.infer(name, version, exchange, core.respond.streaming)
    except asyncio.CancelledError:
        if not exchange.left:
            raise
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()  # our own cancellation, for a client that left: the request ends here
    except (ClientDisconnected, SendFailed):
        raise
    except Exception as exc:
        if not exchange.streams_errors:
            raise
        await exchange.error(core.client_error(exc, where))
    finally:
        exchange.stop_watching()


# How long a model's first ``is_cancelled()`` waits for the server's loop to have looked (only a loop stuck
# for this long makes it answer before looking).
FIRST_LOOK = 1.0
_PATIENCE = 8  # messages after the body before a disconnect, at most
# Guards each listener's start (held for a flag's read and write): one lock for all, not one allocated a request.
_STARTING = threading.Lock()


class _Listener:
    """Listens for a unary request's client to leave, from when its model first asks (`DecodedRequest.watch`):
    a request whose model never asks costs no listening. Its ``http.disconnect`` marks the request cancelled."""

    __slots__ = ("_loop", "_receive", "_started")

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._loop = asyncio.get_running_loop()
        self._started = False

    def __call__(self, request: DecodedRequest) -> None:
        """Start listening, from any thread; off the loop, return once it has looked (a client gone is known)."""
        with _STARTING:
            if self._started:
                return
            self._started = True
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._loop.create_task(self._listen(request))
            return
        with contextlib.suppress(RuntimeError, concurrent.futures.TimeoutError):  # the loop closed, or is stuck
            asyncio.run_coroutine_threadsafe(self._first_look(request), self._loop).result(FIRST_LOOK)

    async def _first_look(self, request: DecodedRequest) -> None:
        asyncio.get_running_loop().create_task(self._listen(request))
        await asyncio.sleep(0)  # its receive has run once: a client already gone has been heard

    async def _listen(self, request: DecodedRequest) -> None:
        # After the body, the next message is the client's leaving (or, once the response went, the end); a
        # host may say the body is over once more first. One that keeps answering otherwise is not listened to.
        with contextlib.suppress(Exception):
            for _ in range(_PATIENCE):
                if (await self._receive())["type"] == "http.disconnect":
                    request.cancelled = True
                    return


def listen_when_asked(receive: Receive) -> Callable[[DecodedRequest], None]:
    """The `DecodedRequest.watch` of a request read whole from `receive`: it listens for the client's leaving
    once first asked."""
    return _Listener(receive)
