"""The body is never joined: a large binary request costs about its payload once, not twice."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from typing import Any

import numpy as np

from oip_asgi import oip_app

PAYLOAD = 32 * 2**20
CHUNK = 64 * 2**10


def test_binary_identity_peak_memory_stays_near_the_payload() -> None:
    app = oip_app({"echo": lambda **inputs: inputs})
    header = json.dumps(
        {
            "inputs": [
                {"name": "x", "shape": [PAYLOAD // 4], "datatype": "FP32", "parameters": {"binary_data_size": PAYLOAD}}
            ],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    tensor = np.random.default_rng(0).random(PAYLOAD // 4, dtype=np.float32).tobytes()
    body = memoryview(header + tensor)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/models/echo/infer",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"content-length", str(len(body)).encode()),
            (b"inference-header-content-length", str(len(header)).encode()),
        ],
    }
    sent_bytes = 0
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal position
        chunk = bytes(body[position : position + CHUNK])  # like a server: a fresh bytes per message
        position += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": position < len(body)}

    async def send(message: dict[str, Any]) -> None:
        nonlocal sent_bytes
        if message["type"] == "http.response.start":
            status.append(message["status"])
        else:
            sent_bytes += len(message.get("body", b""))

    position = 0
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        asyncio.run(app(scope, receive, send))
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert status == [200]
    assert sent_bytes > PAYLOAD
    # One copy of the payload (the input array, sent back as the output) plus bounded slices;
    # joining the body or the response would need at least 2x.
    assert peak < 1.25 * PAYLOAD, f"peak {peak / PAYLOAD:.2f}x the payload"
