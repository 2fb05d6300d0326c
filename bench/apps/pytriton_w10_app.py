"""W10 on PyTriton: `tokens`, a decoupled model (`ModelConfig(decoupled=True)`) whose `infer_func` is a
generator yielding one response per token. Triton serves it over HTTP (`generate_stream`, SSE) and gRPC
(`ModelStreamInfer`). No batching: like the other servers, each request runs on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _pytriton  # siblings: the apps run as scripts
import numpy as np
import numpy.typing as npt
from _cli import ports
from _tokens import MODEL, TOKEN
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton

TOKEN_ARRAY = np.array([TOKEN.encode()], dtype=np.object_)


def tokens(requests: list[Any]) -> Iterator[list[dict[str, npt.NDArray[Any]]]]:
    # One request at a time (no batching): each yield is the list of one response per request.
    (request,) = requests
    for _ in range(int(request["max_tokens"][0])):
        yield [{"text_output": TOKEN_ARRAY}]


if __name__ == "__main__":
    with Triton(config=_pytriton.config(ports("--grpc-port", "--metrics-port"))) as triton:
        triton.bind(
            model_name=MODEL,
            infer_func=tokens,
            inputs=[
                Tensor(name="text_input", dtype=np.bytes_, shape=(1,)),
                Tensor(name="max_tokens", dtype=np.int32, shape=(1,)),
            ],
            outputs=[Tensor(name="text_output", dtype=np.bytes_, shape=(1,))],
            config=ModelConfig(batching=False, decoupled=True),
        )
        _pytriton.serve(triton)
