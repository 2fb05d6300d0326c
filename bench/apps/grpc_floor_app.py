"""The gRPC floor: a bare grpc.aio ModelInfer that answers with the request's own bytes, in the event
loop of the same uvicorn (uvloop + httptools) as ours, beside the two readiness URLs the harness polls.
What grpcio itself costs per call: no protobuf parsing, no protocol, no model."""

from __future__ import annotations

from typing import Any

import grpc
from _cli import ports  # siblings: the apps run as scripts
from _uvicorn import serve_floor
from starlette.responses import Response
from starlette.routing import Route

LIMITS = [("grpc.max_receive_message_length", 2**31 - 1), ("grpc.max_send_message_length", 2**31 - 1)]


async def echo(body: bytes, context: Any) -> bytes:
    return body


async def ready(request: Any) -> Response:
    return Response(b'{"ready":true}', media_type="application/json")


if __name__ == "__main__":
    args = ports("--grpc-port")
    method = grpc.unary_unary_rpc_method_handler(echo)  # bytes in, bytes out: no (de)serializer
    handler = grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {"ModelInfer": method})
    routes = [Route("/v2/health/ready", ready), Route("/v2/models/identity/ready", ready)]
    serve_floor(routes, args.port, handler, args.grpc_port, LIMITS)
