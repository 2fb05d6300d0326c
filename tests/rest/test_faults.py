"""Faults: clients that vanish mid-request, models that misbehave, slow and saturated models.

The disconnect tests drive the ASGI app the way a server does (a receive that ends in
``http.disconnect``, a send that fails once the peer is gone) and then a real uvicorn process with
raw sockets; both loop so that a leaked task, buffer or traceback per request would show.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
import socket
import struct
import sys
import threading
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import pytest

from oip_asgi import Model, TensorSpec, oip_app
from oip_asgi._rest.responses import SLICE
from tests.support.client import binary_request, client, split_response
from tests.support.servers import uvicorn
from tests.support.waiting import HANG

pytestmark = pytest.mark.anyio

FP32_IN = [TensorSpec("x", "FP32", [-1])]
FP32_OUT = [TensorSpec("y", "FP32", [-1])]
COUNT_IN = [TensorSpec("n", "INT64", [1])]
INT_IN = [TensorSpec("x", "INT32", [-1])]
INT_OUT = [TensorSpec("y", "INT32", [-1])]
BIG = 3 * SLICE // 4 + 1000  # FP32 elements: the output goes out in four slices


# --- Clients that disconnect, in-process --------------------------------------------------------


class PeerGone(OSError):
    """What an ASGI server's send raises once the peer has gone (ASGI spec: a subclass of OSError)."""


@dataclass
class Peer:
    """One HTTP exchange as the app sees it: the body arrives in chunks and the client may leave.

    `leave_after_body` cuts the body after that many bytes; `leave_at_send` makes the client leave
    as the app sends that message (0 = the response start). Once gone, receive says
    ``http.disconnect`` and send raises `PeerGone`, or, with `silent`, returns as uvicorn 0.54 does.
    """

    body: bytes
    leave_after_body: int | None = None
    leave_at_send: int | None = None
    silent: bool = False
    chunk: int = 16 * 2**10
    gone: bool = False
    position: int = 0
    sent: list[tuple[str, int]] = field(default_factory=list)  # (type, status or body size): no bodies kept

    async def receive(self) -> dict[str, Any]:
        if self.leave_after_body is not None and self.position >= self.leave_after_body:
            self.gone = True
        if self.gone:
            return {"type": "http.disconnect"}
        end = self.position + self.chunk
        if self.leave_after_body is not None:
            end = min(end, self.leave_after_body)
        piece = self.body[self.position : end]
        self.position += len(piece)
        return {"type": "http.request", "body": piece, "more_body": self.position < len(self.body)}

    async def send(self, message: dict[str, Any]) -> None:
        if self.leave_at_send is not None and len(self.sent) >= self.leave_at_send:
            self.gone = True
        if self.gone:
            if self.silent:
                return
            raise PeerGone(104, "Connection reset by peer")
        size = message.get("status", len(message.get("body", b"")))
        self.sent.append((message["type"], size))


def infer_scope(model: str, body: bytes, headers: dict[str, str] | None = None) -> dict[str, Any]:
    raw = [(b"content-length", str(len(body)).encode())]
    raw += [(key.encode(), value.encode()) for key, value in (headers or {}).items()]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": f"/models/{model}/infer",
        "raw_path": f"/models/{model}/infer".encode(),
        "root_path": "",
        "query_string": b"",
        "headers": raw,
    }


def fault_app(calls: list[str]) -> Any:
    def echo(x: np.ndarray) -> np.ndarray:
        calls.append("echo")
        return x

    async def big(n: np.ndarray) -> np.ndarray:
        calls.append("big")
        return np.ones(int(n[0]), dtype=np.float32)

    def big_sync(n: np.ndarray) -> np.ndarray:
        calls.append("big_sync")
        return np.ones(int(n[0]), dtype=np.float32)

    return oip_app(
        {
            "echo": Model(echo, inputs=FP32_IN, outputs=FP32_OUT),
            "big": Model(big, inputs=COUNT_IN, outputs=FP32_OUT),
            "big_sync": Model(big_sync, inputs=COUNT_IN, outputs=FP32_OUT),
        }
    )


