"""Serve models over the Open Inference Protocol from a Flask app (the ``flask`` extra)."""

from __future__ import annotations

from oip_asgi.integration import needs_extra

with needs_extra("flask", "oip_asgi_flask"):  # flask, a2wsgi
    from ._extension import OIP

__all__ = ["OIP"]
