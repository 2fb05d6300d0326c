"""``wsgi.py`` of a Django project that serves the example models at /v2 beside its own pages.

Run it with ``waitress-serve examples.django_wsgi:application`` and try ``curl localhost:8080/v2``
(``pip install waitress`` first: the ``django`` extra brings no WSGI server).
"""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

import oip_asgi_django
from examples.models import models

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "examples.django_project")

# Once per process: the OIP app runs on an a2wsgi event-loop thread of its own.
application = oip_asgi_django.mount_wsgi(get_wsgi_application(), models, prefix="/v2")
