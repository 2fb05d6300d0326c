"""oip-asgi serving the identity models at /v2 under uvicorn (uvloop + httptools, one worker)."""

from __future__ import annotations

import argparse
from typing import Any

from _uvicorn import serve  # a sibling: the apps run as scripts
from starlette.applications import Starlette

import oip_asgi


def identity(**inputs: Any) -> dict[str, Any]:
    return inputs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = Starlette()
    oip_asgi.mount(app, {"identity": identity, "identity_bytes": identity}, path="/v2")
    serve(app, args.port)


if __name__ == "__main__":
    main()
