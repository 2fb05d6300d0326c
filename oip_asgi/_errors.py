"""The errors a request can end in, each rendered as ``{"error": message}`` with its status code.

OIPError
 ├── BadRequest (400)                  malformed or invalid request
 │    └── HealthFalse (400)            a health probe whose answer is "no" (the protocol's 4xx for false)
 ├── NotFound (404)                    unknown path, model or version
 ├── MethodNotAllowed (405)
 ├── LengthRequired (411)              a body that must say its length did not
 ├── PayloadTooLarge (413)             body over the configured limit
 ├── UnsupportedMediaType (415)        a Content-Encoding other than gzip, deflate or identity
 ├── ModelError (500)                  the model raised, or returned something its outputs cannot be
 └── ModelNotReady (503)              the model has not loaded, failed to load, or is saturated
"""

from __future__ import annotations


class OIPError(Exception):
    status_code: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(OIPError):
    status_code = 400


class NotFound(OIPError):
    status_code = 404


class MethodNotAllowed(OIPError):
    status_code = 405

    def __init__(self, message: str, allow: str) -> None:
        super().__init__(message)
        self.allow = allow


class LengthRequired(OIPError):
    status_code = 411


class PayloadTooLarge(OIPError):
    status_code = 413


class UnsupportedMediaType(OIPError):
    status_code = 415


class ModelError(OIPError):
    status_code = 500


class ModelNotReady(OIPError):
    status_code = 503


class ClientDisconnected(Exception):
    """The client went away mid-request: there is nobody left to answer."""
