"""REST responses over raw ASGI: JSON, errors, and inference results with binary parts.

An inference response is a JSON header and the binary parts of the outputs sent as binary data.
Binary parts go out as separate body messages in bounded slices, never joined into one buffer;
the server's flow control then keeps the amount buffered in memory small.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from starlette.types import Send

from ._errors import OIPError
from ._inference import DecodedRequest, OutputTensor
from ._models import Model
from ._schemas import InferenceResponse, ResponseOutput, encoder
from ._tensors import binary_chunks, json_data

JSON = (b"content-type", b"application/json")
OCTET_STREAM = (b"content-type", b"application/octet-stream")
SLICE = 1 << 20
_COMPRESSORS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


async def send_body(send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = (JSON,)) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, content: Any) -> None:
    await send_body(send, status, encoder.encode(content))


def render_error(error: OIPError) -> tuple[list[tuple[str, str]], bytes]:
    """The headers (Content-Type and Content-Length included) and body of `error`, for any server."""
    body = encoder.encode({"error": error.message})
    return [("content-type", "application/json"), *error.headers.items(), ("content-length", str(len(body)))], body


async def send_error(send: Send, error: OIPError) -> None:
    headers, body = render_error(error)
    raw = [(key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in headers]
    await send({"type": "http.response.start", "status": error.status_code, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def inference_response(
    model: Model, request: DecodedRequest, outputs: list[OutputTensor], parameters: dict[str, Any] | None
) -> tuple[bytes, list[bytes | memoryview]]:
    """The JSON header and the binary parts of an inference response.

    An output the request lists is binary when its own ``binary_data`` says so; the outputs it does
    not list follow ``binary_data_output`` (as Triton and KServe read the binary data extension).
    """
    items: list[ResponseOutput] = []
    binary: list[bytes | memoryview] = []
    for output in outputs:
        as_binary = request.binary_outputs if output.requested is None else bool(output.requested.binary)
        shape = list(output.array.shape)
        if as_binary:
            size, chunks = binary_chunks(output.array, output.datatype)
            binary.extend(chunks)
            own = {**output.parameters, "binary_data_size": size} if output.parameters else {"binary_data_size": size}
            items.append(ResponseOutput(name=output.name, datatype=output.datatype, shape=shape, parameters=own))
        else:
            data = json_data(output.name, output.array, output.datatype)
            items.append(
                ResponseOutput(
                    name=output.name, datatype=output.datatype, shape=shape, parameters=output.parameters, data=data
                )
            )
    response = InferenceResponse(
        model_name=model.name, model_version=model.version, id=request.id, parameters=parameters, outputs=items
    )
    return encoder.encode(response), binary


def choose_encoding(accept_encoding: str | None) -> str | None:
    """gzip or deflate when the client accepts one (q > 0), as Triton does; None for identity."""
    if not accept_encoding:
        return None
    accepted: dict[str, float] = {}
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                quality = 0.0
        accepted[coding.strip().lower()] = quality
    for coding in ("gzip", "deflate"):
        if accepted.get(coding, accepted.get("*", 0.0)) > 0:
            return coding
    return None


async def send_inference(send: Send, header: bytes, binary: list[bytes | memoryview], encoding: str | None) -> None:
    headers = [OCTET_STREAM if binary else JSON]
    if binary:
        headers.append((b"inference-header-content-length", str(len(header)).encode()))
    if encoding is not None:
        await _send_compressed(send, headers, header, binary, encoding)
        return
    size = len(header) + sum(map(len, binary))
    headers.append((b"content-length", str(size).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": header, "more_body": bool(binary)})
    for index, part in enumerate(binary):
        last_part = index == len(binary) - 1
        slices = list(iter_slices(part, SLICE)) or [b""]
        for position, piece in enumerate(slices):
            more = not (last_part and position == len(slices) - 1)
            await send({"type": "http.response.body", "body": bytes(piece), "more_body": more})


async def _send_compressed(
    send: Send, headers: list[tuple[bytes, bytes]], header: bytes, binary: list[bytes | memoryview], encoding: str
) -> None:
    # Level 1: most of gzip's gain on tensors for a fraction of its CPU.
    compressor = zlib.compressobj(1, zlib.DEFLATED, _COMPRESSORS[encoding])
    headers = [*headers, (b"content-encoding", encoding.encode()), (b"vary", b"accept-encoding")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for part in (header, *binary):
        for piece in iter_slices(part, SLICE):
            compressed = compressor.compress(piece)
            if compressed:
                await send({"type": "http.response.body", "body": compressed, "more_body": True})
    await send({"type": "http.response.body", "body": compressor.flush()})


def iter_slices(view: bytes | memoryview, size: int) -> Iterator[bytes | memoryview]:
    for start in range(0, len(view), size):
        yield view[start : start + size]
