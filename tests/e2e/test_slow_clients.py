"""Slow and idle clients against a real `oip-asgi serve`: they do not hold up others, and are let go.

200 connections send half a request and stop, 200 gRPC streams send nothing; meanwhile a well-behaved
client is answered on both wires while they all still wait (were it held up, its answer would come only
once the server had let them go); then the server closes them all after its timeouts (10 s here:
--timeout-request-read and --grpc-stream-first-request-timeout, 30 s and 60 s by default).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from oip_asgi.grpc import inference_pb2 as pb
from tests.support.servers import HOST, Server, free_port, serving
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

CLIENTS = 200
TIMEOUT = 10  # long enough for the 400 clients to be set up on a loaded machine before the first is let go


@pytest.fixture
def server() -> Iterator[tuple[Server, int]]:
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "tests.apps.guard:models", "--port", str(port), "--grpc-port", str(grpc_port)]
    argv += ["--timeout-request-read", str(TIMEOUT), "--grpc-stream-first-request-timeout", str(TIMEOUT)]
    with serving([*argv, "--log-level", "warning", "--no-access-log"], port) as running:
        yield running, grpc_port


def open_sockets(pid: int) -> int:
    return sum(1 for fd in Path(f"/proc/{pid}/fd").iterdir() if os.readlink(fd).startswith("socket:"))


def _half_requests(port: int) -> list[socket.socket]:
    """Half a request line, half the headers, or the headers and half a body: then nothing."""
    halves = [
        b"POST /v2/models/identity/inf",
        b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: oip\r\nContent-Le",
        b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: oip\r\nContent-Length: 1000\r\n\r\n" + b'{"inputs": [',
        b"",  # connects, sends nothing
    ]
    connections = []
    for index in range(CLIENTS):
        connection = socket.create_connection((HOST, port))
        connection.sendall(halves[index % len(halves)])
        connections.append(connection)
    return connections


def _well_behaved_rest(port: int) -> None:
    body = b'{"inputs":[{"name":"X","shape":[2],"datatype":"FP32","data":[1,2]}]}'
    with socket.create_connection((HOST, port), timeout=30) as connection:
        head = f"POST /v2/models/identity/infer HTTP/1.1\r\nHost: oip\r\nContent-Length: {len(body)}\r\n\r\n"
        connection.sendall(head.encode() + body)
        answer = connection.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200"), answer


def _still_waiting(connection: socket.socket) -> bool:
    """Whether the server still holds `connection` open (it has neither answered nor closed it)."""
    try:
        connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    return False


def test_slow_and_idle_clients_do_not_hold_up_others_and_are_let_go(server: tuple[Server, int]) -> None:
    running, grpc_port = server
    baseline = open_sockets(running.pid)

    async def scenario() -> None:
        async with grpc.aio.insecure_channel(f"{HOST}:{grpc_port}") as channel:
            stream = channel.stream_stream(
                "/inference.GRPCInferenceService/ModelStreamInfer",
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=pb.ModelStreamInferResponse.FromString,
            )
            infer = channel.unary_unary(
                "/inference.GRPCInferenceService/ModelInfer",
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=pb.ModelInferResponse.FromString,
            )
            idle = [stream() for _ in range(CLIENTS)]  # opened, never written to
            for call in idle:
                await call.wait_for_connection()
            halves = _half_requests(running.port)
            try:
                # Meanwhile, well-behaved clients on both wires, answered while the others still wait.
                await asyncio.to_thread(_well_behaved_rest, running.port)
                tensor = pb.ModelInferRequest.InferInputTensor(
                    name="X", datatype="FP32", shape=[2], contents=pb.InferTensorContents(fp32_contents=[1, 2])
                )
                answer = await infer(pb.ModelInferRequest(model_name="identity", inputs=[tensor]), timeout=30)
                assert np.frombuffer(answer.raw_output_contents[0], np.float32).tolist() == [1, 2]
                assert all(map(_still_waiting, halves)) and not any(call.done() for call in idle)

                # Then the server lets them go: each half request sees its connection closed ...
                for connection in halves:
                    connection.settimeout(30)
                    assert connection.recv(65536) == b""
                # ... and each idle stream ends with DEADLINE_EXCEEDED.
                codes = {await call.code() for call in idle}
                assert codes == {grpc.StatusCode.DEADLINE_EXCEEDED}
                details = await idle[0].details()
                assert details == f"the stream sent no request within {TIMEOUT} s"
            finally:
                for connection in halves:
                    connection.close()

    asyncio.run(scenario())
    # Every connection let go; the server may close its ends a moment after the clients' (the gRPC channel's).
    wait_until(lambda: open_sockets(running.pid) <= baseline + 2, "the server closed the connections")
