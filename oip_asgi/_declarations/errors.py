"""The errors a request can end in: each class carries its HTTP status and its gRPC status code.

OIPError (500, INTERNAL)                        the base: any error the server means to tell the client about
 ├── BadRequest (400, INVALID_ARGUMENT)         malformed or invalid request
 ├── NotFound (404, NOT_FOUND)                  unknown path, model or version
 ├── MethodNotAllowed (405, UNIMPLEMENTED)      carries the ``Allow`` header
 ├── LengthRequired (411, INVALID_ARGUMENT)     a body that must say its length did not
 ├── PayloadTooLarge (413, RESOURCE_EXHAUSTED)  body over the configured limit
 ├── UnsupportedMediaType (415, INVALID_ARGUMENT) a Content-Encoding other than gzip, deflate or identity
 ├── ModelError (500, INTERNAL)                 the model raised, or returned something its outputs cannot be
 └── ModelNotReady (503, UNAVAILABLE)           the model has not loaded, failed to load, or is saturated

A model may raise any of them on purpose (a `BadRequest` for input it refuses); the client then gets
that status and message, where any other exception from a model is a `ModelError`. A subclass names
its status (``class Conflict(OIPError, status_code=409)``) and, optionally, its gRPC code; without
one it takes the code gRPC gives that status. `client_error` is the one place an exception becomes the
error a client is told; each wire renders that (REST as ``{"error": message}``).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

logger = logging.getLogger("oip_asgi")

# The gRPC status code (its name in grpc.StatusCode) that means what an HTTP status means, as Triton
# sends them; a status not listed takes INVALID_ARGUMENT for a 4xx and INTERNAL otherwise.
GRPC_CODES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ABORTED",
    411: "INVALID_ARGUMENT",
    413: "RESOURCE_EXHAUSTED",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def grpc_code_of(status_code: int) -> str:
    return GRPC_CODES.get(status_code, "INVALID_ARGUMENT" if 400 <= status_code < 500 else "INTERNAL")


class OIPError(Exception):
    status_code: ClassVar[int] = 500
    grpc_code: ClassVar[str] = "INTERNAL"  # a name in grpc.StatusCode

    def __init_subclass__(cls, *, status_code: int | None = None, grpc_code: str | None = None, **kwargs: Any) -> None:
        # `class Conflict(OIPError, status_code=409)`; a subclass without one keeps its parent's.
        super().__init_subclass__(**kwargs)
        if status_code is not None:
            cls.status_code = status_code
        if grpc_code is not None:
            cls.grpc_code = grpc_code
        elif status_code is not None or "status_code" in cls.__dict__:  # or set in the class body
            cls.grpc_code = grpc_code_of(cls.status_code)

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


class ModelError(OIPError, status_code=500):
    def __init__(self, message: str, *, redacted: str | None = None, logged: bool = False) -> None:
        super().__init__(message, redacted=redacted)
        self.logged = logged  # the server log has it already, with the traceback


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


INTERNAL_ERROR = "internal server error; see the server log"


def client_error(error: BaseException, *, expose: bool, where: str) -> OIPError:
    """What the client is told of `error`, on any wire: an `OIPError` as it is meant (its text redacted
    when `expose` is False), anything else as an internal error, logged with its traceback."""
    if isinstance(error, OIPError):
        return error.public(expose)
    logger.error("unhandled error serving %s", where, exc_info=(type(error), error, error.__traceback__))
    return OIPError(INTERNAL_ERROR)
