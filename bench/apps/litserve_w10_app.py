"""W10 on LitServe: a streaming LitAPI (`stream=True`) whose `predict` yields `max_tokens` tokens.

LitServe runs `predict` in its inference worker process and hands each encoded piece to the API server
process, which sends it as one chunk of a chunked response: `encode_response` yields a dict per token,
which LitServe writes as one JSON line ({"text_output": "token"}\\n). One API server, one worker, CPU.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import litserve as ls
from _w10 import TOKEN  # a sibling: the apps run as scripts


class Tokens(ls.LitAPI):
    def setup(self, device: Any) -> None:
        self.token = TOKEN.decode()

    # Unannotated on purpose: LitServe reads the annotation to pick how to parse the body; without one it
    # hands over the JSON body as a dict.
    def decode_request(self, request):  # type: ignore[no-untyped-def]
        return int(request["max_tokens"])

    def predict(self, count: int) -> Iterator[str]:
        for _ in range(count):
            yield self.token

    def encode_response(self, outputs: Iterator[str]) -> Iterator[dict[str, str]]:
        for output in outputs:
            yield {"text_output": output}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fast-queue", action="store_true", help="LitServe's ZeroMQ transport between processes")
    args = parser.parse_args()
    server = ls.LitServer(
        Tokens(stream=True, api_path="/predict"),
        accelerator="cpu",
        devices=1,
        workers_per_device=1,
        timeout=False,
        fast_queue=args.fast_queue,
    )
    server.run(host="127.0.0.1", port=args.port, num_api_servers=1, log_level="warning", generate_client_file=False)


if __name__ == "__main__":
    main()
