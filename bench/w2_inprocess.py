"""W2's request alone: CPU per 4 MiB binary request and response through the serve command's app, in-process.

The body arrives in 64 KiB messages, as uvicorn hands it over; no server, no socket. Page faults are kernel
work that callgrind does not count (bench/instructions.py), so a change in how a tensor's memory is had
shows here and in the timed runs only.

    python bench/w2_inprocess.py [SOURCE]   # SOURCE: a checkout of oip-asgi to import (this one by default)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parent.parent))

import numpy as np
import uvloop

import oip_asgi
from oip_asgi._hosts.cli.served import Served

CHUNK = 1 << 16


async def identity(**inputs: Any) -> dict[str, Any]:
    return inputs


def main() -> None:
    app = Served(oip_asgi.oip_app({"identity": identity}))
    raw = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32).tobytes()
    tensor = {"name": "x", "shape": [1, 1 << 20], "datatype": "FP32", "parameters": {"binary_data_size": len(raw)}}
    header = json.dumps({"inputs": [tensor], "outputs": [{"name": "x", "parameters": {"binary_data": True}}]}).encode()
    body = header + raw
    chunks = [body[start : start + CHUNK] for start in range(0, len(body), CHUNK)]
    headers = [
        (b"content-type", b"application/octet-stream"),
        (b"content-length", str(len(body)).encode()),
        (b"inference-header-content-length", str(len(header)).encode()),
    ]
    scope = {"type": "http", "method": "POST", "path": "/v2/models/identity/infer", "root_path": "", "headers": headers}

    async def request() -> None:
        messages = iter(chunks)

        async def receive() -> dict[str, Any]:
            piece = next(messages)
            return {"type": "http.request", "body": piece, "more_body": piece is not chunks[-1]}

        statuses = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await app(dict(scope, query_string=b""), receive, send)
        assert statuses == [200], statuses

    async def requests(count: int) -> None:
        for _ in range(count):
            await request()

    loop = uvloop.new_event_loop()
    loop.run_until_complete(requests(20))
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        loop.run_until_complete(requests(100))
        best = min(best, (time.process_time() - started) / 100)
    print(f"W2 in-process: {best * 1e3:.2f} ms of CPU per request (best of 5 loops of 100)")


if __name__ == "__main__":
    main()
