"""KServe's InferenceGRPCClient against the REST+gRPC example, from an environment that has kserve.

The `kserve` package is not in the test extra: it pins protobuf below 7 (the test environment runs 7,
which tritonclient's current generated code needs) and brings pandas, kubernetes and a web stack.
The benchmark harness installs it in bench/.peers/kserve/ (`python3 bench/grpc_bench.py` makes it);
this test runs the client there, or in the interpreter OIP_KSERVE_PYTHON names, and skips without one.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import HOST, ROOT, free_port, serving

pytest.importorskip("oip_asgi.grpc")
PYTHON = Path(os.environ.get("OIP_KSERVE_PYTHON", ROOT / "bench" / ".peers" / "kserve" / "bin" / "python"))

CLIENT = r"""
import asyncio, json, sys
import numpy as np
import grpc
from kserve import InferInput, InferRequest
from kserve.inference_client import InferenceGRPCClient

async def main(address):
    seen = {}
    async with InferenceGRPCClient(address) as client:
        seen["live"] = await client.is_server_live()
        seen["ready"] = await client.is_server_ready()
        seen["model_ready"] = await client.is_model_ready("simple")
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        inputs = [InferInput("INPUT0", [1, 16], "INT32"), InferInput("INPUT1", [1, 16], "INT32")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a, binary_data=True)   # raw_input_contents
        response = await client.infer(InferRequest("simple", inputs, request_id="k1"))
        seen["id"] = response.id
        seen["sum"] = response.outputs[0].as_numpy().tolist() == (a + a).tolist()
        typed = InferInput("INPUT0", [3], "FP64")
        typed.set_data_from_numpy(np.array([0.5, -1.0, 2.0]), binary_data=False)   # typed fp64_contents
        response = await client.infer(InferRequest("identity_fp64", [typed]))
        seen["typed"] = response.outputs[0].as_numpy().tolist()
        words = InferInput("TEXT", [2], "BYTES")
        words.set_data_from_numpy(np.array([b"ab", b"c"], dtype=object), binary_data=False)
        response = await client.infer(InferRequest("text", [words]))
        upper = response.outputs[0].as_numpy().tolist()
        seen["upper"] = [item.decode() if isinstance(item, bytes) else item for item in upper]
        try:
            await client.infer(InferRequest("missing", [typed]))
        except grpc.RpcError as error:
            seen["missing"] = [error.code().name, error.details()]
    print(json.dumps(seen))

asyncio.run(main(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def grpc_address() -> Iterator[str]:
    if not PYTHON.exists():
        pytest.skip(f"no interpreter with kserve at {PYTHON} (see this module's docstring)")
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "uvicorn", "examples.grpc_app:app", "--host", HOST, "--port", str(port), "--log-level", "warning"]
    with serving(argv, port, env={"OIP_GRPC_ADDRESS": f"{HOST}:{grpc_port}"}):
        yield f"{HOST}:{grpc_port}"


@pytest.mark.slow
def test_kserve_inference_grpc_client(grpc_address: str) -> None:
    done = subprocess.run([str(PYTHON), "-c", CLIENT, grpc_address], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["live"] and seen["ready"] and seen["model_ready"]
    assert seen["id"] == "k1" and seen["sum"]
    assert seen["typed"] == [0.5, -1.0, 2.0]
    assert seen["upper"] == ["AB", "C"]
    assert (
        seen["missing"][0] == "NOT_FOUND" and "Request for unknown model: 'missing' is not found" in seen["missing"][1]
    )
