from __future__ import annotations

from flask import Flask
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from oip_asgi import ModelsArgument, OIPApp
from oip_asgi.integration import as_oip_app, checked_prefix
from oip_asgi_wsgi import WSGIBridge


class OIP:
    """A Flask extension serving `models` (or an existing OIP app) under `prefix`.

    ``init_app`` wraps ``app.wsgi_app``, so requests under `prefix` never reach Flask's routing or
    its request hooks; the app's OIP app is ``app.extensions["oip_asgi"]``. Each Flask app gets its
    own OIP app built from `models` (one a2wsgi event-loop thread each). Models load in
    ``init_app`` unless ``preload=False`` (then on first use).

    ```python
    app = Flask(__name__)
    OIP(app, models=models)
    ```
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        models: ModelsArgument | OIPApp,
        prefix: str = "/v2",
        preload: bool = True,
    ) -> None:
        self.models = models
        self.prefix = checked_prefix(prefix)
        self.preload = preload
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        oip = as_oip_app(self.models)
        bridge = WSGIBridge(oip, preload=self.preload)
        app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {self.prefix: bridge})  # type: ignore[method-assign]
        app.extensions["oip_asgi"] = oip
