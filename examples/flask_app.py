"""A Flask app with a page of its own and the example models served at /v2.

Run it with ``waitress-serve examples.flask_app:app`` and try ``curl localhost:8080/v2``
(``pip install waitress`` first: the ``flask`` extra brings no WSGI server).
"""

from __future__ import annotations

from flask import Flask

from examples.models import models
from oip_asgi_flask import OIP

app = Flask(__name__)


@app.get("/")
def index() -> str:
    return "Flask serves this page; the Open Inference Protocol is at /v2\n"


OIP(app, models=models, prefix="/v2")
