"""REST and gRPC together: the example models at /v2 over HTTP, and over gRPC beside it, in one process.

Run it with ``uvicorn examples.grpc_app:app``: REST on http://127.0.0.1:8000/v2, gRPC on 127.0.0.1:8001
(``OIP_GRPC_ADDRESS=[::]:8001`` listens on every interface). Needs the grpc extra.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

from fastapi import FastAPI

import oip_asgi
import oip_asgi.grpc
from examples.models import models

oip = oip_asgi.oip_app(models)


@contextlib.asynccontextmanager
async def lifespan(host: FastAPI) -> AsyncIterator[None]:
    # The models load, then the gRPC server runs in uvicorn's event loop, on the same models. At shutdown
    # it stops (gracefully) first, then the models unload, once for both wires.
    address = os.environ.get("OIP_GRPC_ADDRESS", "127.0.0.1:8001")
    async with oip.lifespan(host), oip_asgi.grpc.serving(oip, address=address, health=True, reflection=True):
        yield


app = FastAPI(title="oip-asgi over REST and gRPC", lifespan=lifespan)
oip_asgi.mount(app, oip, path="/v2")
