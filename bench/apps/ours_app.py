"""oip-asgi serving the identity models at /v2 under uvicorn (uvloop + httptools, one worker)."""

from __future__ import annotations

import argparse
from typing import Any

from _uvicorn import serve  # a sibling: the apps run as scripts
from starlette.applications import Starlette

import oip_asgi


async def identity(**inputs: Any) -> dict[str, Any]:
    # Async, as the peers' identities are (`async def predict` in MLServer and KServe): it runs on the loop.
    return inputs


def identity_sync(**inputs: Any) -> dict[str, Any]:
    return inputs  # a plain function runs in a worker thread (W1s measures that hop)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = Starlette()
    oip_asgi.mount(app, {"identity": identity, "identity_sync": identity_sync, "identity_bytes": identity}, path="/v2")
    serve(app, args.port)


if __name__ == "__main__":
    main()
