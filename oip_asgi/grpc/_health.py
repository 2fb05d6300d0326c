"""grpc.health.v1 answering from the app (for Kubernetes' gRPC probes and grpc_health_probe).

"" and "liveness" answer SERVING while the server runs; "inference.GRPCInferenceService" and
"readiness" answer SERVING once every model has loaded, as ServerReady does, and NOT_SERVING before.
"""

from __future__ import annotations

from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .._core.server import ServerCore
from .._declarations.errors import NotFound, quoted
from ._service import SERVICE, abort

LIVENESS = ("", "liveness")
READINESS = (SERVICE, "readiness")
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class HealthServicer(health_pb2_grpc.HealthServicer):
    def __init__(self, core: ServerCore) -> None:
        self.core = core

    async def Check(self, request: health_pb2.HealthCheckRequest, context: Any) -> health_pb2.HealthCheckResponse:
        if request.service in LIVENESS:
            return health_pb2.HealthCheckResponse(status=SERVING)
        if request.service in READINESS:
            ready = self.core.server_ready()
            return health_pb2.HealthCheckResponse(status=SERVING if ready else NOT_SERVING)
        await abort(context, NotFound(f"unknown service {quoted(request.service)}"))


def add_health(grpc_server: grpc.aio.Server, core: ServerCore) -> str:
    """Add the health service to `grpc_server`; its full name."""
    health_pb2_grpc.add_HealthServicer_to_server(HealthServicer(core), grpc_server)
    return str(health_pb2.DESCRIPTOR.services_by_name["Health"].full_name)
