"""Real server processes for the integration tests: start one, wait until it answers, always stop it."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.waiting import HANG

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def child_env() -> dict[str, str]:
    """This environment, with the repository and its adapters importable, as the test run has them."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "adapters")])}


@dataclass(frozen=True)
class Server:
    address: str  # "127.0.0.1:<port>", the form tritonclient takes
    port: int
    pid: int
    log: Path  # everything the server wrote, stdout and stderr
    process: subprocess.Popen[bytes]

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except OSError:  # refused, reset, timed out, or an error status (HTTPError is an OSError)
        return False


@contextmanager
def serving(
    argv: list[str],
    port: int,
    *,
    ready_path: str = "/v2/health/ready",
    timeout: float = HANG,
    env: dict[str, str] | None = None,
    stop: signal.Signals = signal.SIGTERM,
    stop_timeout: float = 10,
    cwd: Path = ROOT,
) -> Iterator[Server]:
    """Run `python argv` from `cwd` (the repository root) until the block ends; it must listen on 127.0.0.1:`port`.

    The block starts once `ready_path` answers 200; a server that exits first, or takes longer than
    `timeout` seconds, is a RuntimeError carrying its output. `env` adds to its environment; `stop`
    is the signal that ends it, SIGKILL after `stop_timeout` seconds more.
    """
    with tempfile.TemporaryDirectory(prefix="oip-server-") as directory:
        log = Path(directory, "server.log")
        with log.open("wb") as sink:
            # Its own session, so that a Ctrl-C meant for pytest does not reach it before the cleanup does.
            with _sigint_heard():
                process = subprocess.Popen(
                    [sys.executable, *argv],
                    cwd=cwd,
                    env={**child_env(), **(env or {})},
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        try:
            url = f"http://{HOST}:{port}{ready_path}"
            deadline = time.monotonic() + timeout
            while not _answers(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    problem = f"exited with {process.returncode}" if process.poll() is not None else "still running"
                    output = log.read_text(errors="replace")
                    raise RuntimeError(f"{argv} did not answer {url} within {timeout} s ({problem}):\n{output}")
                time.sleep(0.05)
            yield Server(f"{HOST}:{port}", port, process.pid, log, process)
        finally:
            if process.poll() is None:
                process.send_signal(stop)
            try:
                process.wait(stop_timeout)
            except subprocess.TimeoutExpired:
                # Its whole process group: what it started (a Ray instance's raylet and workers, say) would
                # otherwise outlive it and slow every test after.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


@contextmanager
def _sigint_heard() -> Iterator[None]:
    """A child started in this block hears SIGINT, as a terminal's Ctrl-C finds it, even where this run ignores it.

    A test run started in the background of a non-interactive shell (``pytest &``, nohup) ignores SIGINT, and
    its children inherit that; Python then raises no KeyboardInterrupt, so `serve run` (Ray) stopped by SIGINT
    never stopped (issue 30: "returncode -9 after SIGINT"). A handled signal is reset by exec, an ignored one is
    not: handled here for the moment of the Popen, the child starts with the default.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def uvicorn(app: str, *options: str, ready_path: str = "/v2/health/ready") -> Iterator[Server]:
    """`app` ("module:attribute") served by a real uvicorn on a free port, with uvicorn's `options` added."""
    port = free_port()
    argv = ["-m", "uvicorn", app, "--host", HOST, "--port", str(port), "--log-level", "warning", *options]
    with serving(argv, port, ready_path=ready_path) as server:
        yield server


def triton_round_trip(address: str) -> None:
    """What a Triton user does first, with NVIDIA's own client: health, metadata, binary inference."""
    import numpy as np
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(address)
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert "binary_tensor_data" in client.get_server_metadata()["extensions"]
        assert client.is_model_ready("simple")
        assert client.get_model_metadata("simple")["inputs"][0]["shape"] == [-1, 16]

        a = np.arange(32, dtype=np.int32).reshape(2, 16)
        b = np.full((2, 16), -3, dtype=np.int32)
        inputs = [httpclient.InferInput("INPUT0", [2, 16], "INT32"), httpclient.InferInput("INPUT1", [2, 16], "INT32")]
        inputs[0].set_data_from_numpy(a, binary_data=True)
        inputs[1].set_data_from_numpy(b, binary_data=True)
        outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUTPUT0", "OUTPUT1")]
        result = client.infer("simple", inputs, outputs=outputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)

        text = httpclient.InferInput("TEXT", [2], "BYTES")
        words = ["héllo".encode(), b"oip"]
        text.set_data_from_numpy(np.array(words, dtype=np.object_), binary_data=True)
        result = client.infer("text", [text])
        assert list(result.as_numpy("UPPER")) == [word.upper() for word in words]
        assert list(result.as_numpy("LENGTH")) == [6, 3]
    finally:
        client.close()


def chunked_infer(address: str, request: object) -> tuple[int, bytes]:
    """POST `request` as JSON to simple/infer, chunked, with no Content-Length."""
    body = json.dumps(request).encode()
    host, port = address.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        # An iterable body with no Content-Length goes out as Transfer-Encoding: chunked.
        connection.request("POST", "/v2/models/simple/infer", body=iter([body[:7], body[7:]]), encode_chunked=True)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def int32_inputs(module: Any, **arrays: Any) -> list[Any]:
    """tritonclient's inputs (`module` is tritonclient.http or .grpc) of these INT32 arrays, each under its name."""
    made = []
    for name, array in arrays.items():
        tensor = module.InferInput(name, list(array.shape), "INT32")
        tensor.set_data_from_numpy(array)
        made.append(tensor)
    return made
