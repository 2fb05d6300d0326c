"""oip-asgi serving the identity models over gRPC (`oip_asgi.grpc`), in the event loop of uvicorn
(uvloop + httptools, one worker) that serves the same app's REST half at /v2."""

from __future__ import annotations

from _cli import ports  # siblings: the apps run as scripts
from _uvicorn import serve_oip
from ours_app import identity

import oip_asgi

if __name__ == "__main__":
    args = ports("--grpc-port")
    serve_oip(oip_asgi.oip_app({"identity": identity, "identity_bytes": identity}), args.port, args.grpc_port)
