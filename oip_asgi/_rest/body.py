"""Reading an ASGI request body as it streams in.

The reader hands out exactly the bytes asked for: the JSON header first, then each binary tensor
straight into its final buffer (``readinto``), so the body is never joined. Compressed bodies are
inflated chunk by chunk with a bounded output per step, and the size limit counts inflated bytes,
so a small "zip bomb" ends in a 413 before it becomes a large allocation.

Lengths the client declares (Content-Length, Inference-Header-Content-Length) are its word, not
bytes received: nothing here is allocated from them. What is read is gathered as it arrives, so a
client that declares 30 MB and sends 1 kB costs 1 kB.
"""

from __future__ import annotations

import zlib
from typing import Any

from starlette.types import Receive

from .._declarations.errors import BadRequest, ClientDisconnected, PayloadTooLarge, UnsupportedMediaType

_INFLATE_STEP = 1 << 20
# zlib's wbits: 32+ detects a zlib or gzip wrapper (some clients label zlib data "gzip").
_WBITS = {"gzip": 32 + zlib.MAX_WBITS, "x-gzip": 32 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyReader:
    __slots__ = (
        "_receive",
        "_limit",
        "_chunk",
        "_position",
        "_more",
        "_inflater",
        "_compressed",
        "content_length",
        "received",
        "ended",
    )

    def __init__(
        self, receive: Receive, *, limit: int, content_length: int | None, content_encoding: str | None
    ) -> None:
        self._receive = receive
        self._limit = limit
        self._chunk = memoryview(b"")
        self._position = 0
        self._more = True
        self.received = 0  # body bytes taken so far (after inflating)
        self.ended = False  # known to have been read to its end, with nothing past it (`read_rest`'s whole body)
        self._inflater: Any = None
        self._compressed = b""
        if content_encoding is None:  # the usual body: neither compressed nor parsed for its encoding
            self.content_length = content_length
        else:
            encoding = (content_encoding or "identity").strip().lower()
            if encoding in _WBITS:
                self._inflater = _DeflateInflater() if encoding == "deflate" else zlib.decompressobj(_WBITS[encoding])
                # Content-Length counts compressed bytes: only the inflated total says how large the body is.
                self.content_length = None
            elif encoding == "identity":
                self.content_length = content_length
            else:
                raise UnsupportedMediaType(f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or identity")
        if self.content_length is not None and self.content_length > limit:
            raise self._too_large()

    @property
    def limit(self) -> int:
        return self._limit

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body exceeds the limit of {self._limit} bytes")

    async def _next_chunk(self) -> bool:
        """Load the next non-empty chunk; False once the body has ended."""
        while True:
            if self._inflater is not None and self._compressed:
                data = self._inflate(self._compressed)
                if data:
                    return self._take(data)
            if not self._more:
                if self._inflater is not None:
                    self._check_inflated_end()
                return False
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnected
            self._more = message.get("more_body", False)
            body = message.get("body", b"")
            if self._inflater is not None:
                self._compressed = body
                continue
            if body:
                return self._take(body)

    def _inflate(self, data: bytes) -> bytes:
        try:
            inflated = self._inflater.decompress(data, _INFLATE_STEP)
        except zlib.error as exc:
            raise BadRequest(f"request body is not valid compressed data: {exc}") from None
        self._compressed = self._inflater.unconsumed_tail
        return inflated  # type: ignore[no-any-return]

    def _check_inflated_end(self) -> None:
        if not self._inflater.eof:
            raise BadRequest("compressed request body is truncated")

    def _take(self, data: bytes | bytearray) -> bool:
        self.received += len(data)
        if self.received > self._limit:
            raise self._too_large()
        self._chunk = memoryview(data)
        self._position = 0
        return True

    async def readinto(self, target: memoryview, what: str) -> None:
        """Fill `target` from the body; `what` names the part for the error if the body ends early."""
        filled = 0
        while filled < len(target):
            if self._position == len(self._chunk) and not await self._next_chunk():
                raise BadRequest(f"request body ended {len(target) - filled} bytes short, in the middle of {what}")
            step = min(len(target) - filled, len(self._chunk) - self._position)
            target[filled : filled + step] = self._chunk[self._position : self._position + step]
            filled += step
            self._position += step

    async def read(self, size: int, what: str) -> bytes | bytearray | memoryview:
        """Exactly `size` bytes; a view of the current chunk when it holds them all (no copy)."""
        if self._position == len(self._chunk) and size and not await self._next_chunk():
            raise BadRequest(f"request body ended {size} bytes short, in the middle of {what}")
        if len(self._chunk) - self._position >= size:
            view = self._chunk[self._position : self._position + size]
            self._position += size
            return view
        # Gathered as the chunks arrive and joined once complete: a buffer of `size` made up front
        # would cost what the client declares, not what it sends.
        parts: list[memoryview] = []
        wanted = size
        while wanted:
            if self._position == len(self._chunk) and not await self._next_chunk():
                raise BadRequest(f"request body ended {wanted} bytes short, in the middle of {what}")
            step = min(wanted, len(self._chunk) - self._position)
            parts.append(self._chunk[self._position : self._position + step])
            self._position += step
            wanted -= step
        return b"".join(parts)

    async def read_rest(self) -> bytes | bytearray | memoryview:
        """Everything left, for bodies whose length only their end tells (JSON, raw binary)."""
        if not self.received and self._inflater is None:
            # Nothing read yet: a body that arrives whole in its first message (the common case) is taken as it
            # came, with no copy and no step through the chunks.
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnected
            body: bytes = message.get("body", b"")
            self._more = more = message.get("more_body", False)
            self.received = size = len(body)
            if size > self._limit:
                raise self._too_large()
            if not more and (self.content_length is None or size == self.content_length):
                self.ended = True
                return body  # the chunk stays empty: nothing is left of it
            self._chunk = memoryview(body)
            self._position = 0
        if self.content_length is not None:
            return await self.read(
                self.content_length - self.received + (len(self._chunk) - self._position), "the body"
            )
        parts: list[bytes | memoryview] = [self._chunk[self._position :]]
        while await self._next_chunk():
            parts.append(self._chunk)
        self._position = len(self._chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def expect_end(self, declared: int) -> None:
        """Fail if the body goes on past the `declared` bytes its headers account for."""
        may_go_on = self._more or self._inflater is not None  # an inflater may hold output, or be cut short
        if self._position < len(self._chunk) or (may_go_on and await self._next_chunk()):
            raise BadRequest(
                f"request body is longer than the {declared} bytes its header and binary_data_size declare"
            )


class _DeflateInflater:
    """HTTP "deflate" is zlib-wrapped by the RFC, yet some clients send raw deflate: accept both."""

    def __init__(self) -> None:
        self._inner: Any = None
        self.unconsumed_tail = b""

    @property
    def eof(self) -> bool:
        return self._inner is not None and bool(self._inner.eof)

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._inner is None:
            zlib_header = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._inner = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
        result = self._inner.decompress(data, max_length)
        self.unconsumed_tail = self._inner.unconsumed_tail
        return result  # type: ignore[no-any-return]
