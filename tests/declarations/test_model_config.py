"""Triton's model configuration extension: tritonclient reads every kind of model's config on both wires."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from oip_asgi import Model, TensorSpec, oip_app
from tests.support.client import client
from tests.support.servers import HOST, free_port, serving

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
pytest.importorskip("oip_asgi.grpc")
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from tritonclient.grpc import model_config_pb2  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.anyio

CPU = "KIND_CPU"


def tensor(name: str, data_type: str, dims: list[int], **flags: Any) -> dict[str, Any]:
    return {"name": name, "data_type": data_type, "dims": dims, **flags}


def config(
    name: str, *, versions: Any = None, max_batch_size: int = 0, count: int = 1, **fields: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "platform": fields.pop("platform", "python"),
        "backend": fields.pop("backend", "python"),
        "version_policy": versions or {"specific": {"versions": [1]}},
        "max_batch_size": max_batch_size,
        "input": fields.pop("input", []),
        "output": fields.pop("output", []),
        "instance_group": [{"name": f"{name}_0", "kind": CPU, "count": count}],
        **fields,
    }


# What tests/apps/config.py's models answer, model (and version) by model.
EXPECTED = {
    ("bare", ""): config("bare"),
    ("declared", ""): config(
        "declared",
        platform="onnxruntime_onnx",
        backend="onnxruntime",
        input=[tensor("INPUT0", "TYPE_INT32", [-1, 16]), tensor("INPUT1", "TYPE_INT32", [-1, 16])],
        output=[tensor("OUTPUT0", "TYPE_INT32", [-1, 16]), tensor("OUTPUT1", "TYPE_INT32", [-1, 16])],
        count=3,
        parameters={"task": {"string_value": "arithmetic"}, "author": {"string_value": "tests"}},
    ),
    ("batching", ""): config(
        "batching",
        max_batch_size=8,
        input=[tensor("X", "TYPE_FP32", [4])],
        output=[tensor("Y", "TYPE_FP32", [4]), tensor("ROWS", "TYPE_INT32", [])],  # one value per row
        dynamic_batching={"max_queue_delay_microseconds": 2500},
    ),
    ("labelled", ""): config(
        "labelled",
        input=[tensor("X", "TYPE_FP64", [-1, 4])],
        output=[
            tensor("SCORES", "TYPE_FP64", [-1, 3], label_filename="SCORES_labels.txt"),
            tensor("TOTAL", "TYPE_FP64", [-1]),
        ],
    ),
    ("versioned", "1"): config(
        "versioned",
        versions={"specific": {"versions": [1, 10]}},
        input=[tensor("X", "TYPE_FP32", [-1])],
        output=[tensor("Y", "TYPE_FP32", [-1])],
    ),
    ("versioned", ""): config(
        "versioned",
        versions={"specific": {"versions": [1, 10]}},
        input=[tensor("X", "TYPE_FP64", [-1, 2])],
        output=[tensor("Y", "TYPE_FP64", [-1, 2])],
    ),  # the newest version: 10, after 1 (numerically, as Triton orders them)
    ("named_versions", "canary"): config("named_versions", versions={"all": {}}),
    ("text", ""): config(
        "text", input=[tensor("TEXT", "TYPE_STRING", [-1])], output=[tensor("UPPER", "TYPE_STRING", [-1])]
    ),
    ("optional", ""): config(
        "optional",
        input=[tensor("X", "TYPE_FP32", [-1]), tensor("SHIFT", "TYPE_FP32", [-1], optional=True)],
        output=[tensor("Y", "TYPE_FP32", [-1])],
    ),
}
IDS = [f"{name}@{version}" if version else name for name, version in EXPECTED]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    """tests/apps/config.py through `oip-asgi serve --grpc-port`: its REST and its gRPC addresses."""
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "tests.apps.config:models", "--port", str(port), "--grpc-port", str(grpc_port)]
    with serving(argv, port) as server:
        yield server.address, f"{HOST}:{grpc_port}"


@pytest.fixture(scope="module")
def rest(served: tuple[str, str]) -> Iterator[Any]:
    triton = httpclient.InferenceServerClient(served[0])
    yield triton
    triton.close()


@pytest.fixture(scope="module")
def grpc_triton(served: tuple[str, str]) -> Iterator[Any]:
    triton = grpcclient.InferenceServerClient(served[1])
    yield triton
    triton.close()


@pytest.mark.slow
@pytest.mark.parametrize(("name", "version"), EXPECTED, ids=IDS)
def test_tritonclient_http_reads_the_config(rest: Any, name: str, version: str) -> None:
    assert rest.get_model_config(name, version) == EXPECTED[name, version]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "version"), EXPECTED, ids=IDS)
def test_tritonclient_grpc_reads_the_same_config_in_tritons_own_messages(
    grpc_triton: Any, name: str, version: str
) -> None:
    # Parsed by tritonclient's model_config_pb2: every field name and enum value is Triton's.
    expected = json_format.ParseDict(EXPECTED[name, version], model_config_pb2.ModelConfig())
    assert grpc_triton.get_model_config(name, version).config == expected


@pytest.mark.slow
def test_tritonclient_grpc_as_json_writes_proto_field_names(grpc_triton: Any) -> None:
    batching = grpc_triton.get_model_config("batching", as_json=True)["config"]
    assert batching["max_batch_size"] == 8
    assert batching["input"] == [{"name": "X", "data_type": "TYPE_FP32", "dims": ["4"]}]  # int64 as JSON strings
    assert batching["dynamic_batching"] == {"max_queue_delay_microseconds": "2500"}
    assert batching["instance_group"] == [{"name": "batching_0", "kind": CPU, "count": 1}]
    text = grpc_triton.get_model_config("text", as_json=True)["config"]
    assert text["input"][0]["data_type"] == "TYPE_STRING"
    assert "max_batch_size" not in text  # proto3 JSON leaves zeros out, as Triton's gRPC does


@pytest.mark.slow
def test_both_wires_list_the_extension(rest: Any, grpc_triton: Any) -> None:
    assert "model_configuration" in rest.get_server_metadata()["extensions"]
    assert "model_configuration" in grpc_triton.get_server_metadata().extensions


@pytest.mark.slow
def test_unknown_models_and_versions_are_not_found_on_both_wires(rest: Any, grpc_triton: Any) -> None:
    with pytest.raises(InferenceServerException, match="unknown model: 'nope' is not found") as failed:
        rest.get_model_config("nope")
    assert failed.value.status() == "404"
    with pytest.raises(InferenceServerException, match="unknown model: 'versioned' version '3' is not found") as failed:
        rest.get_model_config("versioned", "3")
    assert failed.value.status() == "404"
    with pytest.raises(InferenceServerException, match="unknown model: 'nope' is not found") as failed:
        grpc_triton.get_model_config("nope")
    assert failed.value.status() == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException, match="unknown model: 'versioned' version '3' is not found") as failed:
        grpc_triton.get_model_config("versioned", "3")
    assert failed.value.status() == "StatusCode.NOT_FOUND"


@pytest.mark.slow
def test_the_repository_extensions_rpcs_are_declared_but_unimplemented(grpc_triton: Any) -> None:
    for call in (
        grpc_triton.get_model_repository_index,
        lambda: grpc_triton.load_model("bare"),
        lambda: grpc_triton.unload_model("bare"),
    ):
        with pytest.raises(InferenceServerException) as failed:
            call()
        assert failed.value.status() == str(grpc.StatusCode.UNIMPLEMENTED)


async def test_rest_paths_methods_and_statuses() -> None:
    model = Model(lambda x: x, inputs=[TensorSpec("x", "FP32", [1])], outputs=[TensorSpec("y", "FP32", [1])])
    app = oip_app({"m": model})
    async with client(app) as http:
        for path in ("/models/m/config", "/models/m/config/", "/models/m/versions/1/config"):
            response = await http.get(path)
            assert response.status_code == 200, path
            assert response.json()["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [1]}]
        response = await http.post("/models/m/config")
        assert (response.status_code, response.headers["allow"]) == (405, "GET")
        assert (await http.get("/models/nope/config")).status_code == 404
        assert (await http.get("/models/m/versions/2/config")).status_code == 404
