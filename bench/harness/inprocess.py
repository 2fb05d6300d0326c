"""An ASGI app driven with no server: one POST's scope, receive and send; each answer must be a 200."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


def exchange(path: str, body: bytes, header_length: int | None = None) -> tuple[dict[str, Any], Any, Any, list[int]]:
    """The scope, receive and send of a POST of `body` to `path` (its JSON header's length given for a body with
    binary tensors), and the statuses the app answers with."""
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if header_length is not None:
        headers.append((b"inference-header-content-length", b"%d" % header_length))
    message = {"type": "http.request", "body": body, "more_body": False}
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return message

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {"type": "http", "method": "POST", "path": path, "root_path": "", "query_string": b"", "headers": headers}
    return scope, receive, send, statuses


def drive(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that never waits: receive and send above return at once."""
    try:
        coroutine.send(None)
    except StopIteration:
        return
    raise RuntimeError("the app waited on something")


def requester(app: Any, path: str, body: bytes, header_length: int | None = None) -> Callable[[], None]:
    """One request a call, driven with no event loop (the app must never wait: an async model on the loop)."""
    scope, receive, send, statuses = exchange(path, body, header_length)

    def request() -> None:
        drive(app(dict(scope), receive, send))

    request()
    if statuses != [200]:
        raise RuntimeError(f"{path} answered {statuses}")
    return request


def app_requester(loop: asyncio.AbstractEventLoop, app: Any, path: str, body: bytes) -> Callable[[int], None]:
    """`count` requests one after another through the app, on the loop (a sync model's worker thread included)."""
    scope, receive, send, statuses = exchange(path, body)

    async def requests(count: int) -> None:
        for _ in range(count):
            await app(dict(scope), receive, send)

    def run(count: int) -> None:
        statuses.clear()
        loop.run_until_complete(requests(count))
        if set(statuses) != {200}:
            raise RuntimeError(f"{path} answered {sorted(set(statuses))}")

    return run


class _Transport:
    """What uvicorn's protocol writes to, in place of a socket: the bytes it writes, counted."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def server_requester(loop: asyncio.AbstractEventLoop, app: Any, path: str, body: bytes) -> Callable[[int], None]:
    """`count` requests one after another through uvicorn's own HTTP protocol (httptools, uvloop), over
    one keep-alive connection whose socket is a buffer: the whole server's work but the kernel's, as
    W1 makes it (wrk's request, the response's bytes), with no other process and no noise."""
    from uvicorn.config import Config
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.server import ServerState

    config = Config(app, http="httptools", loop="none", lifespan="off", log_level="warning", access_log=False)
    config.load()
    state = ServerState()
    transport = _Transport()
    protocol = HttpToolsProtocol(config, state, {}, _loop=loop)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    raw = head + body

    async def requests(count: int) -> None:
        protocol.connection_made(transport)  # type: ignore[arg-type]
        for _ in range(count):
            protocol.data_received(raw)
            while state.tasks:
                await asyncio.gather(*state.tasks)

    def run(count: int) -> None:
        transport.written.clear()
        loop.run_until_complete(requests(count))
        answered = transport.written.count(b"HTTP/1.1 200 OK\r\n")
        if answered != count:
            head = bytes(transport.written[:300])
            raise RuntimeError(f"{path}: {answered} of {count} requests answered 200: {head!r}")

    return run
