"""Mounting into Starlette/FastAPI: `mount` adds an `OIPMount`, which serves the exact prefix (``GET /v2``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette

from .._declarations.model import ModelsArgument
from .._http.mounting import OIPMount
from .._rest.app import AppOptions, OIPApp, as_oip_app

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["OIPMount", "mount"]


def mount(app: Starlette, models: ModelsArgument | OIPApp, path: str = "/v2", **options: Unpack[AppOptions]) -> OIPApp:
    """Serve `models` (or a ready `OIPApp`) from a Starlette or FastAPI `app` at `path`.

    `options` go to `oip_app` when `models` is a mapping. Returns the mounted `OIPApp`; give its
    `lifespan` to `app` so that its models load at startup and unload at shutdown.
    """
    served = as_oip_app(models, **options)
    app.router.routes.append(OIPMount(path, app=served))
    return served
