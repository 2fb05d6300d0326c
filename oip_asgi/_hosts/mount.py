"""Mounting into Starlette/FastAPI so the exact prefix (``GET /v2``) is served, not redirected."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.routing import Match, Mount
from starlette.types import Scope

from .._declarations.model import ModelsArgument
from .._http.paths import mounted_paths
from .._rest.app import AppOptions, OIPApp, as_oip_app

if TYPE_CHECKING:
    from typing_extensions import Unpack


class OIPMount(Mount):
    """A `Mount` that also matches its own path with no trailing slash.

    A plain ``Mount("/v2", ...)`` answers ``GET /v2`` with a 307 to ``/v2/``, and protocol clients
    such as tritonclient do not follow redirects, so server metadata would be unreachable.
    Matching is a prefix test rather than Starlette's pattern, which is slower per request and
    stops at a newline (``/v2/models/a%0Ab`` would get the host app's 404, not ours).
    """

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


def mount(app: Starlette, models: ModelsArgument | OIPApp, path: str = "/v2", **options: Unpack[AppOptions]) -> OIPApp:
    """Serve `models` (or a ready `OIPApp`) from a Starlette or FastAPI `app` at `path`.

    `options` go to `oip_app` when `models` is a mapping. Returns the mounted `OIPApp`.
    """
    served = as_oip_app(models, **options)
    app.router.routes.append(OIPMount(path, app=served))
    return served
