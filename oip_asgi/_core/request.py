"""A request as every wire hands it to the core (`DecodedRequest`, declared in ``_declarations/request.py``,
where a model that takes requests names it), and what the client asked to get back."""

from __future__ import annotations

from .._declarations.request import DecodedRequest, RequestedOutput

__all__ = ["DecodedRequest", "RequestedOutput"]
