"""Triton's errors (``pb_utils.TritonError``, ``TritonModelException``), and the HTTP status and gRPC code
Triton gives each code.

Triton's HTTP frontend maps its error codes to statuses (INTERNAL 500, NOT_FOUND 404, UNAVAILABLE
503, UNSUPPORTED 501, the rest 400) and its gRPC frontend to codes (UNSUPPORTED is UNIMPLEMENTED,
UNKNOWN is UNKNOWN). A model's `TritonError` becomes an `OIPError` subclass that carries both.
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import OIPError

# Triton's TRITONSERVER_Error_Code values, as pb_utils.TritonError names them.
UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS, CANCELLED = range(8)
CODE_NAMES = ("UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS",
              "CANCELLED")  # fmt: skip

# code: (HTTP status, gRPC code name), as Triton's frontends answer them.
_WIRE = {
    UNKNOWN: (400, "UNKNOWN"),
    INTERNAL: (500, "INTERNAL"),
    NOT_FOUND: (404, "NOT_FOUND"),
    INVALID_ARG: (400, "INVALID_ARGUMENT"),
    UNAVAILABLE: (503, "UNAVAILABLE"),
    UNSUPPORTED: (501, "UNIMPLEMENTED"),
    ALREADY_EXISTS: (400, "ALREADY_EXISTS"),
    CANCELLED: (400, "CANCELLED"),
}


def _answer_class(code: int) -> type[OIPError]:
    status, grpc_code = _WIRE[code]
    return type(f"Triton{CODE_NAMES[code].title().replace('_', '')}Error", (OIPError,), {}, status_code=status,
                grpc_code=grpc_code)  # fmt: skip


ANSWERS: dict[int, type[OIPError]] = {code: _answer_class(code) for code in _WIRE}


def answer_of(code: int | None, message: str) -> OIPError:
    """The error a client gets for a model's `TritonError` of `code` (None or unknown: INTERNAL)."""
    return ANSWERS.get(code if code is not None else INTERNAL, ANSWERS[INTERNAL])(message)


def code_of(status: int) -> int:
    """The Triton code for an HTTP status (a BLS response's error, from the served model's failure)."""
    for code, (known, _) in _WIRE.items():
        if known == status and code not in (UNKNOWN, ALREADY_EXISTS, CANCELLED):
            return code
    return INVALID_ARG if 400 <= status < 500 else INTERNAL


class TritonError(Exception):
    """An error a model sets on a response (``InferenceResponse(error=...)``), with Triton's code."""

    UNKNOWN: ClassVar[int] = UNKNOWN
    INTERNAL: ClassVar[int] = INTERNAL
    NOT_FOUND: ClassVar[int] = NOT_FOUND
    INVALID_ARG: ClassVar[int] = INVALID_ARG
    UNAVAILABLE: ClassVar[int] = UNAVAILABLE
    UNSUPPORTED: ClassVar[int] = UNSUPPORTED
    ALREADY_EXISTS: ClassVar[int] = ALREADY_EXISTS
    CANCELLED: ClassVar[int] = CANCELLED

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        if message is None:
            raise TypeError("TritonError needs a message")
        super().__init__(message)
        self._message = str(message)
        self._code = code

    def code(self) -> int:
        return self._code

    def message(self) -> str:
        return self._message

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {CODE_NAMES[self._code] if 0 <= self._code < 8 else self._code})"


class TritonModelException(Exception):
    """What a model raises to fail its request(s) (as raising any exception does), Triton's name for it."""


def unsupported(what: str) -> NotImplementedError:
    """The error for what this server cannot offer a Triton Python model."""
    return NotImplementedError(f"{what} is not available in oip-asgi: it serves on the CPU, with numpy arrays")
