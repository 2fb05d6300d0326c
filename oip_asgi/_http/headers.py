"""A request's headers as the HTTP wires read them from the ASGI scope, and an error's as ASGI sends them.

ASGI servers hand header names over in lowercase; an ASGI app calling another (a test, a bridge) may
not, so names are compared lowercased. Of repeated headers, the first counts.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import Scope


def header(scope: Scope, name: bytes) -> bytes | None:
    """The value of the header `name` (lowercase), or None."""
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value)
    return None


def headers_named(scope: Scope, names: frozenset[bytes]) -> dict[bytes, str]:
    """The headers of `names` (lowercase) the request carries, in one pass over the scope's list."""
    found: dict[bytes, str] = {}
    for key, value in scope["headers"]:
        key = key.lower()
        if key in names and key not in found:
            found[key] = value.decode("latin-1")
    return found


def raw_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """Headers as an ASGI response start carries them: lowercase names, both as bytes."""
    return [(key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in headers.items()]
