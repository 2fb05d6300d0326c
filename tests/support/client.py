"""Helpers to drive an ASGI app in-process and to build binary-extension requests by hand."""

from __future__ import annotations

import json
from typing import Any

import httpx
import numpy as np


def client(app: Any) -> httpx.AsyncClient:
    # No Accept-Encoding by default: most tests read plain bodies, compression has its own tests.
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers={"accept-encoding": "identity"}
    )


def binary_request(header: dict[str, Any], *tensors: bytes) -> tuple[bytes, dict[str, str]]:
    head = json.dumps(header).encode()
    return head + b"".join(tensors), {"inference-header-content-length": str(len(head))}


def split_response(response: httpx.Response) -> tuple[dict[str, Any], bytes]:
    length = response.headers.get("inference-header-content-length")
    if length is None:
        return response.json(), b""
    return json.loads(response.content[: int(length)]), response.content[int(length) :]


def bytes_tensor(items: list[bytes]) -> bytes:
    return b"".join(len(item).to_bytes(4, "little") + item for item in items)


def outputs_by_name(header: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {output["name"]: output for output in header["outputs"]}


def binary_outputs(header: dict[str, Any], payload: bytes) -> dict[str, bytes]:
    """Slice the binary part of a response by each output's binary_data_size, in order."""
    parts: dict[str, bytes] = {}
    position = 0
    for output in header["outputs"]:
        size = (output.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            parts[output["name"]] = payload[position : position + size]
            position += size
    assert position == len(payload)
    return parts


def as_array(output: dict[str, Any], raw: bytes | None = None) -> np.ndarray:
    from oip_asgi._declarations.datatypes import numpy_dtype

    dtype = numpy_dtype(output["datatype"])
    if raw is None:
        if output["datatype"] == "BYTES":
            return np.array([item.encode() for item in output["data"]], dtype=object).reshape(output["shape"])
        return np.array(output["data"], dtype=dtype).reshape(output["shape"])
    if output["datatype"] == "BYTES":
        items, position = [], 0
        while position < len(raw):
            length = int.from_bytes(raw[position : position + 4], "little")
            items.append(raw[position + 4 : position + 4 + length])
            position += 4 + length
        return np.array(items + [b""], dtype=object)[:-1].reshape(output["shape"])
    return np.frombuffer(raw, dtype=dtype).reshape(output["shape"])
