"""The floor: bare Starlette under the same uvicorn as ours, doing no protocol work.

`fixed` reads the body and returns a prepared response (W1); `echo` returns the body it read,
binary-extension header included (W2-W4).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _uvicorn import serve  # a sibling: the apps run as scripts
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

HEADER_LENGTH = "inference-header-content-length"


def build(fixed_body: bytes) -> Starlette:
    async def ready(request: Request) -> Response:
        return Response(b"", media_type="application/json")

    async def fixed(request: Request) -> Response:
        await request.body()
        return Response(fixed_body, media_type="application/json")

    async def echo(request: Request) -> Response:
        body = await request.body()
        headers = {HEADER_LENGTH: request.headers[HEADER_LENGTH]} if HEADER_LENGTH in request.headers else None
        return Response(body, headers=headers, media_type=request.headers.get("content-type"))

    return Starlette(
        routes=[
            Route("/v2/health/ready", ready),
            Route("/v2/models/{name}/ready", ready),
            Route("/v2/models/fixed/infer", fixed, methods=["POST"]),
            Route("/v2/models/echo/infer", echo, methods=["POST"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fixed-response", type=Path, required=True)
    args = parser.parse_args()
    app = build(args.fixed_response.read_bytes())
    serve(app, args.port)


if __name__ == "__main__":
    main()
