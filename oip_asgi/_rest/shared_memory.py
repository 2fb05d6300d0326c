"""Triton's shared memory extensions on REST: the system regions' status, register and unregister, and CUDA's
status and unregister, which answer as a Triton without GPUs does (no region to tell or unregister).

The regions themselves, and what a request reads from and writes into them, are the core's
(`_core/shared_memory.py`); a tensor's parameters are read with the request (`request.py`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.types import Receive, Scope, Send

from .._core.server import ServerCore
from .._declarations.errors import BadRequest
from .._http.routing import Endpoint
from .responses import JSON, send_json, send_response
from .schemas import RegisterRequest

ReadBody = Callable[[Scope, Receive, type[RegisterRequest]], Awaitable[RegisterRequest]]


def shared_memory_endpoints(core: ServerCore, read_body: ReadBody) -> dict[str, Endpoint]:
    """The endpoints by operation (`_core/extensions.py`'s entries); `read_body` reads a small JSON body."""
    memory = core.shared_memory

    async def status(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        await send_json(send, 200, memory.status(match.group("region")))

    async def register(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        memory.check_available()  # before the body: a server without shared memory says so, whatever is sent
        name = match.groupdict().get("region") or ""
        request = await read_body(scope, receive, RegisterRequest)
        for field in ("key", "byte_size"):  # Triton's words
            if getattr(request, field) is None:
                raise BadRequest(f"Shared memory register request has no '{field}' field")
        assert request.key is not None and request.byte_size is not None
        memory.register(name, request.key, request.offset, request.byte_size)
        await send_response(send, 200, [JSON], [b""])

    async def unregister(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        memory.unregister(match.group("region"))
        await send_response(send, 200, [JSON], [b""])

    async def cuda_status(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        name = match.group("region")
        if name:  # no CUDA region is ever registered here
            raise memory.no_cuda_region(name)
        await send_json(send, 200, [])

    async def cuda_unregister(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        await send_response(send, 200, [JSON], [b""])  # nothing to unregister, as in Triton without GPUs

    return {
        "system_shared_memory_status": status,
        "system_shared_memory_register": register,
        "system_shared_memory_unregister": unregister,
        "cuda_shared_memory_status": cuda_status,
        "cuda_shared_memory_unregister": cuda_unregister,
    }
