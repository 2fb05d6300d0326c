"""oip-asgi: the Open Inference Protocol (KServe V2 / Triton REST) as a mountable ASGI app."""

from __future__ import annotations

__version__ = "0.1.0"

from ._app import OIPApp, oip_app
from ._errors import (
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
from ._models import Model, Predict, TensorSpec
from ._mount import OIPMount, mount

__all__ = [
    "BadRequest",
    "LengthRequired",
    "MethodNotAllowed",
    "Model",
    "ModelError",
    "ModelNotReady",
    "NotFound",
    "OIPApp",
    "OIPError",
    "OIPMount",
    "PayloadTooLarge",
    "Predict",
    "TensorSpec",
    "UnsupportedMediaType",
    "__version__",
    "mount",
    "oip_app",
]