ECHO_VALUES = np.arange(64 * 2**10, dtype=np.float32)  # 256 KiB: the body arrives in 16 chunks


def json_echo() -> tuple[bytes, dict[str, str]]:
    body = {"inputs": [{"name": "x", "shape": [4096], "datatype": "FP32", "data": ECHO_VALUES[:4096].tolist()}]}
    return json.dumps(body).encode(), {}


def binary_echo() -> tuple[bytes, dict[str, str]]:
    tensor = {"name": "x", "shape": [ECHO_VALUES.size], "datatype": "FP32"}
    tensor["parameters"] = {"binary_data_size": ECHO_VALUES.nbytes}
    header = {"inputs": [tensor], "parameters": {"binary_data_output": True}}
    return binary_request(header, ECHO_VALUES.tobytes())


def big_output(gzip: bool = False) -> tuple[bytes, dict[str, str]]:
    header = {
        "inputs": [{"name": "n", "shape": [1], "datatype": "INT64", "data": [BIG]}],
        "outputs": [{"name": "y", "parameters": {"binary_data": True}}],
    }
    return json.dumps(header).encode(), {"accept-encoding": "gzip"} if gzip else {}


@dataclass(frozen=True)
class Case:
    model: str
    request: tuple[bytes, dict[str, str]]
    peer: dict[str, Any]
    runs_model: bool  # whether the model still runs: the client left only after the whole body


