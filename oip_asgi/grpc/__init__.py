"""The Open Inference Protocol's gRPC half: ``inference.GRPCInferenceService`` for an `OIPApp`'s models.

Needs the ``grpc`` extra (``pip install -e '.[grpc]'`` in a clone; ``pip install 'oip-asgi[grpc]'``
once published). `serving` runs a ``grpc.aio`` server in the event loop of the ASGI server, beside
the REST app and on the same models; `server` builds one unstarted, for adding services of one's own.
Besides the protocol's RPCs it serves Triton's ModelStreamInfer (the streaming extension). The
generated modules are importable as ``oip_asgi.grpc.inference_pb2`` and ``oip_asgi.grpc.inference_pb2_grpc``.
"""

from __future__ import annotations

from ._codec import TYPED_OUTPUTS
from ._server import DEFAULT_ADDRESS, bind, server, serving
from ._service import STATUS_CODES, InferenceService

__all__ = ["DEFAULT_ADDRESS", "InferenceService", "STATUS_CODES", "TYPED_OUTPUTS", "bind", "server", "serving"]
