"""A Django project in one file, for the Django examples: its settings, one page, its URLconf.

``examples/django_asgi.py`` and ``examples/django_wsgi.py`` point DJANGO_SETTINGS_MODULE here.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

SECRET_KEY = "example-only-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
ROOT_URLCONF = __name__
INSTALLED_APPS: list[str] = []
MIDDLEWARE: list[str] = []
USE_TZ = True


def index(request: HttpRequest) -> HttpResponse:
    return HttpResponse(
        f"Django serves {request.path}; the Open Inference Protocol is at /v2\n", content_type="text/plain"
    )


urlpatterns = [path("", index)]
