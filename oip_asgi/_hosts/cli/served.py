"""The app of a whole server: the protocol at /v2 (and OpenAI's API at /v1), and what starts and stops with it."""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from starlette.types import Message, Receive, Scope, Send

from ..._declarations.errors import NotFound
from ..._http.routing import Route, Router, Table
from ..._rest.app import OIPApp
from ..._rest.responses import send_error, send_response
from .security import grpc_credentials

if TYPE_CHECKING:
    from ..._openai.app import OpenAIApp

PREFIX = "/v2"
OPENAI_PREFIX = "/v1"

logger = logging.getLogger("uvicorn.error")  # the server's own log, where uvicorn says where it listens


class Served(Router):
    """`app` at /v2 of a whole server, and what starts and stops with it: gRPC, a metrics port.

    `metrics` is (host, first port, ports to try): a worker takes the first port of the range it
    can bind, so N workers started on one range each get their own. `grpc` is the gRPC server's
    restricted protocols and TLS files, as `security.checked` gives them. `openai` serves OpenAI's API
    over the same models at /v1, under the same restricted API rules (`openai_api_key` required of its
    requests, where given), and beside it what operators probe on an OpenAI server's port, as vLLM's and
    Triton's OpenAI frontend serve them: ``/health/ready`` (``health``'s group), ``/health`` and, with
    metrics, ``/metrics``. `max_body_size` is the largest request body of /v2 and /v1 alike (the
    --http-max-input-size given). `url` is where uvicorn serves it (``http://127.0.0.1:8000``): the
    startup's log line tells what is served where. A path under neither prefix is a 404 in the
    protocol's format, saying what is served where.
    """

    def __init__(
        self,
        app: OIPApp,
        *,
        grpc_address: str | None = None,
        metrics: tuple[str, int, int] | None = None,
        grpc: Mapping[str, Any] | None = None,
        openai: bool = False,
        openai_api_key: str | None = None,
        max_body_size: int | None = None,
        url: str = "",
    ) -> None:
        self.app = app
        self.openai: OpenAIApp | None = None
        if openai:  # OpenAI's wire, imported by the servers that serve it
            from ..._openai.app import OpenAIApp

            self.openai = OpenAIApp(app, api_key=openai_api_key, max_body_size=max_body_size)
        self.grpc_address = grpc_address
        self.metrics = metrics
        self.grpc = grpc or {}
        self.url = url
        mounts: list[tuple[str, Router | Table]] = [(PREFIX, app)]
        probes: list[Route] = []
        if self.openai is not None:
            mounts.append((OPENAI_PREFIX, self.openai))
            probes = [Route("/health/ready", self._ready, "health"), Route("/health", self._live, "health")]
            if metrics is not None:  # no API group: open, as Triton's metrics port is
                probes.append(Route("/metrics", self._metrics, "metrics"))
        elsewhere = Table(probes, app.core, send_error=send_error, not_found=self._not_served)
        elsewhere.restrictions = app.restrictions
        if probes:
            mounts.append(("", elsewhere))
        super().__init__(mounts, lifespan=self._lifespan, fallback=elsewhere)

    def _not_served(self, scope: Scope, path: str) -> NotFound:
        message = f"no such path {path!r}: this server serves the Open Inference Protocol at {PREFIX}"
        if self.openai is not None:
            message += f" and OpenAI's API at {OPENAI_PREFIX}"
        return NotFound(message)

    async def _ready(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        """200 once the server serves (as /v2/health/ready: 400 before), with no body: a probe reads the status."""
        await send_response(send, 200 if self.app.core.server_ready() else 400, [], [b""])

    async def _live(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        await send_response(send, 200, [], [b""])

    async def _metrics(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

        await send_response(send, 200, [(b"content-type", CONTENT_TYPE_LATEST.encode())], [generate_latest(REGISTRY)])

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with AsyncExitStack() as companions:

            async def started(message: Message) -> None:
                if message["type"] == "lifespan.startup.complete":
                    try:
                        served = await self._start(companions)
                    except Exception as exc:
                        await send({"type": "lifespan.startup.failed", "message": str(exc)})
                        return
                    logger.info("oip-asgi serves %s (process %d)", ", ".join(served), os.getpid())
                await send(message)

            async def stopping() -> Message:
                message = await receive()
                if message["type"] == "lifespan.shutdown":
                    await companions.aclose()  # before the app's own shutdown
                return message

            await self.app(scope, stopping, started)

    async def _start(self, companions: AsyncExitStack) -> list[str]:
        """Start gRPC and the metrics port; what the whole server serves, and where."""
        served = [f"the Open Inference Protocol at {self.url}{PREFIX}"]
        if self.openai is not None:
            keyed = " (an API key required)" if self.openai.requires_key else ""
            served.append(f"OpenAI's API at {self.url}{OPENAI_PREFIX}{keyed}")
        if self.grpc_address is not None:
            grpc = importlib.import_module("oip_asgi.grpc")  # the grpc extra, checked before serving
            try:
                security: dict[str, Any] = {}  # only what was asked for: plain gRPC is called as before
                if self.grpc.get("tls"):
                    security["credentials"] = grpc_credentials(self.grpc["tls"])
                if self.grpc.get("restricted_protocols"):
                    security["restricted_protocols"] = self.grpc["restricted_protocols"]
                if self.grpc.get("stream_first_request_timeout"):
                    security["stream_first_request_timeout"] = self.grpc["stream_first_request_timeout"]
                serving = grpc.serving(self.app, address=self.grpc_address, **security)
                port = await companions.enter_async_context(serving)
            except Exception as exc:
                raise RuntimeError(f"gRPC could not serve on {self.grpc_address}: {type(exc).__name__}: {exc}") from exc
            host = self.grpc_address.rpartition(":")[0]
            served.append(f"the protocol's gRPC service at {host}:{port}{' (TLS)' if self.grpc.get('tls') else ''}")
        if self.metrics is not None:
            from .metrics_server import metrics_server  # wsgiref and http.server, for a metrics port only

            server = metrics_server(*self.metrics)
            companions.callback(server.server_close)
            companions.callback(server.shutdown)
            host = f"[{self.metrics[0]}]" if ":" in self.metrics[0] else self.metrics[0]
            served.append(f"Prometheus metrics at http://{host}:{server.server_port}/metrics")
        return served
