"""LitServe as every LitServe app runs it: one API server, one inference worker, CPU, on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import litserve as ls
from _cli import parser  # a sibling: the apps run as scripts


def serve(api: Any) -> None:
    options = parser()
    options.add_argument("--fast-queue", action="store_true", help="LitServe's ZeroMQ transport between processes")
    args = options.parse_args()
    server = ls.LitServer(api, accelerator="cpu", devices=1, workers_per_device=1, timeout=False,
                          fast_queue=args.fast_queue)  # fmt: skip
    server.run(host="127.0.0.1", port=args.port, num_api_servers=1, log_level="warning", generate_client_file=False)
