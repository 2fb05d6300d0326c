"""The Open Inference Protocol's gRPC half: ``inference.GRPCInferenceService`` for an `OIPApp`'s models.

Needs the ``grpc`` extra (``pip install -e '.[grpc]'`` in a clone; ``pip install 'oip-asgi[grpc]'``
once published). `serving` runs a ``grpc.aio`` server in the event loop of the ASGI server, beside
the REST app and on the same models; `server` builds one unstarted, for adding services of one's own.
Besides the protocol's RPCs it serves Triton's ModelStreamInfer (the streaming extension). The
generated modules are importable as ``oip_asgi.grpc.inference_pb2`` and ``oip_asgi.grpc.inference_pb2_grpc``.
"""

from __future__ import annotations

import importlib
import typing as _typing

from .._declarations.extras import install_line as _install_line

if _typing.TYPE_CHECKING:
    from ._codec import TYPED_OUTPUTS
    from ._server import DEFAULT_ADDRESS, bind, server, serving
    from ._service import STATUS_CODES, InferenceService

# Each name from its module on first use: importing the generated messages alone (a model repository
# reads config.pbtxt into inference_pb2.ModelConfig) needs protobuf, not grpcio and the server.
_LAZY = {
    "DEFAULT_ADDRESS": "._server",
    "InferenceService": "._service",
    "STATUS_CODES": "._service",
    "TYPED_OUTPUTS": "._codec",
    "bind": "._server",
    "server": "._server",
    "serving": "._server",
}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'oip_asgi.grpc' has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(module, __name__), name)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.startswith("oip_asgi"):
            raise
        # grpcio (or protobuf) missing: one line with how to install it, rather than a bare import error.
        package = exc.name.partition(".")[0]
        raise ModuleNotFoundError(
            f"oip_asgi.grpc needs the {package} package, which the grpc extra brings: {_install_line('grpc')}",
            name=exc.name,
        ) from exc


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["DEFAULT_ADDRESS", "InferenceService", "STATUS_CODES", "TYPED_OUTPUTS", "bind", "server", "serving"]
