"""uvicorn's HTTP protocols with a read timeout: a client whose request stops arriving is let go.

uvicorn times out only idle keep-alive connections, after a response. A client that connects and
sends nothing, or half a request line, headers or body, then stops, holds its connection (and, mid-
body, the request's buffers) for as long as it likes. These protocols close a connection when no
byte of the request it is sending has arrived for `read_timeout` seconds, as nginx's
client_header_timeout and client_body_timeout do. A request received whole is the app's to answer,
however long that takes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_READ_TIMEOUT = 30.0

# Set by the serve command in each process before it serves (uvicorn builds a protocol per connection).
read_timeout = DEFAULT_READ_TIMEOUT


class _ReadTimeout:
    """Mixed into a uvicorn protocol: a timer per connection, pushed back by every byte that arrives."""

    transport: asyncio.Transport
    cycle: Any  # uvicorn's RequestResponseCycle, None before the first request

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._last_read = time.monotonic()
        self._read_timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(read_timeout, self._check)

    def data_received(self, data: bytes) -> None:
        # A float stored per chunk: the timer is not rescheduled for each one, it looks when it fires.
        self._last_read = time.monotonic()
        super().data_received(data)  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None
        super().connection_lost(exc)  # type: ignore[misc]

    def _check(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        quiet = time.monotonic() - self._last_read
        cycle = self.cycle
        # Waiting for the app (its request whole) or between requests (uvicorn's keep-alive timer is on):
        # not a stalled read.
        waiting_for_app = cycle is not None and not cycle.more_body and not cycle.response_complete
        between_requests = cycle is not None and cycle.response_complete
        if quiet >= read_timeout and not waiting_for_app and not between_requests:
            self.transport.close()  # the app, if it was reading the body, gets http.disconnect
            return
        wait = read_timeout - quiet if quiet < read_timeout else read_timeout
        self._read_timer = asyncio.get_running_loop().call_later(wait, self._check)


class H11ReadTimeout(_ReadTimeout, H11Protocol):
    pass


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # uvicorn without its [standard] extra: h11 only
    PROTOCOL = "oip_asgi._hosts.cli.timeouts:H11ReadTimeout"
else:

    class HttpToolsReadTimeout(_ReadTimeout, HttpToolsProtocol):
        pass

    PROTOCOL = "oip_asgi._hosts.cli.timeouts:HttpToolsReadTimeout"
