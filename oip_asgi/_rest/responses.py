"""REST responses over raw ASGI: JSON, errors, and inference results with binary parts.

An inference response is a JSON header and the binary parts of the outputs sent as binary data.
Binary parts go out as separate body messages in bounded slices, never joined into one buffer;
the server's flow control then keeps the amount buffered in memory small.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import Any

from starlette.types import Send

from .._core.responding import Reply
from .._core.shared_memory import Written, output_to_write
from .._core.tensors import binary_chunks
from .._declarations.errors import ClientDisconnected, OIPError
from .._http.routing import SendFailed as SendFailed  # raised here, caught at the router's boundary
from .json_tensors import json_data
from .schemas import InferenceResponse, ResponseOutput, encoder

JSON = (b"content-type", b"application/json")
OCTET_STREAM = (b"content-type", b"application/octet-stream")
EVENT_STREAM = (b"content-type", b"text/event-stream")
SLICE = 1 << 20
_COMPRESSORS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def render_error(error: OIPError) -> tuple[list[tuple[str, str]], bytes]:
    """The headers (Content-Type and Content-Length included) and body of `error`, for any server."""
    body = encoder.encode({"error": error.message})
    return [("content-type", "application/json"), *error.headers.items(), ("content-length", str(len(body)))], body


async def send_response(
    send: Send,
    status: int,
    headers: list[tuple[bytes, bytes]],
    parts: Sequence[bytes | memoryview],
    *,
    encoding: str | None = None,
) -> int:
    """Send a response whose body is `parts`, in slices of at most `SLICE` bytes (compressed with
    `encoding`, gzip or deflate, when given); the body's bytes. Every whole response goes out here but
    inference's usual reply (JSON in one message, uncompressed), which `_RESTExchange.send` sends itself.

    A client that left is a `ClientDisconnected` (ASGI servers raise an OSError on its connection);
    any other failure a `SendFailed`.
    """
    try:  # the sending inline, not in a coroutine of its own: one frame fewer for every response
        if encoding is not None:
            return await _send_compressed(send, status, headers, parts, encoding)
        size = sum(map(len, parts))
        length = (b"content-length", str(size).encode())
        await send({"type": "http.response.start", "status": status, "headers": [*headers, length]})
        if len(parts) == 1 and size <= SLICE:  # the common case: one message, the body as it is
            await send({"type": "http.response.body", "body": bytes(parts[0])})
            return size
        slices = [piece for part in parts for piece in iter_slices(part, SLICE)] or [b""]
        last = len(slices) - 1
        for index, piece in enumerate(slices):
            await send({"type": "http.response.body", "body": bytes(piece), "more_body": index < last})
        return size
    except OSError as exc:
        raise ClientDisconnected from exc
    except Exception as exc:
        raise SendFailed from exc


class ResponseStream:
    """A response sent in parts as they come: its status and headers once, then each part at once
    (a body message of its own, which the server flushes), then its end. Its length is not known
    ahead, so it has no Content-Length (an HTTP/1.1 server sends it chunked).

    Each step fails as `send_response` does: a client that left is a `ClientDisconnected`, any
    other failure a `SendFailed`.
    """

    __slots__ = ("_send", "sent")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.sent = 0  # the body's bytes so far

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        await self._message({"type": "http.response.start", "status": status, "headers": headers})

    async def send(self, part: bytes) -> None:
        await self._message({"type": "http.response.body", "body": part, "more_body": True})
        self.sent += len(part)

    async def finish(self) -> None:
        await self._message({"type": "http.response.body", "body": b""})

    async def _message(self, message: dict[str, Any]) -> None:
        try:
            await self._send(message)
        except OSError as exc:
            raise ClientDisconnected from exc
        except Exception as exc:
            raise SendFailed from exc


def event(data: bytes) -> bytes:
    """`data` (JSON on one line) as one server-sent event."""
    return b"data: " + data + b"\n\n"


async def send_json(send: Send, status: int, content: Any) -> None:
    await send_response(send, status, [JSON], [encoder.encode(content)])


async def send_error(send: Send, error: OIPError) -> None:
    headers, body = render_error(error)
    raw = [(key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in headers[:-1]]
    await send_response(send, error.status_code, raw, [body])


def inference_response(reply: Reply) -> tuple[bytes, list[bytes | memoryview]]:
    """The JSON header and the binary parts of the inference response of `reply`.

    An output the request lists is binary when its own ``binary_data`` says so; the outputs it does
    not list follow ``binary_data_output`` (as Triton and KServe read the binary data extension). One it
    places in shared memory is written there, and answered without data, as Triton answers it.
    """
    request = reply.request
    items: list[ResponseOutput] = []
    binary: list[bytes | memoryview] = []
    placed: list[Written] = []
    for output in reply.outputs:
        if output.requested is not None and output.requested.placed is not None:
            placed.append(output_to_write(output.requested.placed, output.name, output.array, output.datatype))
            items.append(
                ResponseOutput(
                    name=output.name,
                    datatype=output.datatype,
                    shape=list(output.array.shape),
                    parameters=output.parameters,
                )
            )
            continue
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
    for written in placed:  # once every output fits its place
        written.write()
    model = reply.model
    response = InferenceResponse(
        model_name=model.name, model_version=model.version, id=request.id, parameters=reply.parameters, outputs=items
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


async def _send_compressed(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], parts: Sequence[bytes | memoryview], encoding: str
) -> int:
    # Level 1: most of gzip's gain on tensors for a fraction of its CPU.
    compressor = zlib.compressobj(1, zlib.DEFLATED, _COMPRESSORS[encoding])
    headers = [*headers, (b"content-encoding", encoding.encode()), (b"vary", b"accept-encoding")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    for part in parts:
        for piece in iter_slices(part, SLICE):
            compressed = compressor.compress(piece)
            if compressed:
                await send({"type": "http.response.body", "body": compressed, "more_body": True})
    await send({"type": "http.response.body", "body": compressor.flush()})
    return sum(map(len, parts))


def iter_slices(view: bytes | memoryview, size: int) -> Iterator[bytes | memoryview]:
    for start in range(0, len(view), size):
        yield view[start : start + size]
