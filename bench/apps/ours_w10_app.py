"""W10 on oip-asgi: `tokens`, an async generator (a decoupled model: each yield is one response), served
over REST (`/v2/models/tokens/generate_stream`, SSE) and gRPC (`ModelStreamInfer`) from one uvicorn loop
(uvloop + httptools, one worker), as `apps/ours_grpc_app.py` serves the identity models."""

from __future__ import annotations

from _cli import ports  # siblings: the apps run as scripts
from _tokens import MODEL, tokens_model
from _uvicorn import serve_oip

import oip_asgi

if __name__ == "__main__":
    args = ports("--grpc-port")
    oip = oip_asgi.oip_app({MODEL: tokens_model("max_tokens", lambda count: int(count[0]))})
    serve_oip(oip, args.port, args.grpc_port)
