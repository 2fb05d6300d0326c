"""The HTTP this wire needs over raw ASGI: a JSON body read whole within a limit, JSON responses, event streams.

An OpenAI request is one small JSON object: it is read whole (a Content-Length over the limit is refused
before reading), never compressed (the API has no such thing: a Content-Encoding is a 415).
"""

from __future__ import annotations

from typing import Any

from starlette.types import Receive, Scope, Send

from .._declarations.errors import ClientDisconnected, OIPError, UnsupportedMediaType
from .._http.events import EVENT_STREAM
from .._http.headers import header, raw_headers
from .errors import BodyTooLarge, error_body, openai_error

JSON = (b"content-type", b"application/json")
DONE = b"data: [DONE]\n\n"


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body, at most `limit` bytes (a 413 otherwise, with OpenAI's error object and Triton's code)."""
    encoding = header(scope, b"content-encoding")
    if encoding is not None and encoding.strip().lower() != b"identity":
        raise UnsupportedMediaType(f"Content-Encoding {encoding.decode('latin-1')!r}: send the JSON body as it is")
    length = header(scope, b"content-length")
    if length is not None and length.strip().isdigit() and int(length) > limit:
        raise _too_large(int(length), limit)
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        parts.append(chunk)
        if not message.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


def _too_large(size: int, limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"Request size of {size} bytes exceeds the maximum allowed input size of {limit} bytes "
        "(oip-asgi serve --http-max-input-size sets it)"
    )


async def send_body(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """One whole JSON response."""
    raw = [JSON, (b"content-length", str(len(body)).encode()), *(headers or ())]
    await _sent(send, {"type": "http.response.start", "status": status, "headers": raw})
    await _sent(send, {"type": "http.response.body", "body": body})


async def send_error(send: Send, error: OIPError) -> None:
    error = openai_error(error)
    await send_body(send, error.status_code, error_body(error), raw_headers(error.headers))


async def start_events(send: Send, status: int = 200) -> None:
    await _sent(send, {"type": "http.response.start", "status": status, "headers": EVENT_STREAM})


async def send_event(send: Send, data: bytes) -> None:
    """One body message, which the server flushes at once: an event reaches the client when it is sent."""
    await _sent(send, {"type": "http.response.body", "body": data, "more_body": True})


async def end_events(send: Send) -> None:
    await _sent(send, {"type": "http.response.body", "body": b""})


async def _sent(send: Send, message: dict[str, Any]) -> None:
    try:
        await send(message)
    except OSError as exc:  # ASGI servers raise an OSError on a connection the client closed
        raise ClientDisconnected from exc
