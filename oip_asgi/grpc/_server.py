"""A ``grpc.aio`` server of an app's core (an `OIPApp`'s), in the event loop of the ASGI server that runs the app."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import grpc

from .._core.logs import show_unless_configured
from .._core.server import HasCore, ServerCore, core_of
from .._declarations.extras import install_line
from .._declarations.restricted import RestrictionsArgument
from .._protobuf import inference_pb2 as pb
from ._service import DEFAULT_FIRST_REQUEST_TIMEOUT, SERVICE, InferenceService

logger = logging.getLogger("oip_asgi.grpc")

DEFAULT_ADDRESS = "127.0.0.1:8001"
_MAX_MESSAGE = 2**31 - 1  # gRPC's own ceiling: a message's length is an int32
# Room for the protobuf fields around a tensor: a tensor REST takes in a body must fit a message too.
_FRAMING = 1 << 16


def server(
    app: HasCore | ServerCore,
    address: str | None = None,
    *,
    credentials: grpc.ServerCredentials | None = None,
    max_message_size: int | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    health: bool = False,
    reflection: bool = False,
    options: Sequence[tuple[str, Any]] = (),
    restricted_protocols: RestrictionsArgument = (),
    stream_first_request_timeout: float | None = DEFAULT_FIRST_REQUEST_TIMEOUT,
) -> grpc.aio.Server:
    """An unstarted ``grpc.aio`` server of `app`'s models; add services of your own, then ``await start()``.

    It binds `address` ("host:port"; port 0 picks a free one) when given, with TLS when `credentials`
    are (``grpc.ssl_server_credentials(...)``). `max_message_size` bounds a received message (by
    default the app's ``max_body_size`` plus room for the message's own fields, so that a tensor REST
    takes gRPC takes too; past it the client gets RESOURCE_EXHAUSTED). `health` adds grpc.health.v1
    (for Kubernetes' gRPC probes and grpc_health_probe): "" and "liveness" answer SERVING while the
    server runs, "inference.GRPCInferenceService" and "readiness" once every model has loaded.
    `reflection` adds server reflection (for grpcurl). `options` are grpcio channel arguments.
    `restricted_protocols` serves groups of RPCs only to calls that carry a metadata key, as Triton's
    ``--grpc-restricted-protocol``: rules such as ``"model-repository:admin-key=secret"`` (the call
    then sends ``triton-grpc-protocol-admin-key: secret``), or ``{"model-repository": ("admin-key", "secret")}``.
    `stream_first_request_timeout` ends a ModelStreamInfer that sends no request for that many seconds
    after it opens (DEADLINE_EXCEEDED; None: never), so that idle streams do not pile up.
    """
    core = core_of(app)
    if max_message_size is None:
        max_message_size = min(core.max_body_size + _FRAMING, _MAX_MESSAGE)
    if not 0 < max_message_size <= _MAX_MESSAGE:
        raise ValueError(f"max_message_size must be between 1 and {_MAX_MESSAGE} bytes, got {max_message_size}")
    channel_options = [
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.max_send_message_length", _MAX_MESSAGE),
        *options,
    ]
    service = InferenceService(
        core, restricted_protocols=restricted_protocols, stream_first_request_timeout=stream_first_request_timeout
    )  # a bad rule fails before a server
    grpc_server = grpc.aio.server(interceptors=list(interceptors), options=channel_options)
    grpc_server.add_generic_rpc_handlers([service.handler()])
    services = [SERVICE]
    if health:
        with _needs_the_extra("health=True"):
            from ._health import add_health  # grpcio-health-checking, imported only when asked for

        services.append(add_health(grpc_server, core))
    if reflection:
        with _needs_the_extra("reflection=True"):
            _add_reflection(grpc_server, services)
    if address is not None:
        bind(grpc_server, address, credentials)
    elif credentials is not None:
        raise ValueError("credentials apply to an address: pass address too, or bind with bind(server, address, ...)")
    return grpc_server


@contextlib.contextmanager
def _needs_the_extra(feature: str) -> Iterator[None]:
    """A package of the grpc extra missing, said in one line with how to install it, not as a bare import error."""
    try:
        yield
    except ModuleNotFoundError as exc:
        package = (exc.name or "").partition(".")[0]
        raise ModuleNotFoundError(
            f"gRPC's {feature} needs the {package} package, which the grpc extra brings: {install_line('grpc')}",
            name=exc.name,
        ) from exc


def _add_reflection(grpc_server: grpc.aio.Server, services: list[str]) -> None:
    from google.protobuf import descriptor_pb2
    from google.protobuf.descriptor_pool import DescriptorPool
    from grpc_reflection.v1alpha import reflection, reflection_pb2

    # The service's messages live in a pool of their own (see _generate.py); reflection answers from a
    # pool holding them and the other services served.
    pool = DescriptorPool()
    files: list[Any] = [pb.DESCRIPTOR, reflection_pb2.DESCRIPTOR]
    if len(services) > 1:
        from grpc_health.v1 import health_pb2

        files.append(health_pb2.DESCRIPTOR)
    for file in files:
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        pool.Add(proto)
    reflection.enable_server_reflection([*services, reflection.SERVICE_NAME], grpc_server, pool=pool)


def bind(grpc_server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None = None) -> int:
    """Listen on `address` (with TLS when `credentials` are given); the port bound."""
    if credentials is None:
        port = grpc_server.add_insecure_port(address)
    else:
        port = grpc_server.add_secure_port(address, credentials)
    if not port:  # older grpcio answers 0 where newer ones raise
        raise RuntimeError(f"gRPC could not bind {address}")
    return port


@contextlib.asynccontextmanager
async def serving(
    app: HasCore | ServerCore,
    address: str = DEFAULT_ADDRESS,
    *,
    credentials: grpc.ServerCredentials | None = None,
    grace: float = 5.0,
    **options: Any,
) -> AsyncIterator[int]:
    """Serve `app`'s models over gRPC while the block runs; it gets the port bound (for port 0).

    Enter it from a host's lifespan, so the gRPC server shares the ASGI server's event loop::

        @contextlib.asynccontextmanager
        async def lifespan(host):
            async with oip_asgi.grpc.serving(oip, address="[::]:8001"):
                yield

    Leaving stops the server gracefully: new calls are refused, calls in flight get `grace` seconds.
    Then, unless another host still serves the app (entered inside ``oip.lifespan(host)``, or the serve
    command's), its models unload: each ``unload`` step, a Triton model's ``finalize``. `options` are `server`'s.
    """
    grpc_server = server(app, **options)
    port = bind(grpc_server, address, credentials)
    core = core_of(app)
    async with core.hosted():  # the last host of the core to leave unloads its models, after this server stops
        await grpc_server.start()
        show_unless_configured(logger)  # where it listens, as uvicorn says where it does
        logger.info("oip-asgi gRPC running on %s%s", _bound(address, port), " (TLS)" if credentials else "")
        core.start_loading()
        try:
            yield port
        finally:
            await grpc_server.stop(grace)


def _bound(address: str, port: int) -> str:
    """`address` with the port bound in place of the one asked for (0 picks one); a unix socket as it is."""
    host, colon, asked = address.rpartition(":")
    return f"{host}:{port}" if colon and asked.isdigit() else address
