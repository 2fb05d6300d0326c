"""The WSGI bridge the Django and Flask adapters share: an OIP app served to a WSGI server via a2wsgi."""

from __future__ import annotations

from ._bridge import WSGIBridge

__all__ = ["WSGIBridge"]
