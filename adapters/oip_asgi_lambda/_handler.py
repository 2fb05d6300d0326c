"""An OIP app as an AWS Lambda handler, through Mangum.

Mangum turns each event (API Gateway REST or HTTP API, Function URL, ALB) into one ASGI request.
In front of the OIP app sit the parts of the path that AWS adds and the application never sees
elsewhere (a custom domain's base path, an HTTP API's named stage) and Lambda's payload limits,
which otherwise end in opaque AWS errors.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Mapping
from typing import Any

import msgspec
from mangum import Mangum
from mangum.types import LambdaContext, LambdaEvent
from starlette.types import Message, Receive, Scope, Send

from oip_asgi import OIPApp, oip_app

# Lambda refuses a synchronous event over 6 MiB before the function runs, and a body travels in it
# as base64 (4/3 larger): 4.4 MiB of raw body leaves ~130 KiB of the event for headers and context.
MAX_BODY_SIZE = 4_613_734
# Lambda returns at most 6,291,556 bytes (checked against 6 MiB, a little under); an ALB passes on
# at most 1 MB of response JSON.
_RESPONSE_LIMIT = 6 * 2**20
_ALB_RESPONSE_LIMIT = 2**20

_encode = msgspec.json.Encoder().encode


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


class OIPHandler(Mangum):
    """A Lambda handler serving `app` under `prefix` (build it with :func:`handler`)."""

    def __init__(
        self,
        app: OIPApp,
        *,
        prefix: str = "/v2",
        max_body_size: int = MAX_BODY_SIZE,
        preload: bool = True,
        api_gateway_base_path: str = "/",
        text_mime_types: list[str] | None = None,
        exclude_headers: list[str] | None = None,
    ) -> None:
        if prefix and (not prefix.startswith("/") or prefix.endswith("/")):
            raise ValueError(f"prefix must be empty or start with '/' and not end with one, got {prefix!r}")
        self.oip_app = app
        self._loop = _event_loop()
        # Mangum would run lifespan startup again on every invocation (Kludex/mangum#342): models
        # load here instead, in Lambda's init phase, or lazily once on first use.
        super().__init__(
            _Front(app, prefix=prefix, base_path=_base_path(api_gateway_base_path), max_body_size=max_body_size),
            lifespan="off",
            text_mime_types=text_mime_types,
            exclude_headers=exclude_headers,
        )
        if preload:
            self._loop.run_until_complete(app.load())

    def __call__(self, event: LambdaEvent, context: LambdaContext) -> dict[str, Any]:
        # Mangum runs each request on asyncio.get_event_loop(): make that ours again, should an
        # asyncio.run() in the function's own init code have cleared it.
        asyncio.set_event_loop(self._loop)
        response = super().__call__(event, context)
        limit = _ALB_RESPONSE_LIMIT if "elb" in event.get("requestContext", {}) else _RESPONSE_LIMIT
        body = response.get("body") or ""
        # Serialising the whole response costs a copy; only a body near the limit can break it.
        if len(body) > limit - 2**16 and (size := len(_encode(response))) > limit:
            message = (
                f"the response is {size} bytes as a Lambda payload, over the {limit}-byte limit AWS sets here"
                " (6 MiB for a synchronous invocation, 1 MB behind an ALB); ask for outputs in binary"
                " (binary_data_output) or send smaller batches"
            )
            source = self.infer(event, context)
            return source(
                {
                    "status": 500,
                    "headers": [[b"content-type", b"application/json"]],
                    "body": _encode({"error": message}),
                }
            )
        return response


def handler(
    models: Mapping[str, Any] | OIPApp,
    *,
    prefix: str = "/v2",
    max_body_size: int = MAX_BODY_SIZE,
    preload: bool = True,
    api_gateway_base_path: str = "/",
    text_mime_types: list[str] | None = None,
    exclude_headers: list[str] | None = None,
) -> OIPHandler:
    """A Lambda handler serving `models` (or an existing OIP app) under `prefix`.

    Models load now, during Lambda's init phase, unless ``preload=False`` (then on first use).
    Request bodies over `max_body_size` get a 413 that says why; the default is what fits in
    Lambda's 6 MB event once base64-encoded. `api_gateway_base_path` is a custom domain's base path
    mapping; an HTTP API's named stage is recognised by itself. The other options go to Mangum.

    ```python
    import oip_asgi_lambda
    from my_models import models

    handler = oip_asgi_lambda.handler(models)
    ```
    """
    app = models if isinstance(models, OIPApp) else oip_app(models, max_body_size=max_body_size)
    return OIPHandler(
        app,
        prefix=prefix,
        max_body_size=max_body_size,
        preload=preload,
        api_gateway_base_path=api_gateway_base_path,
        text_mime_types=text_mime_types,
        exclude_headers=exclude_headers,
    )


def _base_path(path: str) -> str:
    # As Mangum reads it: "inference", "/inference" and "/inference/" are the same mapping.
    return f"/{path.strip('/')}" if path.strip("/") else ""


def _event_loop() -> asyncio.AbstractEventLoop:
    """The thread's current event loop, or a new one made current (Python 3.14 no longer makes one up)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_event_loop()
        except RuntimeError:
            loop = None
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    return loop


class _Front:
    def __init__(self, app: OIPApp, *, prefix: str, base_path: str, max_body_size: int) -> None:
        self.app = app
        self.prefix = prefix
        self.base_path = base_path
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        outer = self._outer_path(path, scope.get("aws.event") or {})
        if outer is None:
            message = f"no route for {path}: this function serves the Open Inference Protocol at {self.prefix or '/'}"
            await _send_error(send, 404, message)
            return
        body = await _read_body(receive)
        if len(body) > self.max_body_size:
            message = (
                f"the request body is {len(body)} bytes ({_mib(len(body))}), over this function's limit of"
                f" {self.max_body_size} bytes: AWS Lambda takes at most 6 MB per request, and a body travels"
                " in it base64-encoded (4/3 larger); send tensors in binary (the binary tensor extension"
                " instead of JSON data) or split the batch into smaller requests"
            )
            await _send_error(send, 413, message)
            return
        scope = {**scope, "root_path": outer + self.prefix, "path": path}
        await self.app(scope, _replay(body, receive), send)

    def _outer_path(self, path: str, event: Mapping[str, Any]) -> str | None:
        """What precedes the prefix in `path`: nothing, the base path, or an HTTP API's stage."""
        outers = [self.base_path] if self.base_path else []
        stage = event.get("requestContext", {}).get("stage")
        if event.get("version") == "2.0" and stage and stage != "$default":
            outers.append(f"/{stage}")
        # The stripped reading goes first, so a stage that happens to be named like the prefix
        # still works; the literal one covers the same function reached on its default endpoint.
        for outer in [*outers, ""]:
            if path.startswith(outer) and _is_under(path[len(outer) :], self.prefix):
                return outer
        return None


def _is_under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/") or not prefix


async def _read_body(receive: Receive) -> bytes:
    # Mangum hands over the whole body in one message; the loop only keeps this honest ASGI.
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


async def _send_error(send: Send, status: int, message: str) -> None:
    body = _encode({"error": message})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
