"""The statistics extension: tritonclient reads Triton's counts from a real server; no count is ever lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from oip_asgi import Model, TensorSpec, oip_app
from tests.support.client import client
from tests.support.servers import Server, uvicorn

httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with uvicorn("tests.apps.statistics:app") as running:
        yield running


def infer(triton: Any, model: str, rows: int = 1, datatype: str = "FP32", version: str = "") -> Any:
    tensor = httpclient.InferInput("x", [rows], datatype)
    tensor.set_data_from_numpy(np.arange(rows).astype(np.float32 if datatype == "FP32" else np.int32))
    return triton.infer(model, [tensor], model_version=version)


def stats(triton: Any, model: str, version: str = "") -> dict[str, Any]:
    (entry,) = triton.get_inference_statistics(model, version)["model_stats"]
    return entry


def counts(entry: dict[str, Any]) -> dict[str, int]:
    return {stage: value["count"] for stage, value in entry["inference_stats"].items()}


@pytest.mark.slow
def test_tritonclient_reads_triton_counts_after_a_known_sequence(server: Server) -> None:
    triton = httpclient.InferenceServerClient(server.address)
    try:
        zero = stats(triton, "ok")
        assert zero["last_inference"] == 0 and zero["inference_count"] == zero["execution_count"] == 0
        assert set(counts(zero).values()) == {0} and zero["batch_stats"] == []
        before = time.time() * 1000
        for rows in (1, 3, 2):
            infer(triton, "ok", rows)
        with pytest.raises(InferenceServerException, match="expects FP32"):
            infer(triton, "ok", datatype="INT32")  # refused before the model runs: counted nowhere
        for model, status in (("refuses", "400"), ("raises", "500"), ("wrong_output", "500")):
            with pytest.raises(InferenceServerException) as failed:
                infer(triton, model)
            assert failed.value.status() == status

        ok = stats(triton, "ok")
        assert ok["name"] == "ok" and ok["version"] == "1"
        assert before <= ok["last_inference"] <= time.time() * 1000 + 1
        assert ok["inference_count"] == 3 and ok["execution_count"] == 3  # one inference per request, unbatched
        assert counts(ok) == {
            "success": 3, "fail": 0, "queue": 3, "compute_input": 3, "compute_infer": 3, "compute_output": 3,
            "cache_hit": 0, "cache_miss": 0,
        }  # fmt: skip
        assert all(ok["inference_stats"][stage]["ns"] > 0 for stage in ("success", "compute_input", "compute_infer"))
        assert [(batch["batch_size"], batch["compute_infer"]["count"]) for batch in ok["batch_stats"]] == [(1, 3)]
        for model in ("refuses", "raises", "wrong_output"):  # each failure once, with its time; the call counted
            failed = stats(triton, model)
            assert counts(failed)["fail"] == 1 and failed["inference_stats"]["fail"]["ns"] > 0, model
            assert counts(failed)["success"] == 0 and failed["inference_count"] == 0, model
            assert failed["execution_count"] == 1 and failed["last_inference"] > 0, model

        every = triton.get_inference_statistics()["model_stats"]
        assert [(entry["name"], entry["version"]) for entry in every] == [
            ("ok", "1"), ("refuses", "1"), ("raises", "1"), ("wrong_output", "1"), ("batched", "1"), ("batched", "2"),
        ]  # fmt: skip
        with pytest.raises(InferenceServerException, match="Request for unknown model: 'nope' is not found") as unknown:
            triton.get_inference_statistics("nope")
        assert unknown.value.status() == "404"
        with pytest.raises(InferenceServerException, match="version '7' is not found"):
            triton.get_inference_statistics("batched", "7")
    finally:
        triton.close()


@pytest.mark.slow
def test_batch_statistics_count_rows_as_inferences_and_calls_as_executions(server: Server) -> None:
    aio = pytest.importorskip("tritonclient.http.aio")

    async def main() -> None:
        triton = aio.InferenceServerClient(server.address)
        try:

            async def one(rows: int) -> None:
                tensor = aio.InferInput("x", [rows], "FP32")
                tensor.set_data_from_numpy(np.ones(rows, dtype=np.float32))
                await triton.infer("batched", [tensor], model_version="1")

            await asyncio.gather(*(one(rows) for rows in (1, 2, 1, 4)))  # 8 rows: one full batch, at once
        finally:
            await triton.close()

    asyncio.run(main())
    triton = httpclient.InferenceServerClient(server.address)
    try:
        batched = stats(triton, "batched", "1")
        assert batched["inference_count"] == 8 and batched["execution_count"] == 1
        assert counts(batched)["success"] == 4 and counts(batched)["queue"] == 4
        (batch,) = batched["batch_stats"]
        assert batch["batch_size"] == 8 and batch["compute_infer"]["count"] == 1
        assert batch["compute_input"]["count"] == batch["compute_output"]["count"] == 1
        assert stats(triton, "batched", "2")["execution_count"] == 0  # versions are counted apart
    finally:
        triton.close()


@pytest.mark.anyio
async def test_concurrent_requests_lose_no_count() -> None:
    specs: dict[str, Any] = {"inputs": [TensorSpec("x", "INT32", [-1])], "outputs": [TensorSpec("y", "INT32", [-1])]}

    def sometimes(x: np.ndarray) -> np.ndarray:
        if x[0] % 3 == 0:
            raise ValueError("every third")
        return x

    async def slow(x: np.ndarray) -> np.ndarray:
        await asyncio.sleep(0)
        return x

    app = oip_app({"sync": Model(sometimes, **specs), "async": Model(slow, **specs)}, max_threads=8)
    async with client(app) as http:

        async def one(model: str, value: int) -> int:
            body = {"inputs": [{"name": "x", "shape": [1], "datatype": "INT32", "data": [value]}]}
            return (await http.post(f"/models/{model}/infer", json=body)).status_code

        statuses = await asyncio.gather(*(one(model, value) for value in range(300) for model in ("sync", "async")))
        assert statuses.count(500) == 100
        entries = {entry["name"]: entry for entry in (await http.get("/models/stats")).json()["model_stats"]}
    assert counts(entries["sync"])["success"] == 200 and counts(entries["sync"])["fail"] == 100
    assert entries["sync"]["execution_count"] == 300 and entries["sync"]["inference_count"] == 200
    assert counts(entries["async"])["success"] == 300 and entries["async"]["execution_count"] == 300
