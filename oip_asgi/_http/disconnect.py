"""Hearing the client leave while a streamed answer goes out, and cancelling the request it answers."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import Receive


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
