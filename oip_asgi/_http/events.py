"""Server-sent events as both HTTP wires stream them: UTF-8, never cached, never compressed (so that an
event reaches the client when it is sent)."""

from __future__ import annotations

EVENT_STREAM = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