def cases() -> dict[str, Case]:
    json_body, binary_body = json_echo(), binary_echo()
    return {
        "before-any-body": Case("echo", binary_body, {"leave_after_body": 0}, False),
        "mid-json-body": Case("echo", json_body, {"leave_after_body": len(json_body[0]) // 2}, False),
        "mid-binary-header": Case("echo", binary_body, {"leave_after_body": 20}, False),
        "mid-binary-tensor": Case("echo", binary_body, {"leave_after_body": len(binary_body[0]) // 2}, False),
        "at-response-start": Case("big", big_output(), {"leave_at_send": 0}, True),
        "mid-response": Case("big", big_output(), {"leave_at_send": 2}, True),
        "mid-response-sync-model": Case("big_sync", big_output(), {"leave_at_send": 3}, True),
        "mid-response-gzip": Case("big", big_output(gzip=True), {"leave_at_send": 2}, True),
        "mid-response-silent-send": Case("big", big_output(), {"leave_at_send": 1, "silent": True}, True),
    }


CASES = cases()


async def run_case(app: Any, case: Case) -> Peer:
    body, headers = case.request
    peer = Peer(body, **case.peer)
    await app(infer_scope(case.model, body, headers), peer.receive, peer.send)
    return peer


@pytest.mark.parametrize("name", list(CASES))
async def test_a_client_that_leaves_ends_the_request_quietly(name: str, caplog: pytest.LogCaptureFixture) -> None:
    case = CASES[name]
    calls: list[str] = []
    app = fault_app(calls)
    caplog.set_level(logging.DEBUG)
    peer = await run_case(app, case)  # returns: nothing escapes the app
    assert peer.gone
    assert calls == ([case.model] if case.runs_model else [])
    # No error response is attempted after the client has gone, and never a second response start.
    starts = [size for kind, size in peer.sent if kind == "http.response.start"]
    assert starts == ([200] if case.peer.get("leave_at_send", 0) > 0 else [])
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR] == []
    # The same app serves the next client in full.
    body, headers = binary_echo()
    whole = Peer(body)
    await app(infer_scope("echo", body, headers), whole.receive, whole.send)
    assert whole.sent[0] == ("http.response.start", 200)
    assert sum(size for kind, size in whole.sent[1:]) > ECHO_VALUES.nbytes


async def test_hundreds_of_vanishing_clients_leak_no_memory_and_no_tasks(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    app = fault_app(calls)
    caplog.set_level(logging.ERROR)
    tasks_before = asyncio.all_tasks()
    rounds, warmup = 40, 8

    async def one_round() -> None:
        for case in CASES.values():
            await run_case(app, case)

    tracemalloc.start()
    try:
        for _ in range(warmup):
            await one_round()
        calls.clear()
        gc.collect()
        baseline = tracemalloc.get_traced_memory()[0]
        for _ in range(rounds):
            await one_round()
        gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    with anyio.fail_after(HANG):  # the requests' own tasks end just after their answers
        while asyncio.all_tasks() != tasks_before:
            await asyncio.sleep(0)
    assert len(calls) == rounds * sum(case.runs_model for case in CASES.values())
    # 64 KiB over 360 requests: about 180 bytes kept per request fails, and each output alone is 3 MiB.
    assert growth < 64 * 2**10, f"traced memory grew by {growth} bytes over {rounds * len(CASES)} requests"
    assert caplog.records == []


# --- Clients that disconnect, against a real uvicorn process ------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def settled_rss_kib(pid: int, timeout: float = HANG) -> int:
    """RSS once it holds still for 0.2 s: the last requests' tasks have finished."""
    deadline = time.monotonic() + timeout
    readings = [rss_kib(pid)]
    while len(readings) < 5 or len(set(readings[-5:])) > 1:
        assert time.monotonic() < deadline, f"RSS never settled: {readings[-10:]}"
        time.sleep(0.05)
        readings.append(rss_kib(pid))
    return readings[-1]


FILL = 2 * 2**20  # FP32 elements: an 8 MiB response, more than the socket buffers hold


def raw_post(model: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = f"POST /models/{model}/infer HTTP/1.1\r\nhost: test\r\ncontent-length: {len(body)}\r\n"
    head += "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    return (head + "\r\n").encode() + body


def hang_up(sock: socket.socket, abort: bool) -> None:
    if abort:  # linger 0: the close sends RST instead of FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def leave_mid_body(port: int, request: bytes, sent: int, abort: bool) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(request[:sent])
    hang_up(sock, abort)


def leave_mid_response(port: int, request: bytes, abort: bool) -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # keep the kernel from taking it all
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    sock.sendall(request)
    received = b""
    while len(received) < 64 * 2**10:
        data = sock.recv(16 * 2**10)
        assert data, "the server closed before sending a large part of the response"
        received += data
    assert received.startswith(b"HTTP/1.1 200 ")
    hang_up(sock, abort)


def check_still_serving(port: int) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        body, headers = binary_echo()
        response = http.post("/models/echo/infer", content=body, headers=headers)
        assert response.status_code == 200
        header, payload = split_response(response)
        assert header["outputs"][0]["shape"] == [ECHO_VALUES.size]
        assert np.array_equal(np.frombuffer(payload, dtype=np.float32), ECHO_VALUES)
        response = http.post("/models/fill/infer", content=big_output()[0].replace(str(BIG).encode(), b"5"))
        assert response.status_code == 200
        assert split_response(response)[0]["outputs"][0]["shape"] == [5]
        assert np.array_equal(np.frombuffer(split_response(response)[1], dtype=np.float32), np.arange(5))


@pytest.mark.parametrize("http", ["httptools", "h11"])
@pytest.mark.slow
def test_a_real_server_shrugs_off_clients_that_leave(http: str) -> None:
    json_body, binary_body = json_echo(), binary_echo()
    half_json = raw_post("echo", *json_body)
    half_binary = raw_post("echo", *binary_body)
    fill = raw_post("fill", big_output()[0].replace(str(BIG).encode(), str(FILL).encode()), {})

    def one_round(port: int) -> None:
        for abort in (False, True):
            leave_mid_body(port, half_json, len(half_json) // 2, abort)
            leave_mid_body(port, half_binary, len(half_binary) - len(binary_body[0]) // 2, abort)
            leave_mid_body(port, half_binary, half_binary.index(b"\r\n\r\n") + 4, abort)  # headers only
            leave_mid_response(port, fill, abort)

    with uvicorn("tests.apps.faults:app", "--http", http, "--no-access-log", ready_path="/health/ready") as server:
        for _ in range(25):
            one_round(server.port)
        check_still_serving(server.port)
        start = settled_rss_kib(server.pid)
        for _ in range(100):
            one_round(server.port)
        check_still_serving(server.port)
        end = settled_rss_kib(server.pid)
        log = server.output()
    print(f"{http}: RSS {start} KiB -> {end} KiB")
    # 800 clients left mid-request; an 8 MiB response kept per request would be gigabytes.
    assert end - start < 16 * 2**10, f"RSS grew from {start} KiB to {end} KiB"
    assert "Traceback" not in log and "ERROR" not in log, log


# --- Models that fail, return the wrong thing, are slow or saturated (in-process) ---------------


class NoArray:
    """An array-like whose conversion fails the way a torch tensor that requires grad does."""

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad")


def answers_with(value: Any) -> Any:
    return lambda x: value


async def test_model_faults_not_covered_in_test_app_are_500s_naming_the_problem(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def async_broken(x: np.ndarray) -> np.ndarray:
        raise KeyError("no such layer")

    def exits(x: np.ndarray) -> np.ndarray:
        sys.exit(2)  # what argparse does on a bad argument

    two_outputs = [*INT_OUT, TensorSpec("z", "INT32", [-1])]
    faults: dict[str, tuple[Any, str]] = {
        "async_raises": (Model(async_broken, inputs=INT_IN, outputs=INT_OUT), "raised KeyError: 'no such layer'"),
        "exits": (Model(exits, inputs=INT_IN, outputs=INT_OUT), "model 'exits' raised SystemExit: 2"),
        "none": (Model(answers_with(None), inputs=INT_IN, outputs=INT_OUT), "model 'none' returned nothing (None)"),
        "none_undeclared": (answers_with(None), "model 'none_undeclared' returned nothing (None)"),
        "ragged": (Model(answers_with([[1, 2], [3]]), inputs=INT_IN, outputs=INT_OUT), "inhomogeneous shape"),
        "float_for_int": (
            Model(lambda x: x / 2, inputs=INT_IN, outputs=INT_OUT),
            "output 'y' has dtype float64, which does not cast to INT32",
        ),
        "overflowing_int64": (
            Model(lambda x: x.astype(np.int64) << 40, inputs=INT_IN, outputs=INT_OUT),
            "output 'y' holds 2199023255552, out of range for INT32",
        ),
        "uint64_for_int64": (
            Model(lambda x: x.astype(np.uint64) << 63, inputs=INT_IN, outputs=[TensorSpec("y", "INT64", [-1])]),
            "output 'y' holds 9223372036854775808, out of range for INT64",
        ),
        "overflowing_fp64": (
            Model(lambda x: x * 1e300, inputs=INT_IN, outputs=[TensorSpec("y", "FP32", [-1])]),
            "output 'y' holds 1e+300, out of range for FP32",
        ),
        "int64_minimum_for_fp16": (  # its absolute value is no int64: the range check must not wrap
            Model(
                lambda x: np.full(x.shape, -(2**63), dtype=np.int64),
                inputs=INT_IN,
                outputs=[TensorSpec("y", "FP16", [-1])],
            ),
            "output 'y' holds -9223372036854775808, out of range for FP16",
        ),
        "list_for_two_outputs": (
            Model(lambda x: [x, x], inputs=INT_IN, outputs=two_outputs),
            "returned a single list but declares 2 outputs; return a mapping",
        ),
        "missing_output": (
            Model(lambda x: {"y": x}, inputs=INT_IN, outputs=two_outputs),
            "did not return its declared output 'z'",
        ),
        "ints_for_bytes": (
            Model(lambda x: x, inputs=INT_IN, outputs=[TensorSpec("y", "BYTES", [-1])]),
            "output 'y' is BYTES but element 0 is int",
        ),
        "complex": (lambda x: x.astype(np.complex64), "dtype complex64, which no protocol datatype carries"),
        "not_an_array": (
            Model(answers_with(NoArray()), inputs=INT_IN, outputs=INT_OUT),
            "output 'y' is not an array: RuntimeError: Can't call numpy() on Tensor that requires grad",
        ),
        "int_key": (lambda x: {1: x}, "returned an output keyed 1; output names are strings"),
        # onnxruntime's session.run returns a list of its outputs, without their names.
        "session_run": (
            lambda x: [x, x * 2],
            "returned a list of 2 arrays; return a mapping of output name to array (or declare its outputs)",
        ),
        "bytes_key": (lambda x: {b"y": x}, "returned an output keyed b'y'; output names are strings"),
    }
    models = {name: model for name, (model, _) in faults.items()}
    app = oip_app({**models, "ok": Model(lambda x: x.astype(np.int64), inputs=INT_IN, outputs=INT_OUT)})
    body = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}]}
    async with client(app) as http:
        for name, (_, message) in faults.items():
            response = await http.post(f"/models/{name}/infer", json=body)
            assert response.status_code == 500, name
            assert message in response.json()["error"], name
            assert "Traceback" not in response.text
        # int64 that fits is cast to the declared INT32: the range check refuses only what would wrap.
        response = await http.post("/models/ok/infer", json=body)
        assert response.json()["outputs"] == [{"name": "y", "datatype": "INT32", "shape": [2], "data": [1, 2]}]
    # Each is the model's fault, answered with its reason, and each has a line in the server log: a
    # model that raised with its traceback, one that returned what cannot be sent with the reason.
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    logged = [re.sub(r"error id [0-9a-f]{8}", "error id ID", record.getMessage()) for record in errors]
    assert logged[:2] == [
        "model 'async_raises' (version 1) raised (error id ID)",
        "model 'exits' (version 1) raised (error id ID)",
    ]
    assert all(record.exc_info for record in errors[:2])
    returned = list(faults)[2:]
    assert len(logged) == len(faults) and all(
        line.startswith(f"model '{name}' (version 1) failed (error id ID): ") and faults[name][1] in line
        for name, line in zip(returned, logged[2:], strict=True)
    ), logged


class Gate:
    """Holds a model until released; tells when it entered. Works from worker threads and the loop."""

    def __init__(self) -> None:
        self.entered = 0
        self._release = threading.Event()
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.entered += 1

    def hold_sync(self) -> None:
        self.enter()
        assert self._release.wait(30), "never released"

    async def hold_async(self) -> None:
        self.enter()
        with anyio.fail_after(30):
            while not self._release.is_set():  # no threading.Event.wait on the loop: it would block it
                await anyio.sleep(0.001)

    def release(self) -> None:
        self._release.set()

    async def until_entered(self, count: int) -> None:
        with anyio.fail_after(30):
            while self.entered < count:
                await anyio.sleep(0.001)


def int_body(values: list[int]) -> dict[str, Any]:
    return {"inputs": [{"name": "x", "shape": [len(values)], "datatype": "INT32", "data": values}]}


def int_data(response: httpx.Response) -> list[int]:
    assert response.status_code == 200, response.text
    data: list[int] = response.json()["outputs"][0]["data"]
    return data


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_slow_model_does_not_hold_up_other_models(kind: str) -> None:
    gate = Gate()

    def slow_sync(x: np.ndarray) -> np.ndarray:
        gate.hold_sync()
        return x + 1

    async def slow_async(x: np.ndarray) -> np.ndarray:
        await gate.hold_async()
        return x + 1

    async def fast_async(x: np.ndarray) -> np.ndarray:
        return x * 3

    slow = slow_sync if kind == "sync" else slow_async
    app = oip_app(
        {
            "slow": Model(slow, inputs=INT_IN, outputs=INT_OUT),
            "fast_sync": Model(lambda x: x * 2, inputs=INT_IN, outputs=INT_OUT),
            "fast_async": Model(fast_async, inputs=INT_IN, outputs=INT_OUT),
        }
    )
    slow_answers: list[list[int]] = []
    async with client(app) as http, anyio.create_task_group() as group:

        async def ask_slow(value: int) -> None:
            slow_answers.append(int_data(await http.post("/models/slow/infer", json=int_body([value]))))

        for value in range(4):  # several in flight: a sync model holds several pool threads
            group.start_soon(ask_slow, value)
        await gate.until_entered(4)
        assert int_data(await http.post("/models/fast_sync/infer", json=int_body([1, 2]))) == [2, 4]
        assert int_data(await http.post("/models/fast_async/infer", json=int_body([1, 2]))) == [3, 6]
        assert (await http.get("/health/ready")).status_code == 200
        assert (await http.get("/models/slow")).status_code == 200
        assert slow_answers == []  # the slow requests were all still held while the others were answered
        gate.release()
    assert sorted(slow_answers) == [[1], [2], [3], [4]]


async def test_concurrency_limits_are_per_model_and_hold_for_sync_models_in_threads() -> None:
    gate = Gate()

    def held(x: np.ndarray) -> np.ndarray:
        gate.hold_sync()
        return x

    def flaky(x: np.ndarray) -> np.ndarray:
        raise RuntimeError("out of memory")

    app = oip_app(
        {
            "held": Model(held, inputs=INT_IN, outputs=INT_OUT, max_concurrency=2),
            "other": Model(lambda x: x, inputs=INT_IN, outputs=INT_OUT, max_concurrency=1),
            "flaky": Model(flaky, inputs=INT_IN, outputs=INT_OUT, max_concurrency=1),
        }
    )
    answers: list[list[int]] = []
    async with client(app) as http:
        async with anyio.create_task_group() as group:

            async def ask_held(value: int) -> None:
                answers.append(int_data(await http.post("/models/held/infer", json=int_body([value]))))

            group.start_soon(ask_held, 1)
            group.start_soon(ask_held, 2)
            await gate.until_entered(2)
            # Saturated: the third is turned away at once instead of waiting for a slot.
            response = await http.post("/models/held/infer", json=int_body([3]))
            assert response.status_code == 503
            assert response.json() == {"error": "model 'held' is busy: 2 requests already in flight, retry later"}
            assert gate.entered == 2 and answers == []
            # The limit is this model's alone: another limited model still serves meanwhile.
            assert int_data(await http.post("/models/other/infer", json=int_body([7]))) == [7]
            gate.release()
        assert sorted(answers) == [[1], [2]]
        assert int_data(await http.post("/models/held/infer", json=int_body([4]))) == [4]  # slots came back
        # A request that fails in the model gives its slot back too.
        for _ in range(3):
            response = await http.post("/models/flaky/infer", json=int_body([1]))
            assert response.status_code == 500 and "out of memory" in response.json()["error"]


async def test_a_limit_keeps_a_stuck_sync_model_from_taking_every_worker_thread() -> None:
    # Sync models share anyio's worker threads (40 by default): without a limit, 40 stuck requests
    # would hold them all and every sync model would wait. With one, the excess is turned away.
    threads = int(anyio.to_thread.current_default_thread_limiter().total_tokens)
    gate = Gate()

    def stuck(x: np.ndarray) -> np.ndarray:
        gate.hold_sync()
        return x

    app = oip_app(
        {
            "stuck": Model(stuck, inputs=INT_IN, outputs=INT_OUT, max_concurrency=4),
            "fast": Model(lambda x: x * 2, inputs=INT_IN, outputs=INT_OUT),
        }
    )
    statuses: list[int] = []
    async with client(app) as http, anyio.create_task_group() as group:

        async def ask_stuck() -> None:
            statuses.append((await http.post("/models/stuck/infer", json=int_body([1]))).status_code)

        for _ in range(threads + 5):
            group.start_soon(ask_stuck)
        await gate.until_entered(4)
        with anyio.fail_after(30):
            while len(statuses) < threads + 1:  # all but the 4 admitted come back without waiting
                await anyio.sleep(0.001)
        assert statuses == [503] * (threads + 1) and gate.entered == 4
        assert int_data(await http.post("/models/fast/infer", json=int_body([5]))) == [10]
        gate.release()
    assert sorted(statuses) == [200] * 4 + [503] * (threads + 1)
