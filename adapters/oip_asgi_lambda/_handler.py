"""An OIP app as an AWS Lambda handler, through Mangum.

Mangum's handler for each event source (API Gateway REST or HTTP API, Function URL, ALB) turns the
event into one ASGI request and the response back into what that source expects. Around it sit the
parts of the path that AWS adds and the application never sees elsewhere (a custom domain's base
path, an HTTP API's named stage: they go into root_path) and Lambda's payload limits, which
otherwise end in opaque AWS errors.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import TYPE_CHECKING, Any, TypedDict

import msgspec
from mangum import Mangum
from mangum.handlers import ALB, HTTPGateway
from mangum.protocols import HTTPCycle
from mangum.types import LambdaContext, LambdaEvent, LambdaHandler, Response, Scope

from oip_asgi import ModelsArgument, NotFound, OIPApp, OIPError, PayloadTooLarge
from oip_asgi.integration import AppOptions, as_oip_app, checked_prefix, is_under, mounted_scope, render_error

if TYPE_CHECKING:
    from typing_extensions import Unpack

# Lambda refuses a synchronous event over 6 MiB before the function runs, and a body travels in it
# as base64 (4/3 larger): 4.4 MiB of raw body leaves ~130 KiB of the event for headers and context.
MAX_BODY_SIZE = 4_613_734
# Lambda returns at most 6,291,556 bytes (checked against 6 MiB, a little under); an ALB passes on
# at most 1 MB of response JSON.
_RESPONSE_LIMIT = 6 * 2**20
_ALB_RESPONSE_LIMIT = 2**20

_encode = msgspec.json.Encoder().encode


class HandlerOptions(TypedDict, total=False):
    """`OIPHandler`'s options, as :func:`handler` passes them on."""

    prefix: str
    max_body_size: int
    preload: bool
    api_gateway_base_path: str
    text_mime_types: list[str] | None
    exclude_headers: list[str] | None


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
        self.oip_app = app
        self.prefix = checked_prefix(prefix, allow_empty=True)
        self.max_body_size = max_body_size
        # As Mangum reads it: "inference", "/inference" and "/inference/" are the same mapping. It
        # stays out of Mangum's config: Mangum would cut it from the path, not move it to root_path.
        self.base_path = f"/{api_gateway_base_path.strip('/')}".rstrip("/")
        self._loop = _event_loop()
        # Mangum would run lifespan startup again on every invocation (Kludex/mangum#342): models
        # load here instead, in Lambda's init phase, or lazily once on first use.
        super().__init__(app, lifespan="off", text_mime_types=text_mime_types, exclude_headers=exclude_headers)
        if preload:
            self._loop.run_until_complete(app.load())

    def __call__(self, event: LambdaEvent, context: LambdaContext) -> dict[str, Any]:
        # Mangum runs each request on asyncio.get_event_loop(): make that ours again, should an
        # asyncio.run() in the function's own init code have cleared it.
        asyncio.set_event_loop(self._loop)
        # Mangum.__call__ with lifespan off, but a request refused here never reaches the app.
        source = self.infer(event, context)
        scope, body = source.scope, source.body
        try:
            scope = self._mounted(source, scope)
            if len(body) > self.max_body_size:
                raise PayloadTooLarge(_too_large(len(body), self.max_body_size, binary=_has_binary_tensors(scope)))
        except OIPError as error:
            response = _response(error)
        else:
            response = HTTPCycle(scope, body)(self.app)
        return _within_limit(source, source(response))

    def _mounted(self, source: LambdaHandler, scope: Scope) -> Scope:
        """The scope the app sees: what precedes the prefix in the path (nothing, the base path, or an
        HTTP API's named stage) and the prefix, in root_path."""
        path = scope["path"]
        outers = [self.base_path] if self.base_path else []
        if isinstance(source, HTTPGateway) and source.event["version"] == "2.0":
            stage = source.event["requestContext"].get("stage")
            if stage and stage != "$default":
                outers.append(f"/{stage}")
        # The stripped reading goes first, so a stage that happens to be named like the prefix
        # still works; the literal one covers the same function reached on its default endpoint.
        for outer in [*outers, ""]:
            if is_under(path, outer):
                mounted = mounted_scope({**scope, "root_path": outer}, self.prefix)
                if mounted is not None:
                    return mounted
        raise NotFound(f"no route for {path}: this function serves the Open Inference Protocol at {self.prefix or '/'}")


def handler(models: ModelsArgument | OIPApp, **options: Unpack[HandlerOptions]) -> OIPHandler:
    """A Lambda handler serving `models` (or an existing OIP app) under `prefix` (default ``"/v2"``).

    Models load now, during Lambda's init phase, unless ``preload=False`` (then on first use).
    Request bodies over `max_body_size` get a 413 that says why; the default, :data:`MAX_BODY_SIZE`,
    is what fits in Lambda's 6 MB event once base64-encoded. `api_gateway_base_path` is a custom
    domain's base path mapping; an HTTP API's named stage is recognised by itself.
    `text_mime_types` and `exclude_headers` go to Mangum.

    ```python
    import oip_asgi_lambda
    from my_models import models

    handler = oip_asgi_lambda.handler(models)
    ```
    """
    # An app built here bounds a decompressed body as the handler bounds the raw one; a ready app
    # keeps the limits it was built with.
    app_options: AppOptions = {}
    if not isinstance(models, OIPApp):
        app_options["max_body_size"] = options.get("max_body_size", MAX_BODY_SIZE)
    return OIPHandler(as_oip_app(models, **app_options), **options)


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


def _has_binary_tensors(scope: Scope) -> bool:
    return any(key.lower() == b"inference-header-content-length" for key, _ in scope["headers"])


def _too_large(size: int, limit: int, *, binary: bool) -> str:
    message = (
        f"the request body is {size} bytes ({size / 2**20:.1f} MiB), over this function's limit of {limit} bytes:"
        " AWS Lambda takes at most 6 MB per request, and a body travels in it base64-encoded (4/3 larger);"
    )
    if binary:
        # Binary already: only fewer tensors per request help, or a way around Lambda's payload.
        return (
            f"{message} the tensors are already binary, so split the batch into smaller requests"
            " (tensors this large on their own are better served from a container, on ECS for example,"
            " or read by the model from S3)"
        )
    return (
        f"{message} send tensors in binary (the binary tensor extension: typically 3-4x smaller than JSON"
        " numbers) or split the batch into smaller requests"
    )


def _within_limit(source: LambdaHandler, result: dict[str, Any]) -> dict[str, Any]:
    """`result`, or an error in its place when AWS would refuse to return it."""
    limit = _ALB_RESPONSE_LIMIT if isinstance(source, ALB) else _RESPONSE_LIMIT
    body = result.get("body") or ""
    # Serialising the whole response costs a copy; only a body near the limit can break it.
    if len(body) > limit - 2**16 and (size := len(_encode(result))) > limit:
        message = (
            f"the response is {size} bytes as a Lambda payload, over the {limit}-byte limit AWS sets here"
            " (6 MiB for a synchronous invocation, 1 MB behind an ALB); ask for outputs in binary"
            " (binary_data_output) or send smaller batches"
        )
        return source(_response(OIPError(message)))
    return result


def _response(error: OIPError) -> Response:
    headers, body = render_error(error)
    return {
        "status": error.status_code,
        "headers": [[key.encode("latin-1"), value.encode("latin-1")] for key, value in headers],
        "body": body,
    }
