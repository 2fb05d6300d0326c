"""perf_analyzer, Triton's own benchmark tool, runs against a real server over HTTP and gRPC.

The binary comes from bench/perf_analyzer.py's set-up (tritonclient 2.50's manylinux wheel, CUDA's
runtime library from its wheel, and Debian's libb64, which only apt installs): without it, these skip
and the bench is where perf_analyzer runs.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.servers import HOST, ROOT, free_port, serving

HOME = ROOT / "bench" / ".peers" / "perf_analyzer"
BINARY = HOME / "bin" / "perf_analyzer"
ENVIRONMENT = {
    **os.environ,
    "LD_LIBRARY_PATH": os.pathsep.join([str(HOME / "lib"), os.environ.get("LD_LIBRARY_PATH", "")]),
}
# Short windows, and any variation between them taken as stable: this checks that it runs, not how fast.
QUICK = ("-p", "400", "-s", "1000", "-r", "3", "--concurrency-range", "1")


def missing(binary: Path) -> str | None:
    if not binary.exists():
        return "perf_analyzer is not set up: run python3 bench/perf_analyzer.py --setup-only"
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=ENVIRONMENT, check=False)
    libraries = [line.split()[0] for line in done.stdout.splitlines() if "not found" in line]
    if libraries:
        return f"perf_analyzer cannot start, {', '.join(libraries)} missing: apt-get install libb64-0d (as root)"
    return None


reason = missing(BINARY)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(reason is not None, reason=reason or "")]
pytest.importorskip("oip_asgi.grpc")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    """The example models through `oip-asgi serve --grpc-port`: the REST and gRPC addresses."""
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "examples.models:models", "--port", str(port), "--grpc-port", str(grpc_port)]
    with serving(argv, port) as server:
        yield server.address, f"{HOST}:{grpc_port}"


def inference_count(address: str, model: str) -> int:
    (entry,) = httpx.get(f"http://{address}/v2/models/{model}/stats").json()["model_stats"]
    return int(entry["inference_count"])


@pytest.mark.parametrize(
    ("model", "protocol", "options", "batch"),
    [
        ("simple", "http", ["--shape", "INPUT0:1,16", "--shape", "INPUT1:1,16", "--input-tensor-format", "json"], 1),
        ("batched", "grpc", ["-b", "8"], 8),
        ("text", "http", ["--string-data", "hello", "--shape", "TEXT:8"], 1),
        ("text", "grpc", ["--string-data", "hello", "--shape", "TEXT:8"], 1),
    ],
    ids=["simple-http-json", "batched-grpc-b8", "text-http-binary", "text-grpc"],
)
def test_perf_analyzer_measures_the_model(
    served: tuple[str, str], model: str, protocol: str, options: list[str], batch: int
) -> None:
    rest, grpc_address = served
    before = inference_count(rest, model)
    address = grpc_address if protocol == "grpc" else rest
    command = [str(BINARY), "-m", model, "-u", address, "-i", protocol, *options, *QUICK]
    done = subprocess.run(command, capture_output=True, text=True, env=ENVIRONMENT, timeout=60, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # It read the metadata and config (it would have stopped), and the statistics, which it prints per window.
    assert f"Batch size: {batch}" in output and "Server: " in output, output
    (requests,) = map(int, re.findall(r"Client: \n\s+Request count: (\d+)", output))
    (served_inferences,) = map(int, re.findall(r"Server: \n\s+Inference count: (\d+)", output))
    assert requests > 0 and served_inferences >= requests * batch
    # Every request of the run reached the model, in this server's own counts too.
    assert inference_count(rest, model) - before >= requests * batch


def test_perf_analyzer_measures_a_model_file_with_no_shape_option(tmp_path: Path) -> None:
    """A tabular file's first dimension is Triton's batch dimension: perf_analyzer needs no --shape (issue 30)."""
    skops_io = pytest.importorskip("skops.io")
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    skops_io.dump(LogisticRegression(max_iter=1000).fit(*load_iris(return_X_y=True)), tmp_path / "iris.skops")
    port = free_port()
    with serving(["-m", "oip_asgi", "serve", str(tmp_path / "iris.skops"), "--port", str(port)], port) as server:
        command = [str(BINARY), "-m", "iris", "-u", server.address, "-i", "http", *QUICK]
        done = subprocess.run(command, capture_output=True, text=True, env=ENVIRONMENT, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert inference_count(server.address, "iris") > 0
