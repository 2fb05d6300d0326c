"""What a hostile client costs a real server, read from outside in /proc: memory follows bytes received,
never lengths declared (Content-Length, Inference-Header-Content-Length, a gzip body's claims).

Run alone for the figures: ``pytest tests/rest/test_hostile_memory.py -s`` prints each measurement.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import HOST, Server, free_port, serving

pytestmark = pytest.mark.slow

MiB = 2**20


GRPC_PORT = free_port()


@pytest.fixture
def server() -> Iterator[Server]:
    port = free_port()
    argv = ["-m", "oip_asgi", "serve", "tests.apps.guard:models", "--port", str(port), "--grpc-port", str(GRPC_PORT)]
    with serving([*argv, "--log-level", "warning", "--no-access-log"], port) as running:
        yield running


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def rss(pid: int) -> int:
    return _status(pid, "VmRSS")


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from the current RSS


def peak(pid: int) -> int:
    return _status(pid, "VmHWM")


def bytes_read(pid: int) -> int:
    """Every byte the process has taken from its sockets and files so far (rchar)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


def _head(headers: dict[str, str | int]) -> bytes:
    lines = ["POST /v2/models/identity/infer HTTP/1.1", "Host: oip"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def post(port: int, body: bytes, **headers: str | int) -> int:
    with socket.create_connection((HOST, port), timeout=30) as connection:
        connection.sendall(_head({"Content-Length": len(body), **headers}) + body)
        answer = b""
        while b"\r\n" not in answer:
            chunk = connection.recv(65536)
            assert chunk, "the server closed the connection without answering"
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_gzip_bodies_declaring_a_10_MB_header_do_not_grow_the_server(server: Server) -> None:
    """Triton's qa/L0_http/http_input_size_limit_test.py::test_no_leak_on_invalid_inference_header_length."""
    body = gzip.compress(os.urandom(MiB))
    before = rss(server.pid)
    statuses = {post(server.port, body, **{"Content-Encoding": "gzip", "Inference-Header-Content-Length": 9999999})}
    statuses |= {
        post(server.port, body, **{"Content-Encoding": "gzip", "Inference-Header-Content-Length": 9999999})
        for _ in range(99)
    }
    growth = rss(server.pid) - before
    print(f"\n100 gzip bodies of 1 MiB declaring a 9,999,999-byte header: RSS +{growth / MiB:.1f} MiB")
    assert statuses == {400}
    assert growth < 32 * MiB


@pytest.mark.parametrize("clients", [16, 64])
def test_concurrent_small_bodies_declaring_a_33_MB_header_keep_the_peak_flat(server: Server, clients: int) -> None:
    body = gzip.compress(b"{" + b" " * 4000)[:1024]  # 1 KiB of a gzip stream cut short
    headers = {"Content-Encoding": "gzip", "Inference-Header-Content-Length": 33_000_000}
    statuses: list[int] = []
    barrier = threading.Barrier(clients)

    def client() -> None:
        barrier.wait()
        statuses.append(post(server.port, body, **headers))

    before = rss(server.pid)
    reset_peak(server.pid)
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    growth = peak(server.pid) - before
    print(f"\n{clients} concurrent 1 KiB gzip bodies declaring a 33 MB header: peak RSS +{growth / MiB:.1f} MiB")
    assert statuses == [400] * clients
    assert growth < 64 * MiB


def _trickle(server: Server, head: bytes, body: bytes) -> tuple[int, int]:
    """Send `head` and `body` and leave the request unfinished: (bytes the server has read, its RSS growth)."""
    before = rss(server.pid)
    read_before = bytes_read(server.pid)
    with socket.create_connection((HOST, server.port), timeout=30) as connection:
        connection.sendall(head)
        for start in range(0, len(body), 256 * 1024):
            connection.sendall(body[start : start + 256 * 1024])
        sent = len(head) + len(body)
        while bytes_read(server.pid) - read_before < sent:  # until the server has taken it all in
            threading.Event().wait(0.01)
        return sent, rss(server.pid) - before


def test_a_json_body_trickling_in_costs_what_has_arrived(server: Server) -> None:
    """Content-Length declares 30 MiB of JSON (under the 32 MiB limit); 8 MiB of it arrive."""
    head = _head({"Content-Type": "application/json", "Content-Length": 30 * MiB})
    body = b'{"inputs":[{"name":"X","shape":[1],"datatype":"FP32","data":[' + b"1," * (4 * MiB)
    arrived, growth = _trickle(server, head, body)
    print(f"\nJSON body declaring 30 MiB, {arrived / MiB:.1f} MiB arrived: RSS +{growth / MiB:.1f} MiB")
    assert growth < arrived + 8 * MiB  # the bound is arrived + 32 MiB; a 30 MiB buffer made up front fails this


def test_a_binary_tensor_trickling_in_costs_what_has_arrived(server: Server) -> None:
    """The header declares a 120 MiB tensor; 8 MiB of it arrive."""
    size = 120 * MiB
    tensor = {"name": "X", "shape": [size // 4], "datatype": "FP32", "parameters": {"binary_data_size": size}}
    header = json.dumps({"inputs": [tensor]}).encode()
    head = _head({"Inference-Header-Content-Length": len(header), "Content-Length": len(header) + size})
    arrived, growth = _trickle(server, head, header + bytes(8 * MiB))
    print(f"\nbinary tensor declaring 120 MiB, {arrived / MiB:.1f} MiB arrived: RSS +{growth / MiB:.1f} MiB")
    assert growth < arrived + 8 * MiB


def _unread(server_port: int, client_ports: set[int]) -> int | None:
    """Bytes the server has not yet read from those connections (their receive queues); None until all are seen."""
    queued, seen = 0, set()
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]  # grpcio accepts on IPv6 sockets, v4-mapped
    for line in [line for table in tables for line in table.read_text().splitlines()[1:]]:
        fields = line.split()
        local, remote = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
        if local == server_port and remote in client_ports:
            seen.add(remote)
            queued += int(fields[4].split(":")[1], 16)
    return queued if seen == client_ports else None


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _header_block(authority: bytes) -> bytes:
    """HPACK literals, never indexed nor Huffman-coded: all a server must read."""
    fields = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/inference.GRPCInferenceService/ModelInfer"),
              (b":authority", authority), (b"content-type", b"application/grpc"), (b"te", b"trailers")]  # fmt: skip
    return b"".join(b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value for name, value in fields)


def _lying_grpc_call(declared: int) -> tuple[socket.socket, int]:
    """An HTTP/2 connection whose ModelInfer message declares `declared` bytes and sends 1 KiB: (it, bytes sent)."""
    connection = socket.create_connection((HOST, GRPC_PORT), timeout=30)
    sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, b"")  # the preface, our SETTINGS
    connection.sendall(sent)
    assert connection.recv(65536)  # the server's SETTINGS
    message = b"\x00" + struct.pack(">I", declared) + os.urandom(1024)  # gRPC's framing: flag, length, bytes
    rest = _frame(4, 1, 0, b"") + _frame(1, 4, 1, _header_block(f"{HOST}:{GRPC_PORT}".encode()))
    rest += _frame(0, 0, 1, message)
    connection.sendall(rest)
    return connection, len(sent) + len(rest)


@pytest.mark.parametrize("clients", [16, 64])
def test_grpc_messages_declaring_100_MB_keep_the_peak_flat(server: Server, clients: int) -> None:
    before = rss(server.pid)
    reset_peak(server.pid)
    calls = [_lying_grpc_call(100_000_000) for _ in range(clients)]
    try:
        ports = {connection.getsockname()[1] for connection, _ in calls}
        deadline = time.monotonic() + 30
        while _unread(GRPC_PORT, ports) != 0:  # until the server has taken in all that was sent
            assert time.monotonic() < deadline, "the server did not read what was sent"
            threading.Event().wait(0.01)
        growth = peak(server.pid) - before
    finally:
        for connection, _ in calls:
            connection.close()
    print(f"\n{clients} gRPC messages declaring 100 MB, 1 KiB sent each: peak RSS +{growth / MiB:.1f} MiB")
    assert growth < 64 * MiB
