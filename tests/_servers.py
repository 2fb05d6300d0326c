"""Real server processes for the integration tests: start, wait until ready, always stop."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (OSError, urllib.error.HTTPError):
        return False


@contextmanager
def serving(argv: list[str], port: int, *, ready_path: str = "/v2/health/ready", timeout: float = 30) -> Iterator[str]:
    """Run `argv` (which must listen on `port`) from the repository root; yield "127.0.0.1:port"."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "adapters")])}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while not _ready(f"http://{HOST}:{port}{ready_path}"):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    output = log.read().decode(errors="replace")
                    raise RuntimeError(f"{argv} did not become ready (exit code {process.poll()}):\n{output}")
                time.sleep(0.1)
            yield f"{HOST}:{port}"
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
