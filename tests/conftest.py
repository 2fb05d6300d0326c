from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before answering {url}")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server did not answer {url} within {timeout} s")


@contextmanager
def running(
    command: list[str], port: int, ready_path: str = "/v2/health/live", output: IO[bytes] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server process on 127.0.0.1:`port` until the block ends, stopped by its PID."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "adapters")])}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=output, stderr=output and subprocess.STDOUT, start_new_session=True
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}{ready_path}", process)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def serve(command: list[str], port: int, ready_path: str = "/v2/health/live") -> Iterator[str]:
    """Run a server process on 127.0.0.1:`port` until the block ends; yields "127.0.0.1:port"."""
    with running(command, port, ready_path):
        yield f"127.0.0.1:{port}"


@contextmanager
def uvicorn_server(app: str) -> Iterator[str]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    with serve(command, port) as address:
        yield address


@pytest.fixture(scope="session")
def example_server() -> Iterator[str]:
    """The README's example app (examples.app:app) in a real uvicorn process."""
    with uvicorn_server("examples.app:app") as address:
        yield address
