"""The server core's lifecycle: models put and removed while serving, in-flight requests finishing
on the version they started on, and the faults the core fixes for every wire."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import numpy as np
import pytest

from oip_asgi import Model, ModelNotReady, NotFound, TensorSpec, oip_app
from oip_asgi._core.server import ServerCore
from tests.support.client import client
from tests.support.waiting import until

SPECS: dict[str, Any] = {"inputs": [TensorSpec("x", "INT32", [-1])], "outputs": [TensorSpec("y", "INT32", [-1])]}
pytestmark = pytest.mark.anyio

BODY = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}]}


def adding(amount: int, version: str = "1", **options: Any) -> Model:
    return Model(lambda x: x + amount, **SPECS, version=version, **options)


async def test_a_model_put_while_serving_serves_once_loaded_and_old_requests_finish_on_the_old() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(x: np.ndarray) -> np.ndarray:
        entered.set()
        await release.wait()
        return x + 1

    app = oip_app({"m": Model(held, **SPECS)})
    loads: list[str] = []
    async with client(app) as http:
        in_flight = asyncio.ensure_future(http.post("/models/m/infer", json=BODY))
        await entered.wait()
        replacing = asyncio.ensure_future(app.core.put_model("m", adding(100, load=lambda: loads.append("new"))))
        await asyncio.sleep(0)
        assert not replacing.done()  # waits for the request that holds the old version
        release.set()
        assert (await in_flight).json()["outputs"][0]["data"] == [2, 3]  # finished on the version it started on
        await replacing
        assert loads == ["new"]
        response = await http.post("/models/m/infer", json=BODY)
        assert response.json()["outputs"][0]["data"] == [101, 102]


async def test_a_failed_load_leaves_the_model_serving_as_it_was() -> None:
    app = oip_app({"m": adding(1)})

    def broken() -> None:
        raise RuntimeError("weights missing")

    with pytest.raises(ModelNotReady, match="model 'm' version 2 failed to load: RuntimeError: weights missing"):
        await app.core.put_model("m", [adding(1), adding(50, version="2", load=broken)])
    async with client(app) as http:
        response = await http.post("/models/m/infer", json=BODY)
        assert response.json()["model_version"] == "1" and response.json()["outputs"][0]["data"] == [2, 3]
        assert (await http.get("/models/m")).json()["versions"] == ["1"]


async def test_a_removed_model_lets_requests_in_flight_finish_and_refuses_new_ones() -> None:
    gate = threading.Event()

    def slow(x: np.ndarray) -> np.ndarray:
        gate.wait(10)
        return x

    app = oip_app({"m": Model(slow, **SPECS), "other": adding(1)})
    async with client(app) as http:
        in_flight = asyncio.ensure_future(http.post("/models/m/infer", json=BODY))
        model = await app.core.model("m")
        await until(lambda: model.in_flight == 1)  # the request reached the model
        removing = asyncio.ensure_future(app.core.remove_model("m"))
        await until(lambda: model.state == "UNLOADING")
        refused = await http.post("/models/m/infer", json=BODY)
        assert refused.status_code == 404
        assert refused.json()["error"] == "Request for unknown model: 'm' is not found; the models are other"
        gate.set()
        assert (await in_flight).status_code == 200
        await removing
        assert (model.state, model.reason) == ("UNAVAILABLE", "unloaded")
    with pytest.raises(NotFound, match="Request for unknown model: 'gone'"):
        await app.core.remove_model("gone")


async def test_a_reload_under_load_fails_no_request_and_never_mixes_versions() -> None:
    app = oip_app({"m": adding(1)})
    answers: list[tuple[int, str, list[int]]] = []
    stop = asyncio.Event()

    async def keep_asking(http: Any) -> None:
        while not stop.is_set():
            response = await http.post("/models/m/infer", json=BODY)
            body = response.json()
            answers.append((response.status_code, body.get("model_version", ""), body["outputs"][0]["data"]))

    async with client(app) as http:
        clients = [asyncio.ensure_future(keep_asking(http)) for _ in range(8)]
        for amount in range(2, 12):
            await until(lambda amount=amount: len(answers) >= 20 * amount)  # requests across every reload
            await app.core.put_model("m", adding(amount, version=str(amount)))
        stop.set()
        await asyncio.gather(*clients)
    assert {status for status, _, _ in answers} == {200}
    # Every answer is one version's, whole: version v adds v (version 1 adds 1).
    assert all(data == [1 + int(version), 2 + int(version)] for _, version, data in answers)
    assert {version for _, version, _ in answers} >= {"1", "11"}


async def test_models_of_different_names_change_in_parallel_and_one_name_one_change_at_a_time() -> None:
    core = ServerCore({"a": adding(1), "b": adding(1)})
    started: list[str] = []
    release = asyncio.Event()

    async def slow_load(name: str) -> None:
        started.append(name)
        await release.wait()

    changes = [
        asyncio.ensure_future(core.put_model("a", adding(2, load=lambda: slow_load("a1")))),
        asyncio.ensure_future(core.put_model("a", adding(3, load=lambda: slow_load("a2")))),
        asyncio.ensure_future(core.put_model("b", adding(2, load=lambda: slow_load("b1")))),
    ]
    await until(lambda: len(started) == 2)
    assert sorted(started) == ["a1", "b1"]  # b loads beside a; a's second change waits for its first
    release.set()
    await asyncio.gather(*changes)
    assert started[-1] == "a2"


def test_version_strings_sort_without_crashing_on_unicode_digits() -> None:
    app = oip_app({"m": [adding(1, version="²"), adding(2, version="10"), adding(3, version="9")]})
    assert app.core.served.versions("m") == ["²", "9", "10"]  # named versions first, integers in order


def _input_parameters_model() -> Model:
    def predict(text: np.ndarray, input_parameters: dict[str, dict[str, Any]]) -> dict[str, np.ndarray]:
        own = input_parameters["text"]
        return {"seen": np.array([f"{key}={own[key]}".encode() for key in sorted(own)], dtype=object)}

    return Model(predict, inputs=[TensorSpec("text", "BYTES", [-1])], outputs=[TensorSpec("seen", "BYTES", [-1])])


async def test_each_inputs_parameters_reach_a_model_that_asks_for_them_over_rest() -> None:
    app = oip_app({"m": _input_parameters_model()})
    own = {"content_type": "str", "count": 2}
    body = {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["hi"], "parameters": own}]}
    # The same as a binary tensor: binary_data_size is the protocol's own, not the model's.
    binary = {"inputs": [{**body["inputs"][0], "parameters": {**own, "binary_data_size": 6}}]}
    del binary["inputs"][0]["data"]
    header = json.dumps(binary).encode()
    async with client(app) as http:
        response = await http.post("/models/m/infer", json=body)
        assert response.json()["outputs"][0]["data"] == ["content_type=str", "count=2"]
        response = await http.post(
            "/models/m/infer",
            content=header + b"\x02\x00\x00\x00hi",
            headers={"inference-header-content-length": str(len(header))},
        )
        assert response.json()["outputs"][0]["data"] == ["content_type=str", "count=2"]
        del body["inputs"][0]["parameters"]
        assert (await http.post("/models/m/infer", json=body)).json()["outputs"][0]["data"] == []


def test_each_inputs_parameters_reach_a_model_that_asks_for_them_over_grpc() -> None:
    grpc = pytest.importorskip("grpc")
    from oip_asgi.grpc import inference_pb2 as pb
    from oip_asgi.grpc import inference_pb2_grpc
    from tests.support.grpc import grpc_server, request

    message = request("m", ("text", "BYTES", np.array([b"hi"], dtype=object)))
    message.inputs[0].parameters["content_type"].string_param = "str"
    message.inputs[0].parameters["count"].int64_param = 2
    with grpc_server(oip_app({"m": _input_parameters_model()})) as address, grpc.insecure_channel(address) as channel:
        response = inference_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(message)
    assert isinstance(response, pb.ModelInferResponse)
    seen = response.raw_output_contents[0]
    assert seen == b"".join(len(item).to_bytes(4, "little") + item for item in (b"content_type=str", b"count=2"))
