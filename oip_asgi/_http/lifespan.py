"""The ASGI lifespan of an HTTP wire's app when it is the root app: load at startup, unload at shutdown."""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from .._core.server import ServerCore


async def serve_lifespan(core: ServerCore, scope: Scope, receive: Receive, send: Send) -> None:
    message = await receive()
    if message["type"] != "lifespan.startup":
        return
    async with core.hosted():  # leaving it, the last host out unloads every version (after its requests)
        # The server binds its port once startup completes: loading goes on behind readiness.
        core.start_loading()
        await send({"type": "lifespan.startup.complete"})
        while (await receive())["type"] != "lifespan.shutdown":
            pass
    await send({"type": "lifespan.shutdown.complete"})
