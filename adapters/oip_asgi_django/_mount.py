from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from oip_asgi import ModelsArgument, OIPApp
from oip_asgi.integration import as_oip_app, checked_prefix, mounted_scope
from oip_asgi_wsgi import WSGIBridge

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication


class OIPDispatcher:
    """Sends requests under `prefix` to `oip_app` and everything else to `app`.

    Lifespan goes to the OIP app, which loads its models at startup: Django's ASGI handler
    refuses lifespan scopes.
    """

    def __init__(self, app: ASGIApp, oip_app: OIPApp, *, prefix: str = "/v2") -> None:
        self.app = app
        self.oip_app = oip_app
        self.prefix = checked_prefix(prefix)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.oip_app(scope, receive, send)
            return
        if scope["type"] == "http":
            mounted = mounted_scope(scope, self.prefix)
            if mounted is not None:
                await self.oip_app(mounted, receive, send)
                return
        await self.app(scope, receive, send)


def mount(app: ASGIApp, models: ModelsArgument | OIPApp, *, prefix: str = "/v2") -> OIPDispatcher:
    """Serve `models` (or an existing OIP app) under `prefix` beside a Django ASGI application.

    ```python
    # asgi.py
    django_application = get_asgi_application()
    application = oip_asgi_django.mount(django_application, models, prefix="/v2")
    ```
    """
    return OIPDispatcher(app, as_oip_app(models), prefix=prefix)


def mount_wsgi(
    app: WSGIApplication, models: ModelsArgument | OIPApp, *, prefix: str = "/v2", preload: bool = True
) -> DispatcherMiddleware:
    """Serve `models` (or an existing OIP app) under `prefix` beside a Django WSGI application.

    The OIP app runs on an a2wsgi event-loop thread: build this once per process (in ``wsgi.py``),
    never per request. Models load now unless ``preload=False`` (then on first use).

    ```python
    # wsgi.py
    application = oip_asgi_django.mount_wsgi(get_wsgi_application(), models, prefix="/v2")
    ```
    """
    return DispatcherMiddleware(app, {checked_prefix(prefix): WSGIBridge(as_oip_app(models), preload=preload)})
