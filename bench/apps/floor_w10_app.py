"""W10's floor: bare Starlette and a bare grpc.aio method streaming prepared frames, no protocol work.

REST: `POST /v2/models/tokens/generate_stream` reads `max_tokens` from the JSON body and returns a
`StreamingResponse` of that many prepared SSE events (the event ours sends), one ASGI send each, under the
same uvicorn as ours. gRPC: `ModelStreamInfer` reads `max_tokens` from the request and writes that many
prepared ModelStreamInferResponse messages, in the same process and loop (as ours serves both).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
from _cli import ports  # siblings: the apps run as scripts
from _tokens import MODEL, TOKEN
from _uvicorn import serve_floor
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from oip_asgi.grpc import inference_pb2 as pb

FIELDS = {"model_name": MODEL, "model_version": "1", "text_output": TOKEN}
EVENT = b"data: " + json.dumps(FIELDS, separators=(",", ":")).encode() + b"\n\n"


def stream_message() -> bytes:
    response = pb.ModelInferResponse(model_name=MODEL, model_version="1")
    output = response.outputs.add(name="text_output", datatype="BYTES", shape=[1])
    output.contents.bytes_contents.append(TOKEN.encode())
    return pb.ModelStreamInferResponse(infer_response=response).SerializeToString()


async def ready(request: Request) -> Response:
    return Response(b"", media_type="application/json")


async def generate_stream(request: Request) -> StreamingResponse:
    count = int(json.loads(await request.body())["max_tokens"])

    async def events() -> AsyncIterator[bytes]:
        for _ in range(count):
            yield EVENT

    return StreamingResponse(events(), media_type="text/event-stream")


def grpc_handler() -> grpc.GenericRpcHandler:
    message = stream_message()

    async def stream_infer(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for body in requests:
            request = pb.ModelInferRequest.FromString(body)
            count = next(i.contents.int_contents[0] for i in request.inputs if i.name == "max_tokens")
            for _ in range(count):
                yield message

    method = grpc.stream_stream_rpc_method_handler(stream_infer)  # bytes in, bytes out: no (de)serializer
    return grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {"ModelStreamInfer": method})


if __name__ == "__main__":
    args = ports("--grpc-port")
    routes = [
        Route("/v2/health/ready", ready),
        Route("/v2/models/{name}/ready", ready),
        Route(f"/v2/models/{MODEL}/generate_stream", generate_stream, methods=["POST"]),
    ]
    serve_floor(routes, args.port, grpc_handler(), args.grpc_port)
