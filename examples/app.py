"""A FastAPI app with a route of its own and the example models served at /v2.

Run it with ``uvicorn examples.app:app`` and try ``curl localhost:8000/v2``.
"""

from __future__ import annotations

from fastapi import FastAPI

import oip_asgi
from examples.models import models

app = FastAPI(title="oip-asgi example")


@app.get("/")
def index() -> dict[str, str]:
    return {"message": "the Open Inference Protocol is served at /v2", "models": "/v2/models/{name}"}


oip_asgi.mount(app, models, path="/v2")
