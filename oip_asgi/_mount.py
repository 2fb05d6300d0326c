"""Mounting into Starlette/FastAPI so the exact prefix (``GET /v2``) is served, not redirected."""

from __future__ import annotations

import re
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Match, Mount
from starlette.types import Scope

from ._app import OIPApp, oip_app, route_path
from ._models import ModelsArgument


class OIPMount(Mount):
    """A `Mount` that also matches its own path with no trailing slash.

    A plain ``Mount("/v2", ...)`` answers ``GET /v2`` with a 307 to ``/v2/``, and protocol clients
    such as tritonclient do not follow redirects, so server metadata would be unreachable.
    """

    def __init__(self, path: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(path, *args, **kwargs)
        # Starlette's pattern ends at a newline (`.*`): /v2/models/a%0Ab would get the host app's 404, not ours.
        self.path_regex = re.compile(self.path_regex.pattern, re.DOTALL)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http":
            root_path = scope.get("root_path", "")
            if route_path(scope) == self.path:
                return Match.FULL, {
                    "path_params": dict(scope.get("path_params", {})),
                    "app_root_path": scope.get("app_root_path", root_path),
                    "root_path": root_path + self.path,
                    "endpoint": self.app,
                }
        return super().matches(scope)


def mount(app: Starlette, models: ModelsArgument | OIPApp, path: str = "/v2", **options: Any) -> OIPApp:
    """Serve `models` (or a ready `OIPApp`) from a Starlette or FastAPI `app` at `path`.

    `options` go to `oip_app` when `models` is a mapping. Returns the mounted `OIPApp`.
    """
    served = models if isinstance(models, OIPApp) else oip_app(models, **options)
    app.router.routes.append(OIPMount(path, app=served))
    return served
