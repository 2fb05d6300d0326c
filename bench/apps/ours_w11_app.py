"""W11 on oip-asgi: `tokens`, an async generator of the LLM convention (text_input, sampling_parameters in;
text_output out) yielding `max_tokens` one-token pieces, served at /v1 by `openai_app` beside /v2, from one
uvicorn loop (uvloop + httptools, one worker), as the other workloads serve ours; and `vllm_tokens`, the same
declaring the vLLM backend's whole convention (its finish_reason, counts and logprobs when asked: issue 38)."""

from __future__ import annotations

import json

from _cli import ports  # siblings: the apps run as scripts
from _tokens import MODEL, tokens_model, vllm_tokens_model
from _uvicorn import serve
from starlette.applications import Starlette
from starlette.routing import Mount

import oip_asgi

if __name__ == "__main__":
    args = ports()
    model = tokens_model("sampling_parameters", lambda parameters: int(json.loads(parameters[0]).get("max_tokens", 16)))
    v2 = oip_asgi.oip_app({MODEL: model, "vllm_tokens": vllm_tokens_model()})
    serve(Starlette(routes=[Mount("/v2", v2), Mount("/v1", oip_asgi.openai_app(v2))]), args.port)
