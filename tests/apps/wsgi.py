"""tests/apps/cli.py's models in a Flask app, for a forking WSGI server (gunicorn's sync workers)."""

from __future__ import annotations

from flask import Flask

from oip_asgi_flask import OIP
from tests.apps.cli import models

app = Flask(__name__)
OIP(app, models=models, prefix="/v2")
