"""Serve models over the Open Inference Protocol beside a Django project (the ``django`` extra).

Under ASGI, :func:`mount` wraps ``get_asgi_application()``; under WSGI, :func:`mount_wsgi` wraps
``get_wsgi_application()``. Django itself is never imported here.
"""

from __future__ import annotations

from oip_asgi.integration import needs_extra

with needs_extra("django", "oip_asgi_django"):  # werkzeug, a2wsgi
    from ._mount import OIPDispatcher, mount, mount_wsgi

__all__ = ["OIPDispatcher", "mount", "mount_wsgi"]
