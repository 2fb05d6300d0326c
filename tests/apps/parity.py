"""tests/support/parity_cases.py's models over REST at /v2 and over gRPC beside it, in one process
(tests/e2e/test_parity.py).

``OIP_GRPC_ADDRESS`` says where gRPC listens; ``uvicorn tests.apps.parity:app`` serves REST.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

from starlette.applications import Starlette

import oip_asgi
import oip_asgi.grpc
from tests.support.parity_cases import MODELS, REPOSITORY

oip = oip_asgi.oip_app(MODELS, model_repository=REPOSITORY)


@contextlib.asynccontextmanager
async def lifespan(host: Starlette) -> AsyncIterator[None]:
    async with oip_asgi.grpc.serving(oip, address=os.environ["OIP_GRPC_ADDRESS"]):
        yield


app = Starlette(lifespan=lifespan)
oip_asgi.mount(app, oip, path="/v2")
