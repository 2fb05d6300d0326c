"""The errors a request can end in, each rendered as ``{"error": message}`` with its status and headers.

OIPError (500)                          the base: any error the server means to tell the client about
 ├── BadRequest (400)                   malformed or invalid request
 ├── NotFound (404)                     unknown path, model or version
 ├── MethodNotAllowed (405)             carries the ``Allow`` header
 ├── LengthRequired (411)               a body that must say its length did not
 ├── PayloadTooLarge (413)              body over the configured limit
 ├── UnsupportedMediaType (415)         a Content-Encoding other than gzip, deflate or identity
 ├── ModelError (500)                   the model raised, or returned something its outputs cannot be
 └── ModelNotReady (503)                the model has not loaded, failed to load, or is saturated

The status is a property of the class, so every wire (REST, gRPC) maps the same tree. A model may
raise any of them on purpose (a `BadRequest` for input it refuses); the client then gets that status
and message, where any other exception from a model is a `ModelError`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar


class OIPError(Exception):
    status_code: ClassVar[int] = 500

    def __init_subclass__(cls, *, status_code: int | None = None, **kwargs: Any) -> None:
        # `class Conflict(OIPError, status_code=409)`; a subclass without one keeps its parent's.
        super().__init_subclass__(**kwargs)
        if status_code is not None:
            cls.status_code = status_code

    def __init__(self, message: str, *, headers: Mapping[str, str] | None = None, redacted: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers: dict[str, str] = dict(headers) if headers else {}
        # For a message that quotes a model's own exception: what to send instead when the server
        # does not expose error text (`expose_errors=False`), naming the log line that has the rest.
        self.redacted = redacted

    def public(self, expose: bool) -> OIPError:
        """The error to send: itself, or a copy with the redacted message when text is not exposed."""
        if expose or self.redacted is None:
            return self
        public = copy.copy(self)
        public.message = self.redacted
        return public


class BadRequest(OIPError, status_code=400): ...


class NotFound(OIPError, status_code=404): ...


class MethodNotAllowed(OIPError, status_code=405):
    def __init__(self, message: str, *, allow: str) -> None:
        super().__init__(message, headers={"Allow": allow})


class LengthRequired(OIPError, status_code=411): ...


class PayloadTooLarge(OIPError, status_code=413): ...


class UnsupportedMediaType(OIPError, status_code=415): ...


class ModelError(OIPError, status_code=500): ...


class ModelNotReady(OIPError, status_code=503): ...


# A name a client sent, echoed in a message: cut, so that a 20 kB name cannot make the error itself
# too large to send (grpcio refuses status messages over its 16 KiB metadata limit).
MAX_QUOTED = 200


def quoted(name: str) -> str:
    """`name` in quotes for an error message, its middle cut when it is longer than `MAX_QUOTED`."""
    if len(name) <= MAX_QUOTED:
        return f"'{name}'"
    half = MAX_QUOTED // 2
    return f"'{name[:half]}...{name[-half:]}' ({len(name)} characters)"


class ClientDisconnected(Exception):
    """The client went away mid-request: there is nobody left to answer."""
