"""W5 in-process, for instruction counts: a server's imports, its app built as W5's server builds it, the ASGI
lifespan's startup run and one `/v2/health/ready` answered, on uvloop, without the socket.

`python bench/w5_ready.py floor|ours` does that once (instructions.py's `ready-floor` and `ready-ours` count
it in a fresh interpreter): the floor's Starlette app (apps/floor_app.py), or ours as apps/ours_app.py serves
it (the serve command's app of the identity models, loaded and its heap settled as the serve command does).
Everything W5's timed start adds to it (the interpreter's own start, uvicorn's config and its socket) is the
same for both servers.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "apps"))

# uvicorn's modules that a server on uvloop and httptools imports before it serves, as both servers do.
import httptools  # noqa: F401
import uvicorn.config
import uvicorn.lifespan.on
import uvicorn.loops.uvloop
import uvicorn.main
import uvicorn.protocols.http.httptools_impl
import uvicorn.protocols.websockets.auto
import uvicorn.server  # noqa: F401
import uvloop


def floor_app() -> Any:
    import floor_app

    return floor_app.build(b"{}")


def ours_app() -> Any:
    import ours_app  # its imports, as W5's server makes them

    import oip_asgi
    from oip_asgi._hosts.cli.served import Served

    models = {"identity": ours_app.identity, "identity_sync": ours_app.identity_sync}
    return Served(oip_asgi.oip_app(models, freeze_heap=True))


async def ready(app: Any) -> int:
    messages: list[dict[str, Any]] = [{"type": "lifespan.startup"}]
    started = asyncio.get_running_loop().create_future()

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await started  # then wait for ever: the lifespan's shutdown is not measured
        await asyncio.Event().wait()
        return {}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set_result(None)

    lifespan = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send))
    await started
    path = "/v2/health/ready"
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": [],
        "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 1), "state": {},
    }  # fmt: skip
    answers: list[dict[str, Any]] = []

    async def request() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def answer(message: dict[str, Any]) -> None:
        answers.append(message)

    await app(scope, request, answer)
    assert not lifespan.done()  # serving; its shutdown (and what stopping imports) is not W5's
    return int(answers[0]["status"])


def main() -> None:
    app = {"floor": floor_app, "ours": ours_app}[sys.argv[1]]()
    status = uvloop.new_event_loop().run_until_complete(ready(app))
    assert status == 200, status
    os._exit(0)  # ready, still serving: its shutdown and the interpreter's are not W5's (nor counted, for either)


if __name__ == "__main__":
    main()
