"""W10 on PyTriton: `tokens`, a decoupled model (`ModelConfig(decoupled=True)`) whose `infer_func` is a
generator yielding one response per token. Triton serves it over HTTP (`generate_stream`, SSE) and gRPC
(`ModelStreamInfer`). No batching: like the other servers, each request runs on its own.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
from _w10 import MODEL, TOKEN  # a sibling: the apps run as scripts
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

TOKEN_ARRAY = np.array([TOKEN], dtype=np.object_)


def tokens(requests: list[Any]) -> Iterator[list[dict[str, npt.NDArray[Any]]]]:
    # One request at a time (no batching): each yield is the list of one response per request.
    (request,) = requests
    for _ in range(int(request["max_tokens"][0])):
        yield [{"text_output": TOKEN_ARRAY}]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    args = parser.parse_args()
    config = TritonConfig(
        http_address="127.0.0.1",
        http_port=args.port,
        grpc_address="127.0.0.1",
        grpc_port=args.grpc_port,
        metrics_address="127.0.0.1",
        metrics_port=args.metrics_port,
    )
    with Triton(config=config) as triton:
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
        triton.run()
        # Triton.serve() only notices SIGINT at its monitoring period; stop on SIGTERM/SIGINT at once.
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":
    main()
