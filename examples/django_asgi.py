"""``asgi.py`` of a Django project that serves the example models at /v2 beside its own pages.

Run it with ``uvicorn examples.django_asgi:application`` and try ``curl localhost:8000/v2``.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

import oip_asgi_django
from examples.models import models

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "examples.django_project")

application = oip_asgi_django.mount(get_asgi_application(), models, prefix="/v2")
