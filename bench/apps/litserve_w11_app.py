"""W11 on LitServe: its `OpenAISpec` (/v1/chat/completions, stream and not) over a LitAPI whose `predict`
yields `max_tokens` one-token pieces, as LitServe's OpenAI examples write it. One API server, one worker, CPU."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import litserve as ls
from _w11 import TOKEN  # a sibling: the apps run as scripts


class Tokens(ls.LitAPI):
    def setup(self, device: Any) -> None:
        self.token = TOKEN

    def predict(self, request: Any, context: dict[str, Any]) -> Iterator[str]:
        for _ in range(int(context.get("max_tokens") or 16)):
            yield self.token


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fast-queue", action="store_true", help="LitServe's ZeroMQ transport between processes")
    args = parser.parse_args()
    server = ls.LitServer(
        Tokens(spec=ls.OpenAISpec()),
        accelerator="cpu",
        devices=1,
        workers_per_device=1,
        timeout=False,
        fast_queue=args.fast_queue,
    )
    server.run(host="127.0.0.1", port=args.port, num_api_servers=1, log_level="warning", generate_client_file=False)


if __name__ == "__main__":
    main()
