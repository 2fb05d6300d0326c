"""The one uvicorn configuration that ours and the floor share, so they are measured alike; ours' app on it
(REST at /v2, gRPC in the same loop when asked), and a bare grpc.aio server in its loop for the floors."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import uvicorn

if TYPE_CHECKING:
    from starlette.routing import BaseRoute


def serve(app: Any, port: int) -> None:
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        workers=1,
        log_level="warning",
        access_log=False,
    )


class Passthrough:
    """A host's middleware that does nothing: the least any pure-ASGI middleware costs (ours `--host mounted`)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


HOSTS = ("serve", "mounted", "starlette")


def serve_oip(oip: Any, port: int, grpc_port: int | None = None, load: bool = False, host: str = "serve") -> None:
    """`oip` at /v2, served over gRPC at `grpc_port` from the same loop (`oip_asgi.grpc.serving`), the models
    loaded before the first request when `load`. `host` is what serves /v2: the serve command's own app
    (`serve`, the default), a Starlette host with a middleware of its own that our routes go through
    (`mounted`), or a plain Starlette mount (`starlette`, what ours was before issue 40)."""
    import oip_asgi

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        if load:
            await oip.load()  # as docs/integrations.md shows: loaded before the first request, then the heap frozen
        async with contextlib.AsyncExitStack() as stack:
            if grpc_port is not None:
                import oip_asgi.grpc

                await stack.enter_async_context(oip_asgi.grpc.serving(oip, f"127.0.0.1:{grpc_port}"))
            yield

    if host == "serve":
        try:
            from oip_asgi._hosts.cli.served import Served
        except ImportError:  # `base`: a commit from before the serve command's app
            host = "starlette"
        else:  # as `oip-asgi serve` runs it: its lifespan loads the models behind readiness, and starts gRPC
            serve(Served(oip, grpc_address=None if grpc_port is None else f"127.0.0.1:{grpc_port}"), port)
            return
    # Starlette's app for these hosts only: the serve command's app imports none of it, nor does ours under W5.
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    app = Starlette(lifespan=lifespan, middleware=[Middleware(Passthrough)] if host == "mounted" else [])
    oip_asgi.mount(app, oip, path="/v2")
    serve(app, port)


def serve_floor(routes: Sequence[BaseRoute], port: int, grpc: Any, grpc_port: int, options: Sequence[Any] = ()) -> None:
    """Bare Starlette routes, and `grpc` (a generic handler) on a bare grpc.aio server in the same loop."""
    import grpc as grpcio
    from starlette.applications import Starlette

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server = grpcio.aio.server(options=list(options))
        server.add_generic_rpc_handlers((grpc,))
        server.add_insecure_port(f"127.0.0.1:{grpc_port}")
        await server.start()
        try:
            yield
        finally:
            await server.stop(None)

    serve(Starlette(routes=list(routes), lifespan=lifespan), port)
