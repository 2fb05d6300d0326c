"""REST's endpoints of Triton's logging and trace extensions: ``GET``/``POST /v2/logging`` and
``GET``/``POST /v2[/models/{name}]/trace/setting``. The core reads each body's JSON with Triton's words
(`log_settings.py`, `trace_settings.py`); a POST answers the settings after it, as a GET does."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.types import Receive, Scope, Send

from .._core import log_settings, trace_settings
from .._core.server import ServerCore
from .._http.routing import Endpoint
from .responses import send_json

ReadBody = Callable[[Scope, Receive], Awaitable[bytes]]


def settings_endpoints(core: ServerCore, read_body: ReadBody) -> dict[str, Endpoint]:
    """The endpoints by operation, as the extensions' registry names them; `read_body` reads a small JSON body."""

    async def get_log(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        await send_json(send, 200, log_settings.current())

    async def update_log(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        changes = log_settings.json_changes(await read_body(scope, receive))
        await send_json(send, 200, log_settings.update(changes))

    async def get_trace(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        await send_json(send, 200, await core.trace_settings(match.groupdict().get("name")))

    async def update_trace(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        name = match.groupdict().get("name")
        if name is not None:
            await core.trace_settings(name)  # an unknown model is refused before its body is read, as Triton does
        changes = trace_settings.json_changes(await read_body(scope, receive))
        await send_json(send, 200, await core.trace_settings(name, changes))

    return {
        "log_settings": get_log,
        "update_log_settings": update_log,
        "trace_settings": get_trace,
        "update_trace_settings": update_trace,
    }
