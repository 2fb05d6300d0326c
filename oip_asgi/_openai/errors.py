"""OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``, with the status the `openai`
client maps to its exceptions (400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 500
InternalServerError, ...)."""

from __future__ import annotations

from .._declarations.errors import BadRequest, NotFound, OIPError, PayloadTooLarge, quoted
from .._declarations.restricted import Restricted
from .schemas import encoder

# OpenAI's `type` by status: the client reads the status, people read the type.
_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


class InvalidField(BadRequest):
    """A request field this server cannot take, named in `param` as OpenAI names it (``messages[0].content``),
    with OpenAI's `code` where it has one (``decimal_above_max_value``)."""

    def __init__(self, message: str, *, param: str | None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


class UnsuitableModel(BadRequest):
    """A served model that follows none of the conventions an endpoint needs; the message says what it lacks."""

    param = "model"
    code = "model_not_supported"


class UnknownPath(NotFound):
    code = None


class UnknownModel(NotFound):
    """A model name that is no model here, in OpenAI's words, with the models that are."""

    param = "model"
    code = "model_not_found"

    def __init__(self, name: str, served: list[str], most: int = 20, *, where: str = "served") -> None:
        listed = ", ".join(served[:most]) + (f" and {len(served) - most} more" if len(served) > most else "")
        super().__init__(f"The model {quoted(name)} does not exist ({where}: {listed or 'none'})")


class InvalidApiKey(OIPError, status_code=401):
    """A request to /v1 without the API key the server was started with (OpenAI's answer to a wrong key)."""

    kind = "invalid_request_error"
    code = "invalid_api_key"


class Unauthorized(OIPError, status_code=401):
    """A restricted API called without its header: Triton's OpenAI frontend's 401 (the protocol's is a 403)."""

    code = "invalid_auth"


class BodyTooLarge(PayloadTooLarge):
    code = "content_too_large"


def openai_error(error: OIPError) -> OIPError:
    """`error` as this API answers it: a restricted API is a 401 here, as Triton's OpenAI frontend has it, so
    that the openai client raises its AuthenticationError (a 403 would be its PermissionDeniedError)."""
    if isinstance(error, Restricted):
        return Unauthorized(error.message)
    return error


def error_type(status: int) -> str:
    if status in _TYPES:
        return _TYPES[status]
    return "invalid_request_error" if status < 500 else "server_error"


def error_object(error: OIPError) -> dict[str, object]:
    # A NotFound from the core is an unknown model (OpenAI's "model_not_found"); the wire's own is a path.
    unknown_model = isinstance(error, NotFound) and not isinstance(error, UnknownPath)
    return {
        "error": {
            "message": error.message,
            "type": getattr(error, "kind", None) or error_type(error.status_code),
            "param": getattr(error, "param", "model" if unknown_model else None),
            "code": getattr(error, "code", "model_not_found" if unknown_model else None),
        }
    }


def error_body(error: OIPError) -> bytes:
    return encoder.encode(error_object(error))
