"""Serve models over the Open Inference Protocol from AWS Lambda (the ``lambda`` extra)."""

from __future__ import annotations

from oip_asgi.integration import needs_extra

with needs_extra("lambda", "oip_asgi_lambda"):  # mangum
    from ._handler import MAX_BODY_SIZE, OIPHandler, handler

__all__ = ["MAX_BODY_SIZE", "OIPHandler", "handler"]
