"""Serve models over the Open Inference Protocol from a Flask app (the ``flask`` extra)."""

from __future__ import annotations

from ._extension import OIP

__all__ = ["OIP"]
