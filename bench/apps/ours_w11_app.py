"""W11 on oip-asgi: `tokens`, an async generator of the LLM convention (text_input, sampling_parameters in;
text_output out) yielding `max_tokens` one-token pieces, served at /v1 by `openai_app` beside /v2, from one
uvicorn loop (uvloop + httptools, one worker), as the other workloads serve ours."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from _uvicorn import serve  # siblings: the apps run as scripts
from _w11 import MODEL, TOKEN
from starlette.applications import Starlette
from starlette.routing import Mount

import oip_asgi
from oip_asgi import Model, TensorSpec


def tokens_model() -> Model:
    token = {"text_output": np.array([TOKEN.encode()], dtype=object)}

    async def tokens(text_input: Any, sampling_parameters: Any) -> AsyncIterator[dict[str, Any]]:
        for _ in range(int(json.loads(sampling_parameters[0]).get("max_tokens", 16))):
            yield token

    return Model(
        tokens,
        inputs=[TensorSpec("text_input", "BYTES", [1]), TensorSpec("sampling_parameters", "BYTES", [1])],
        outputs=[TensorSpec("text_output", "BYTES", [1])],
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    v2 = oip_asgi.oip_app({MODEL: tokens_model()})
    app = Starlette(routes=[Mount("/v2", v2), Mount("/v1", oip_asgi.openai_app(v2))])
    serve(app, args.port)


if __name__ == "__main__":
    main()
