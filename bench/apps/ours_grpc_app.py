"""oip-asgi serving the identity models over gRPC (`oip_asgi.grpc`), in the event loop of uvicorn
(uvloop + httptools, one worker) that serves the same app's REST half at /v2."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from _uvicorn import serve  # a sibling: the apps run as scripts
from starlette.applications import Starlette

import oip_asgi
import oip_asgi.grpc


async def identity(**inputs: Any) -> dict[str, Any]:
    return inputs  # async, as the peers' identities are: it runs on the loop


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    args = parser.parse_args()
    oip = oip_asgi.oip_app({"identity": identity, "identity_bytes": identity})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with oip_asgi.grpc.serving(oip, f"127.0.0.1:{args.grpc_port}"):
            yield

    app = Starlette(lifespan=lifespan)
    oip_asgi.mount(app, oip, path="/v2")
    serve(app, args.port)


if __name__ == "__main__":
    main()
