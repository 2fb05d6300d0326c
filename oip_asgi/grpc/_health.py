"""grpc.health.v1 answering from the app (for Kubernetes' gRPC probes and grpc_health_probe).

"" and "liveness" answer SERVING while the server runs; "inference.GRPCInferenceService" and
"readiness" answer SERVING once every model has loaded, as ServerReady does, and NOT_SERVING before.
"""

from __future__ import annotations

from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .._app import OIPApp
from ._service import SERVICE

LIVENESS = ("", "liveness")
READINESS = (SERVICE, "readiness")


class HealthServicer(health_pb2_grpc.HealthServicer):
    def __init__(self, app: OIPApp) -> None:
        self.app = app

    async def Check(self, request: health_pb2.HealthCheckRequest, context: Any) -> health_pb2.HealthCheckResponse:
        if request.service in LIVENESS:
            return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
        if request.service in READINESS:
            if self.app.ready:
                return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
            self.app.start_loading()
            return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.NOT_SERVING)
        await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        raise AssertionError("abort returned")  # pragma: no cover


def add_health(grpc_server: grpc.aio.Server, app: OIPApp) -> str:
    """Add the health service to `grpc_server`; its full name."""
    health_pb2_grpc.add_HealthServicer_to_server(HealthServicer(app), grpc_server)
    return str(health_pb2.DESCRIPTOR.services_by_name["Health"].full_name)
