"""An ensemble over gRPC, in process, against the same requests over REST: its answer, a step's failure, a
step's refusal, a malformed request and an ensemble that cannot serve each answer alike on both wires
(the status and its gRPC code, the same message), and the server goes on (`_core/ensemble.py`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")

from oip_asgi import BadRequest, Model, ModelRepository, TensorSpec, oip_app  # noqa: E402
from oip_asgi.grpc import inference_pb2 as pb  # noqa: E402
from oip_asgi.grpc import inference_pb2_grpc  # noqa: E402
from tests.declarations.test_ensemble_config import CHAIN, ensemble_config, write_ensemble  # noqa: E402
from tests.support.client import client  # noqa: E402
from tests.support.grpc import grpc_server, output_array, request  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

I32 = [-1]


def add(x: np.ndarray) -> np.ndarray:
    return x + 1


def double(a: np.ndarray) -> dict[str, np.ndarray]:
    if (a > 1000).any():
        raise ValueError("the weights are corrupt")
    if (a > 100).any():
        raise BadRequest("values above 100 are refused")
    return {"b": a * 2}


MODELS = {
    "add": Model(add, inputs=[TensorSpec("x", "INT32", I32)], outputs=[TensorSpec("y", "INT32", I32)]),
    "double": Model(double, inputs=[TensorSpec("a", "INT32", I32)], outputs=[TensorSpec("b", "INT32", I32)]),
}
BROKEN = [("add", {"x": "IN"}, {"y": "mid"}), ("nope", {"a": "mid"}, {"b": "OUT"})]

# model, the input's (datatype, values): REST status, gRPC code, and the message (None: answered, OUT given)
CASES: dict[str, tuple[str, str, list[Any], int, str, str | list[int]]] = {
    "answered": ("pipe", "INT32", [1, 2], 200, "OK", [4, 6]),
    "a step that fails": (
        "pipe", "INT32", [5000], 500, "INTERNAL",
        "in ensemble 'pipe', model 'double' raised ValueError: the weights are corrupt",
    ),
    "a step that refuses": (
        "pipe", "INT32", [500], 400, "INVALID_ARGUMENT",
        "in ensemble 'pipe', model 'double': values above 100 are refused",
    ),
    "a malformed request": (
        "pipe", "FP32", [1.0], 400, "INVALID_ARGUMENT",
        "input 'IN' has datatype FP32, model 'pipe' expects INT32",
    ),
    "an ensemble that cannot serve": (
        "broken", "INT32", [1], 503, "UNAVAILABLE",
        "model 'broken' failed to load; it is UNAVAILABLE: "
        "ensemble broken contains models that are not available or ambiguous: nope",
    ),
}  # fmt: skip


@pytest.fixture
def app(tmp_path: Path) -> Any:
    write_ensemble(tmp_path, "pipe", ensemble_config("pipe", CHAIN))
    write_ensemble(tmp_path, "broken", ensemble_config("broken", BROKEN))
    return oip_app(dict(MODELS), model_repository=ModelRepository(tmp_path), strict_readiness=False)


@pytest.mark.anyio
async def test_each_case_answers_over_rest_as_the_table_says(app: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    async with client(app) as http:
        await app.load()
        for name, (model, datatype, data, status, _, said) in CASES.items():
            tensor = {"name": "IN", "shape": [len(data)], "datatype": datatype, "data": data}
            response = await http.post(f"/models/{model}/infer", json={"inputs": [tensor]})
            assert response.status_code == status, (name, response.text)
            if isinstance(said, list):
                assert response.json()["outputs"][0]["data"] == said, name
            else:
                assert response.json()["error"] == said, name
    # A step's failure is logged, naming the model that raised.
    assert any("double" in record.getMessage() and record.exc_info for record in caplog.records), caplog.text


def test_each_case_answers_over_grpc_as_the_table_says(app: Any) -> None:
    with grpc_server(app) as address, grpc.insecure_channel(address) as channel:
        stub = inference_pb2_grpc.GRPCInferenceServiceStub(channel)
        wait_until(lambda: stub.ModelReady(pb.ModelReadyRequest(name="pipe")).ready, "the ensemble is ready")
        for name, (model, datatype, data, _, code, said) in CASES.items():
            array = np.array(data, np.int32 if datatype == "INT32" else np.float32)
            message = request(model, ("IN", datatype, array))
            if isinstance(said, list):
                response = stub.ModelInfer(message, timeout=30)
                assert output_array(response, "OUT", np.int32).tolist() == said, name
                continue
            with pytest.raises(grpc.RpcError) as raised:
                stub.ModelInfer(message, timeout=30)
            assert raised.value.code() == getattr(grpc.StatusCode, code), name
            assert raised.value.details() == said, name
