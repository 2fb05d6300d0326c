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
