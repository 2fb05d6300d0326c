"""oip-asgi: the Open Inference Protocol (KServe V2 / Triton REST) as a mountable ASGI app."""

from __future__ import annotations

import typing as _typing

from ._declarations.errors import (
    BadRequest,
    LengthRequired,
    MethodNotAllowed,
    ModelError,
    ModelNotReady,
    NotFound,
    OIPError,
    PayloadTooLarge,
    UnsupportedMediaType,
)
from ._declarations.model import Model, ModelsArgument, Predict
from ._declarations.model_repository import ModelRepository
from ._declarations.result import Result
from ._declarations.spec import TensorSpec
from ._rest.app import OIPApp, oip_app
from ._version import __version__

if _typing.TYPE_CHECKING:
    from ._hosts.mount import OIPMount, mount
    from ._openai.app import OpenAIApp, openai_app

# Mounting needs Starlette's application and routing modules; an app that only uses `oip_app`
# (an AWS Lambda handler, another framework) does not pay for importing them, nor for the OpenAI wire.
_LAZY = ("OIPMount", "mount")
_LAZY_OPENAI = ("OpenAIApp", "openai_app")


def __getattr__(name: str) -> _typing.Any:
    if name in _LAZY:
        from ._hosts import mount as _mount

        return getattr(_mount, name)
    if name in _LAZY_OPENAI:
        from ._openai import app as _openai

        return getattr(_openai, name)
    raise AttributeError(f"module 'oip_asgi' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY, *_LAZY_OPENAI])


__all__ = [
    "BadRequest",
    "LengthRequired",
    "MethodNotAllowed",
    "Model",
    "ModelError",
    "ModelNotReady",
    "ModelRepository",
    "ModelsArgument",
    "NotFound",
    "OIPApp",
    "OIPError",
    "OIPMount",
    "OpenAIApp",
    "PayloadTooLarge",
    "Predict",
    "Result",
    "TensorSpec",
    "UnsupportedMediaType",
    "__version__",
    "mount",
    "oip_app",
    "openai_app",
]
