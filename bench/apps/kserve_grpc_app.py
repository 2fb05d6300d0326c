"""KServe's ModelServer with its gRPC server on (`enable_grpc=True`), serving the same identity models
as kserve_app.py; the gRPC workloads (bench/grpc_bench.py) are measured on it."""

from __future__ import annotations

import sys

# KServe reads its options from the command line when imported; its gRPC server takes at most 8 MiB
# by default, gRPC's ceiling here (as the other servers are run), so that G4's 64 MiB request fits.
sys.argv += ["--grpc_max_send_message_length", "2147483647", "--grpc_max_receive_message_length", "2147483647"]

import kserve_app  # noqa: E402  # a sibling: the apps run as scripts
from kserve.protocol.grpc import server as grpc_server  # noqa: E402


class LoopbackGRPCServer(grpc_server.GRPCServer):
    """KServe's gRPC server listens on [::] unconditionally; the benchmark keeps everything on 127.0.0.1."""

    async def start(self, max_workers: int) -> None:
        aio_server = grpc_server.aio.server

        def loopback_server(*args: object, **kwargs: object) -> grpc_server.aio.Server:
            server = aio_server(*args, **kwargs)
            add_port = server.add_insecure_port
            server.add_insecure_port = lambda address: add_port(address.replace("[::]", "127.0.0.1"))  # type: ignore[method-assign]
            return server

        grpc_server.aio.server = loopback_server
        try:
            await super().start(max_workers)
        finally:
            grpc_server.aio.server = aio_server


def main() -> None:
    import kserve.model_server

    kserve.model_server.GRPCServer = LoopbackGRPCServer  # type: ignore[attr-defined]
    kserve_app.main(enable_grpc=True)


if __name__ == "__main__":
    main()
