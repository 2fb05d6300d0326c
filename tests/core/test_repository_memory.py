"""Unloading frees: a real `oip-asgi serve` process loads and unloads a repository model holding 200 MB
of weights in its model.py's globals, 20 times, and its resident memory stays where the first load left it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx
import pytest

from tests.support.servers import free_port, serving

pytestmark = pytest.mark.slow

WEIGHTS_MB = 200
CYCLES = 20
ALLOWED_GROWTH_MB = 50

_BIG = f"""
import numpy as np
from oip_asgi import Model, TensorSpec

WEIGHTS = np.full({WEIGHTS_MB} * 2**20 // 8, 1.0)  # {WEIGHTS_MB} MB, every page touched


def predict(x):
    return x + int(WEIGHTS[0])


model = Model(predict, inputs=[TensorSpec("x", "INT32", [-1])], outputs=[TensorSpec("y", "INT32", [-1])])
"""


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024  # kB
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads resident memory from /proc")
def test_loading_and_unloading_a_200_mb_model_20_times_leaves_the_memory_as_after_the_first_load(
    tmp_path: Path,
) -> None:
    (tmp_path / "big" / "1").mkdir(parents=True)
    (tmp_path / "big" / "1" / "model.py").write_text(textwrap.dedent(_BIG))
    port = free_port()
    argv = ["-m", "oip_asgi", "serve", "--model-repository", str(tmp_path), "--model-control-mode", "explicit",
            "--port", str(port)]  # fmt: skip
    body = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}]}
    with serving(argv, port) as server, httpx.Client(base_url=f"http://{server.address}/v2", timeout=60) as http:

        def load_and_infer() -> None:
            assert http.post("/repository/models/big/load").status_code == 200
            response = http.post("/models/big/infer", json=body)
            assert response.status_code == 200 and response.json()["outputs"][0]["data"] == [2, 3]

        load_and_infer()
        after_first_load = resident_mb(server.pid)
        assert after_first_load > WEIGHTS_MB  # the weights are in memory
        for _ in range(CYCLES):
            assert http.post("/repository/models/big/unload").status_code == 200
            load_and_infer()
        growth = resident_mb(server.pid) - after_first_load
        assert growth < ALLOWED_GROWTH_MB, f"{growth:.0f} MB more after {CYCLES} loads and unloads"
        assert http.post("/repository/models/big/unload").status_code == 200
        assert resident_mb(server.pid) < after_first_load - WEIGHTS_MB + ALLOWED_GROWTH_MB  # the unload freed them
