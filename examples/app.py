"""A FastAPI app with a route of its own and the example models served at /v2.

Run it with ``uvicorn examples.app:app`` and try ``curl localhost:8000/v2``. The models load at
startup and unload at shutdown, with the host's lifespan.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

import oip_asgi
from examples.models import models

oip = oip_asgi.oip_app(models)
app = FastAPI(title="oip-asgi example", lifespan=oip.lifespan)


@app.get("/")
def index() -> dict[str, str]:
    return {"message": "the Open Inference Protocol is served at /v2", "models": "/v2/models/{name}"}


# FastAPI's /docs shows the host's own routes; the protocol's document is the mounted app's.
@app.get("/docs/v2", include_in_schema=False)
def protocol_docs() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/v2/openapi.json", title="Open Inference Protocol")


oip_asgi.mount(app, oip, path="/v2")
