"""W10 on oip-asgi: `tokens`, an async generator (a decoupled model: each yield is one response), served
over REST (`/v2/models/tokens/generate_stream`, SSE) and gRPC (`ModelStreamInfer`) from one uvicorn loop
(uvloop + httptools, one worker), as `apps/ours_grpc_app.py` serves the identity models."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from _uvicorn import serve  # siblings: the apps run as scripts
from _w10 import MODEL, TOKEN
from starlette.applications import Starlette

import oip_asgi
import oip_asgi.grpc
from oip_asgi import Model, TensorSpec


def tokens_model() -> Model:
    token = np.array([TOKEN], dtype=object)

    async def tokens(text_input: Any, max_tokens: Any) -> AsyncIterator[dict[str, Any]]:
        # Async, as MLServer's predict_stream is: it runs on the loop.
        for _ in range(int(max_tokens[0])):
            yield {"text_output": token}

    return Model(
        tokens,
        inputs=[TensorSpec("text_input", "BYTES", [1]), TensorSpec("max_tokens", "INT32", [1])],
        outputs=[TensorSpec("text_output", "BYTES", [1])],
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    args = parser.parse_args()
    oip = oip_asgi.oip_app({MODEL: tokens_model()})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with oip_asgi.grpc.serving(oip, f"127.0.0.1:{args.grpc_port}"):
            yield

    app = Starlette(lifespan=lifespan)
    oip_asgi.mount(app, oip, path="/v2")
    serve(app, args.port)


if __name__ == "__main__":
    main()
