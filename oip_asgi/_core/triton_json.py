"""A settings request's JSON as Triton's settings endpoints read it (its TritonJson): the same words.

Triton's REST handlers of the logging and trace extensions take each value with TritonJson's accessors:
a value of the wrong kind is refused saying ``attempt to access JSON non-boolean as boolean``, and a body
that is not JSON saying ``failed to parse the request JSON buffer``. A client that reads the words
(tritonclient raises them) finds them here too. Triton answers them 500 (TritonJson's INTERNAL); here
they are a 400, as every malformed request is (docs/observability.md says so).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .._declarations.errors import OIPError

UINT64_MAX = 2**64 - 1


class JsonValueError(OIPError, status_code=400):
    """A settings request's JSON, or a value in it, of the wrong kind (TritonJson's words; a client's error)."""


def parse(body: bytes | memoryview) -> Any:
    """The request's JSON; an empty body is an empty object (as this server's other control requests take it)."""
    if not bytes(body).strip():
        return {}
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise JsonValueError(f"failed to parse the request JSON buffer: {exc}") from None


def as_bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise JsonValueError("attempt to access JSON non-boolean as boolean")
    return value


def as_uint(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINT64_MAX:
        raise JsonValueError("attempt to access JSON non-unsigned-integer as unsigned-integer")
    return value


def as_string(value: object) -> str:
    if not isinstance(value, str):
        raise JsonValueError("attempt to access JSON non-string as string")
    return value


def as_strings(value: object) -> list[str]:
    """An array of strings (TritonJson's MemberAsArray, then IndexAsString of each element)."""
    if not isinstance(value, list):
        raise JsonValueError("attempt to access JSON non-array as array")
    return [as_string(item) for item in value]


def echo(text: str, limit: int = 200) -> str:
    """A value a client sent, echoed in an error as Triton echoes it (bare), its middle cut past `limit`."""
    if len(text) <= limit:
        return text
    return f"{text[: limit // 2]}...{text[-limit // 2 :]} ({len(text)} characters)"
