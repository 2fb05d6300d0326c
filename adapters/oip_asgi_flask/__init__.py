"""Serve models over the Open Inference Protocol from a Flask app (``pip install oip-asgi[flask]``)."""

from __future__ import annotations

from ._extension import OIP

__all__ = ["OIP"]
