"""Mounting into Starlette/FastAPI so that the exact prefix (``GET /v2``) is served, not redirected.

Imported only where an app is mounted (`oip_asgi.mount`, a host's lifespan, the first request under a
host's router): an app that is not mounted in Starlette never pays for Starlette's routing module.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from starlette.routing import BaseRoute, Match, Mount, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from .paths import mounted_paths

logger = logging.getLogger("oip_asgi")


class OIPMount(Mount):
    """A `Mount` that also matches its own path with no trailing slash.

    A plain ``Mount("/v2", ...)`` answers ``GET /v2`` with a 307 to ``/v2/``, and protocol clients
    such as tritonclient do not follow redirects, so server metadata would be unreachable.
    Matching is a prefix test rather than Starlette's pattern, which is slower per request and
    stops at a newline (``/v2/models/a%0Ab`` would get the host app's 404, not ours).
    """

    def __init__(self, path: str, app: ASGIApp, name: str | None = None) -> None:
        super().__init__(path, app=app, name=name)
        # Starlette's router awaits `route.handle(...)`, whose body is `await self.app(...)`: the app itself is
        # handed the request instead, one coroutine frame fewer a request.
        self.handle = self.app  # type: ignore[method-assign,assignment]

    @property
    def routes(self) -> list[BaseRoute]:
        # The app's routes are its own table, not Starlette's: the host's url_path_for must not walk them.
        return []

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] not in ("http", "websocket"):
            return Match.NONE, {}
        paths = mounted_paths(scope, self.path)
        if paths is None:
            return Match.NONE, {}
        return Match.FULL, {
            "path_params": dict(scope.get("path_params", {})),
            "app_root_path": scope.get("app_root_path", scope.get("root_path", "")),
            "root_path": paths[0],
            "path": paths[1],
            "endpoint": self.app,
        }


class InFront:
    """`app` mounted at `prefix`, answered ahead of `host` (the host's middleware stack and router): a request
    below `prefix` goes straight to `app`, every other request and the lifespan to `host`.

    Only where a user asks for it (`oip_asgi.mount(..., bypass_host_middleware=True)`): the host's middleware
    (authentication, say) then never sees the app's requests.
    """

    __slots__ = ("app", "host", "prefix")

    def __init__(self, app: ASGIApp, prefix: str, host: ASGIApp) -> None:
        self.app = app
        self.prefix = prefix
        self.host = host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            mount_point = scope.get("root_path", "") + self.prefix
            path: str = scope["path"]
            if path.startswith(mount_point) and (len(path) == len(mount_point) or path[len(mount_point)] == "/"):
                scope["root_path"] = mount_point  # in place, as Starlette's own mounts change the scope they route
                await self.app(scope, receive, send)
                return
        await self.host(scope, receive, send)


def answer_own_path(host: Any, app: ASGIApp) -> list[str]:
    """Make each plain ``Mount`` of `app` in `host` (a Starlette or FastAPI app, or a router) an `OIPMount`,
    in place; the paths of those changed.

    ``app.mount("/v2", oip)`` is Starlette's natural line, and its ``GET /v2`` is a 307 that tritonclient
    reports as an empty ``InferenceServerException()``. A plain mount wrapped in middleware is left
    as it is (its middleware would be lost): `unanswered` tells of it.
    """
    changed = []
    for routes, index, mount in _plain_mounts(_routes_of(host), app):
        if mount.app is app:
            routes[index] = OIPMount(mount.path, app=app, name=mount.name)
            changed.append(mount.path)
    return changed


def unanswered(host: Any, app: ASGIApp) -> list[str]:
    """The paths of the plain ``Mount``s of `app` in `host` that still redirect their own path."""
    return [mount.path for _, _, mount in _plain_mounts(_routes_of(host), app)]


def _routes_of(host: Any) -> list[Any]:
    router = host if isinstance(host, Router) else getattr(host, "router", None)
    routes = getattr(router, "routes", None)
    return routes if isinstance(routes, list) else []


def _plain_mounts(routes: list[Any], app: ASGIApp) -> Iterator[tuple[list[Any], int, Mount]]:
    for index, route in enumerate(routes):
        if type(route) is Mount:
            base = getattr(route, "_base_app", route.app)
            if base is app:
                yield routes, index, route
            elif isinstance(base, Router) or isinstance(getattr(base, "router", None), Router):
                yield from _plain_mounts(_routes_of(base), app)  # Mount(routes=[...]), a sub-application
