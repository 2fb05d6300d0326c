"""The gRPC floor: a bare grpc.aio ModelInfer that answers with the request's own bytes, in the event
loop of the same uvicorn (uvloop + httptools) as ours, beside the two readiness URLs the harness polls.
What grpcio itself costs per call: no protobuf parsing, no protocol, no model."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from _uvicorn import serve  # a sibling: the apps run as scripts
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

LIMITS = [("grpc.max_receive_message_length", 2**31 - 1), ("grpc.max_send_message_length", 2**31 - 1)]


async def echo(body: bytes, context: Any) -> bytes:
    return body


async def ready(request: Any) -> Response:
    return Response(b'{"ready":true}', media_type="application/json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    args = parser.parse_args()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server = grpc.aio.server(options=LIMITS)
        handler = grpc.unary_unary_rpc_method_handler(echo)
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {"ModelInfer": handler})]
        )
        server.add_insecure_port(f"127.0.0.1:{args.grpc_port}")
        await server.start()
        yield
        await server.stop(1)

    app = Starlette(
        routes=[Route("/v2/health/ready", ready), Route("/v2/models/identity/ready", ready)], lifespan=lifespan
    )
    serve(app, args.port)


if __name__ == "__main__":
    main()
