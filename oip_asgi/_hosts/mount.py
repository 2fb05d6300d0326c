"""Mounting into Starlette/FastAPI: `mount` adds an `OIPMount`, which serves the exact prefix (``GET /v2``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.types import ASGIApp

from .._declarations.model import ModelsArgument
from .._http.mounting import InFront, OIPMount
from .._rest.app import AppOptions, OIPApp, as_oip_app

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["OIPMount", "mount"]


def mount(
    app: Starlette,
    models: ModelsArgument | OIPApp,
    path: str = "/v2",
    *,
    bypass_host_middleware: bool = False,
    **options: Unpack[AppOptions],
) -> OIPApp:
    """Serve `models` (or a ready `OIPApp`) from a Starlette or FastAPI `app` at `path`.

    `options` go to `oip_app` when `models` is a mapping. Returns the mounted `OIPApp`; give its
    `lifespan` to `app` so that its models load at startup and unload at shutdown.

    The host's middleware runs for the protocol's requests as for its own routes. With
    `bypass_host_middleware=True` the requests under `path` are answered ahead of it instead (the host's
    middleware, exception handlers and router never see them; its other routes and its lifespan are as
    before): the protocol's cost alone, for hosts whose middleware need not see inference traffic. Never
    with middleware that guards these paths, such as authentication.
    """
    served = as_oip_app(models, **options)
    mounted = OIPMount(path, app=served)
    app.router.routes.append(mounted)
    if bypass_host_middleware:
        _answer_in_front(app, served, mounted.path)  # the mount's path as Starlette keeps it ("/v2/" is "/v2")
    return served


def _answer_in_front(app: Starlette, served: OIPApp, path: str) -> None:
    """Put `served` ahead of `app`'s middleware stack: the one Starlette builds at its first call, or has built."""
    build = app.build_middleware_stack

    def build_behind() -> ASGIApp:
        return InFront(served, path, build())

    app.build_middleware_stack = build_behind  # type: ignore[method-assign]  # this host's own, asked for
    if app.middleware_stack is not None:  # the host has served already: its stack is built
        app.middleware_stack = InFront(served, path, app.middleware_stack)
