"""Inference over every datatype and encoding, both extensions, compression and limits (in-process)."""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from typing import Any

import numpy as np
import pytest
from starlette.applications import Starlette

import oip_asgi
from oip_asgi import Model, TensorSpec, mount
from tests.support.client import (
    as_array,
    binary_outputs,
    binary_request,
    bytes_tensor,
    client,
    outputs_by_name,
    split_response,
)

pytestmark = pytest.mark.anyio

NUMERIC = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64"]


def identity_app(**options: Any) -> Any:
    models: dict[str, Any] = {"echo": lambda **inputs: inputs}
    for datatype in [*NUMERIC, "BYTES", "BF16"]:
        models[datatype.lower()] = Model(
            lambda INPUT0: INPUT0,
            inputs=[TensorSpec("INPUT0", datatype, [-1])],
            outputs=[TensorSpec("OUTPUT0", datatype, [-1])],
        )
    models["scores"] = Model(
        lambda INPUT0: INPUT0,
        inputs=[TensorSpec("INPUT0", "FP32", [-1, -1])],
        outputs=[TensorSpec("OUTPUT0", "FP32", [-1, -1])],
        labels=["zero", "one", "two", "three"],
    )
    return mounted(models, **options)


def mounted(models: dict[str, Any], **options: Any) -> Starlette:
    host = Starlette()
    mount(host, models, path="/v2", **options)
    return host


def sample(datatype: str) -> np.ndarray:
    if datatype == "BOOL":
        return np.array([True, False, True])
    if datatype == "BYTES":
        return np.array([b"hello", b"", "wörld".encode()], dtype=object)
    dtype = np.dtype(datatype.replace("FP", "float").replace("UINT", "uint").replace("INT", "int").lower())
    if dtype.kind == "f":
        return np.array([0.1, -3.3, 1e3], dtype=dtype)
    info = np.iinfo(dtype)
    return np.array([info.min, 0, info.max], dtype=dtype)


def json_values(array: np.ndarray) -> list[Any]:
    if array.dtype == object:
        return [item.decode() for item in array]
    return array.tolist()  # type: ignore[no-any-return]


@pytest.mark.parametrize("datatype", [*NUMERIC, "BYTES"], ids=str)
@pytest.mark.parametrize("binary_in", [False, True], ids=["json-in", "binary-in"])
@pytest.mark.parametrize("binary_out", [False, True], ids=["json-out", "binary-out"])
async def test_every_datatype_round_trips(datatype: str, binary_in: bool, binary_out: bool) -> None:
    array = sample(datatype)
    tensor: dict[str, Any] = {"name": "INPUT0", "shape": [3], "datatype": datatype}
    request: dict[str, Any] = {
        "inputs": [tensor],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": binary_out}}],
    }
    async with client(identity_app()) as http:
        if binary_in:
            raw = (
                bytes_tensor(list(array))
                if datatype == "BYTES"
                else array.astype(array.dtype.newbyteorder("<")).tobytes()
            )
            tensor["parameters"] = {"binary_data_size": len(raw)}
            body, headers = binary_request(request, raw)
            response = await http.post(f"/v2/models/{datatype.lower()}/infer", content=body, headers=headers)
        else:
            tensor["data"] = json_values(array)
            response = await http.post(f"/v2/models/{datatype.lower()}/infer", json=request)
    assert response.status_code == 200, response.text
    header, payload = split_response(response)
    output = header["outputs"][0]
    assert (output["datatype"], output["shape"]) == (datatype, [3])
    assert response.headers["content-type"] == ("application/octet-stream" if binary_out else "application/json")
    result = as_array(output, binary_outputs(header, payload)["OUTPUT0"] if binary_out else None)
    assert result.tolist() == array.tolist()


async def test_float32_prints_as_float32_and_nested_data_is_accepted() -> None:
    async with client(identity_app()) as http:
        body = {"inputs": [{"name": "INPUT0", "shape": [2, 2], "datatype": "FP32", "data": [[0.1, 3.3], [1, 2.5]]}]}
        response = await http.post("/v2/models/echo/infer", json=body)
    assert response.status_code == 200
    assert b'"data":[0.1,3.3,1.0,2.5]' in response.content


@pytest.mark.parametrize(
    ("datatype", "data", "message"),
    [
        ("INT32", ["1", 2], "Expected `int`, got `str` - at `$.inputs[0].data[0]`"),
        ("INT8", [1, 300], "input 't': INT8 element 1 is 300, out of range [-128, 127]"),
        ("UINT8", [-1, 0], "input 't': UINT8 element 0 is -1, out of range [0, 255]"),
        ("INT16", ["1", 70000], "Expected `int`, got `str` - at `$.inputs[0].data[0]`"),  # the first fault is named
        ("INT32", [1.5, 2], "Expected `int`, got `float`"),
        ("INT32", [True, 2], "Expected `int`, got `bool`"),
        ("BOOL", [1, 0], "Expected `bool`, got `int`"),
        ("FP32", [0, 1e39], "(FP32): Expected `float` < 3.4028235677973366e+38 - at `$.inputs[0].data[1]`"),
        ("FP16", [65520, 0], "(FP16): Expected `float` < 65520.0 - at `$.inputs[0].data[0]`"),
        ("FP32", ["NaN", 0], "Expected `float`, got `str`"),
        ("BYTES", [1, 2], "Expected `str`, got `int`"),
        ("FP32", [1.0], "data has 1 elements, shape [2] needs 2"),
        ("FP32", [[1.0], [2.0]], "nested 2 deep, but shape [2] has 1 dimensions"),
        ("FP32", 5, "Expected `array | null`, got `int` - at `$.inputs[0].data`"),
    ],
)
async def test_wrong_json_elements_are_400_naming_the_tensor(datatype: str, data: Any, message: str) -> None:
    async with client(identity_app()) as http:
        body = {"inputs": [{"name": "t", "shape": [2], "datatype": datatype, "data": data}]}
        response = await http.post("/v2/models/echo/infer", json=body)
    assert response.status_code == 400
    assert "input 't'" in response.json()["error"] and message in response.json()["error"]


async def test_integers_out_of_range_in_nested_rows_are_named_as_in_flat_data() -> None:
    # As gRPC's typed contents word it (tests/support/parity_cases.py), counting elements row-major.
    body = {"inputs": [{"name": "t", "shape": [2, 2], "datatype": "UINT16", "data": [[1, 2], [3, 65536]]}]}
    async with client(identity_app()) as http:
        response = await http.post("/v2/models/echo/infer", json=body)
    assert response.status_code == 400
    assert response.json()["error"] == "input 't': UINT16 element 3 is 65536, out of range [0, 65535]"


async def test_floats_are_in_range_when_they_round_to_a_finite_value() -> None:
    # The largest float32 prints as 3.4028235e+38, a little above it as a double; it must read back.
    body = {"inputs": [{"name": "t", "shape": [3], "datatype": "FP16", "data": [65519, -65504, 1e-8]}]}
    wide = {"inputs": [{"name": "t", "shape": [2], "datatype": "FP32", "data": [3.4028235e38, -3.4028235e38]}]}
    async with client(identity_app()) as http:
        half = (await http.post("/v2/models/echo/infer", json=body)).json()["outputs"][0]
        single = (await http.post("/v2/models/echo/infer", json=wide)).json()["outputs"][0]
    assert np.array(half["data"], dtype=np.float16).tolist() == [65504.0, -65504.0, 0.0]
    assert np.array(single["data"], dtype=np.float32).tolist() == [np.finfo(np.float32).max, np.finfo(np.float32).min]


async def test_nested_rows_are_range_checked_as_flat_data_is() -> None:
    async with client(identity_app()) as http:
        body = {"inputs": [{"name": "t", "shape": [2, 1], "datatype": "FP16", "data": [[1], [-65520]]}]}
        response = await http.post("/v2/models/echo/infer", json=body)
    assert response.status_code == 400
    assert response.json()["error"] == "input 't': invalid FP16 data: Expected `float` > -65520.0 - at `$.data[1][0]`"


async def test_ragged_nested_data_is_400() -> None:
    async with client(identity_app()) as http:
        body = {"inputs": [{"name": "t", "shape": [2, 2], "datatype": "INT32", "data": [[1, 2], [3]]}]}
        response = await http.post("/v2/models/echo/infer", json=body)
    assert response.status_code == 400 and "row of 1 at dimension 1" in response.json()["error"]


async def test_outputs_json_cannot_carry_are_clear_errors_and_binary_works() -> None:
    models = {
        "nan": Model(lambda x: np.array([np.nan], np.float32), outputs=[TensorSpec("y", "FP32", [1])]),
        "latin1": Model(lambda x: np.array([b"\xff"], dtype=object), outputs=[TensorSpec("y", "BYTES", [1])]),
    }
    body = {"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [1]}]}
    async with client(mounted(models)) as http:
        for name, message in (("nan", "NaN or infinity"), ("latin1", "not UTF-8")):
            response = await http.post(f"/v2/models/{name}/infer", json=body)
            assert response.status_code == 400 and message in response.json()["error"]
            response = await http.post(
                f"/v2/models/{name}/infer", json={**body, "parameters": {"binary_data_output": True}}
            )
            assert response.status_code == 200


async def test_binary_data_output_covers_only_the_outputs_the_request_does_not_list() -> None:
    """As Triton and KServe read it: a listed output is binary only when its own binary_data says so."""
    model = Model(
        lambda x: {"a": x, "b": x * 2, "c": x * 3},
        outputs=[TensorSpec(name, "INT32", [-1]) for name in "abc"],
    )
    listed = {
        "inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}],
        "outputs": [
            {"name": "a", "parameters": {"binary_data": False}},
            {"name": "b"},
            {"name": "c", "parameters": {"binary_data": True}},
        ],
        "parameters": {"binary_data_output": True},
    }
    async with client(mounted({"m": model})) as http:
        response = await http.post("/v2/models/m/infer", json=listed)
        unlisted = await http.post("/v2/models/m/infer", json={**listed, "outputs": None})
    header, payload = split_response(response)
    outputs = outputs_by_name(header)
    assert outputs["a"]["data"] == [1, 2]
    assert outputs["b"]["data"] == [2, 4]
    assert outputs["c"]["parameters"] == {"binary_data_size": 8}
    assert np.frombuffer(payload, "<i4").tolist() == [3, 6]
    assert int(response.headers["content-length"]) == int(response.headers["inference-header-content-length"]) + 8
    header, payload = split_response(unlisted)
    assert [output["parameters"] for output in header["outputs"]] == [{"binary_data_size": 8}] * 3
    assert np.frombuffer(payload, "<i4").tolist() == [1, 2, 2, 4, 3, 6]


async def test_mixed_binary_and_json_inputs_keep_their_order() -> None:
    async with client(identity_app()) as http:
        request = {
            "inputs": [
                {"name": "a", "shape": [2, 2], "datatype": "FP16", "parameters": {"binary_data_size": 8}},
                {"name": "b", "shape": [2, 2], "datatype": "UINT32", "data": [[1, 2], [3, 4]]},
                {"name": "c", "shape": [3], "datatype": "BOOL", "parameters": {"binary_data_size": 3}},
            ],
            "outputs": [{"name": "a", "parameters": {"binary_data": True}}, {"name": "b"}, {"name": "c"}],
        }
        fp16 = np.array([[1.5, 2.25], [3.0, 4.0]], np.float16)
        body, headers = binary_request(request, fp16.tobytes(), bytes([1, 0, 1]))
        response = await http.post("/v2/models/echo/infer", content=body, headers=headers)
    header, payload = split_response(response)
    assert [output["name"] for output in header["outputs"]] == ["a", "b", "c"]
    assert np.frombuffer(payload, np.float16).reshape(2, 2).tolist() == fp16.tolist()
    assert header["outputs"][1]["data"] == [1, 2, 3, 4]
    assert header["outputs"][2]["data"] == [True, False, True]


async def test_bf16_binary_only() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.array([1.5, -2.0, 0.25], dtype=ml_dtypes.bfloat16)
    async with client(identity_app()) as http:
        request = {
            "inputs": [{"name": "INPUT0", "shape": [3], "datatype": "BF16", "parameters": {"binary_data_size": 6}}]
        }
        body, headers = binary_request({**request, "parameters": {"binary_data_output": True}}, values.tobytes())
        response = await http.post("/v2/models/bf16/infer", content=body, headers=headers)
        header, payload = split_response(response)
        assert header["outputs"][0]["datatype"] == "BF16"
        assert np.frombuffer(payload, ml_dtypes.bfloat16).tolist() == values.tolist()
        json_request = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "BF16", "data": [1.0]}]}
        response = await http.post("/v2/models/bf16/infer", json=json_request)
        assert response.status_code == 400 and "BF16 has no JSON form" in response.json()["error"]


@pytest.mark.parametrize(
    ("scores", "k", "expected"),
    [
        ([1.1, 3.3, 0.5, 2.4], 2, ["3.3:1:one", "2.4:3:three"]),
        ([[1, 5, 10, 4], [2, 2, 2, 2]], 2, ["10.0:2:two", "5.0:1:one", "2.0:0:zero", "2.0:1:one"]),
        ([0.5, 0.5, 0.25, 0.5], 9, ["0.5:0:zero", "0.5:1:one", "0.5:3:three", "0.25:2:two"]),
    ],
    ids=["spec-example", "batched-ties", "count-above-classes"],
)
async def test_classification(scores: list[Any], k: int, expected: list[str]) -> None:
    array = np.array(scores, dtype=np.float32)
    body = {
        "inputs": [{"name": "INPUT0", "shape": list(array.shape), "datatype": "FP32", "data": array.ravel().tolist()}],
        "outputs": [{"name": "INPUT0", "parameters": {"classification": k}}],
    }
    async with client(identity_app()) as http:
        response = await http.post("/v2/models/echo/infer", json=body)
        # Labels come from the model: the labelled model gives the same ranks with names.
        labelled = {
            **body,
            "inputs": [
                {**body["inputs"][0], "shape": [-1 if False else d for d in array.reshape(-1, array.shape[-1]).shape]}
            ],
        }
        labelled["outputs"] = [{"name": "OUTPUT0", "parameters": {"classification": k, "binary_data": True}}]
        binary = await http.post("/v2/models/scores/infer", json=labelled)
    output = response.json()["outputs"][0]
    kept = min(k, array.shape[-1])
    assert output["datatype"] == "BYTES" and output["shape"] == [*array.shape[:-1], kept]
    assert output["data"] == [":".join(text.split(":")[:2]) for text in expected]
    header, payload = split_response(binary)
    assert as_array(header["outputs"][0], payload).ravel().tolist() == [text.encode() for text in expected]


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"classification": 0}, "output 'OUTPUT0': parameter classification must be a positive integer, got 0"),
        ({"classification": -2}, "must be a positive integer, got -2"),
        ({"classification": 1.5}, "must be a positive integer, got 1.5"),
        ({"classification": "3"}, "must be a positive integer, got '3'"),
        ({"classification": [3]}, "must be a positive integer, got an array"),
        ({"binary_data": "yes"}, "got `str` - at `$.outputs[0].parameters.binary_data`"),
    ],
)
async def test_bad_output_parameters(parameters: dict[str, Any], message: str) -> None:
    body = {
        "inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1, 2]}],
        "outputs": [{"name": "OUTPUT0", "parameters": parameters}],
    }
    async with client(identity_app()) as http:
        response = await http.post("/v2/models/fp32/infer", json=body)
    assert response.status_code == 400 and message in response.json()["error"]


@pytest.mark.parametrize("datatype", ["BOOL", "BYTES"])
async def test_classification_of_bool_or_bytes_is_400(datatype: str) -> None:
    data = [True, False] if datatype == "BOOL" else ["a", "b"]
    body = {
        "inputs": [{"name": "INPUT0", "shape": [2], "datatype": datatype, "data": data}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 1}}],
    }
    async with client(identity_app()) as http:
        declared = await http.post(f"/v2/models/{datatype.lower()}/infer", json=body)
        body["outputs"] = [{"name": "INPUT0", "parameters": {"classification": 1}}]
        undeclared = await http.post("/v2/models/echo/infer", json=body)
    for response in (declared, undeclared):
        assert response.status_code == 400 and "classification needs a numeric output" in response.json()["error"]


async def test_raw_binary_request() -> None:
    values = np.arange(16, dtype=np.int32)
    models = {
        "m": Model(lambda x: {"y": x + 1, "z": x * 2}, inputs=[TensorSpec("x", "INT32", [-1, 8])]),
        "text": Model(lambda s: s, inputs=[TensorSpec("s", "BYTES", [1])], outputs=[TensorSpec("t", "BYTES", [1])]),
        "two": Model(lambda a, b: a, inputs=[TensorSpec("a", "INT32", [1]), TensorSpec("b", "INT32", [1])]),
    }
    headers = {"inference-header-content-length": "0"}
    async with client(mounted(models)) as http:
        response = await http.post("/v2/models/m/infer", content=values.tobytes(), headers=headers)
        header, payload = split_response(response)
        assert [output["shape"] for output in header["outputs"]] == [[2, 8], [2, 8]]
        parts = binary_outputs(header, payload)
        assert np.frombuffer(parts["y"], "<i4").tolist() == (values + 1).tolist()
        response = await http.post("/v2/models/text/infer", content=b"\x00raw bytes", headers=headers)
        header, payload = split_response(response)
        assert as_array(header["outputs"][0], payload).tolist() == [b"\x00raw bytes"]
        response = await http.post("/v2/models/two/infer", content=b"\x00" * 4, headers=headers)
        assert response.status_code == 400 and "needs a model with one input" in response.json()["error"]
        response = await http.post("/v2/models/m/infer", content=b"\x00" * 6, headers=headers)
        assert response.status_code == 400 and "not a whole number of INT32" in response.json()["error"]
        response = await http.post("/v2/models/m/infer", content=b"\x00" * 12, headers=headers)
        assert response.status_code == 400 and "does not fit shape [-1, 8]" in response.json()["error"]


@pytest.mark.parametrize(
    ("shape", "status", "expected"),
    [([-1, 1], 200, [1, 1]), ([1], 200, [1]), ([-1], 200, [1]), ([-1, -1], 400, None), ([2], 400, None)],
    ids=["batch-of-one", "fixed", "batch", "two-variable", "two-elements"],
)
async def test_raw_binary_bytes_body_takes_the_declared_shape(shape: list[int], status: int, expected: Any) -> None:
    """Triton's reading: the body is one element, shaped by the spec; a shape it cannot fill is the client's 400."""
    model = Model(lambda s: s, inputs=[TensorSpec("s", "BYTES", shape)], outputs=[TensorSpec("t", "BYTES", shape)])
    async with client(mounted({"m": model})) as http:
        response = await http.post(
            "/v2/models/m/infer", content=b"427", headers={"inference-header-content-length": "0"}
        )
    assert response.status_code == status, response.text
    if expected is None:
        assert "raw binary BYTES body" in response.json()["error"]
    else:
        header, payload = split_response(response)
        assert header["outputs"][0]["shape"] == expected
        assert as_array(header["outputs"][0], payload).ravel().tolist() == [b"427"]


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (oip_asgi.BadRequest("x must be positive"), 400),
        (oip_asgi.NotFound("no such row 7"), 404),
        (oip_asgi.ModelNotReady("warming up, retry"), 503),
        (oip_asgi.ModelError("the GPU fell off"), 500),
    ],
    ids=["BadRequest", "NotFound", "ModelNotReady", "ModelError"],
)
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_model_may_refuse_its_input_with_any_oip_error(
    error: oip_asgi.OIPError, status: int, is_async: bool
) -> None:
    def refuse(x: np.ndarray) -> np.ndarray:
        raise error

    async def refuse_async(x: np.ndarray) -> np.ndarray:
        raise error

    model = Model(refuse_async if is_async else refuse, inputs=[TensorSpec("x", "INT32", [-1])])
    request = {"inputs": [{"name": "x", "shape": [1], "datatype": "INT32", "data": [-1]}]}
    async with client(mounted({"m": model})) as http:
        response = await http.post("/v2/models/m/infer", json=request)
        assert response.status_code == status
        assert response.json() == {"error": error.message}
        assert (await http.get("/v2/health/ready")).status_code == 200  # the model still serves


async def test_a_model_sets_response_and_output_parameters_with_a_result() -> None:
    def predict(x: np.ndarray) -> oip_asgi.Result:
        return oip_asgi.Result(
            {"y": x, "z": x * 2},
            parameters={"sequence_end": True, "served_by": "m"},
            output_parameters={"y": {"unit": "cm"}, "z": {"scale": 2}},
        )

    model = Model(predict, outputs=[TensorSpec("y", "INT32", [-1]), TensorSpec("z", "INT32", [-1])])
    request = {
        "inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}],
        "outputs": [{"name": "y"}, {"name": "z", "parameters": {"binary_data": True}}],
    }
    async with client(mounted({"m": model})) as http:
        response = await http.post("/v2/models/m/infer", json=request)
    header, payload = split_response(response)
    assert header["parameters"] == {"sequence_end": True, "served_by": "m"}
    outputs = outputs_by_name(header)
    assert outputs["y"]["parameters"] == {"unit": "cm"} and outputs["y"]["data"] == [1, 2]
    assert outputs["z"]["parameters"] == {"scale": 2, "binary_data_size": 8}
    assert np.frombuffer(payload, "<i4").tolist() == [2, 4]


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (oip_asgi.Result({"y": [1]}, parameters={"p": [1, 2]}), "response parameters with 'p': [1, 2]"),
        (oip_asgi.Result({"y": [1]}, parameters=[1]), "response parameters of type list"),  # type: ignore[arg-type]
        (
            oip_asgi.Result({"y": [1]}, output_parameters={"q": {"a": 1}}),
            "parameters for outputs it did not return: 'q'",
        ),
        (oip_asgi.Result({"y": [1]}, output_parameters={"y": {"binary_data_size": 1}}), "set binary_data_size"),
        (oip_asgi.Result(None), "returned nothing (None)"),
    ],
    ids=["not-a-scalar", "not-a-mapping", "unknown-output", "reserved", "no-outputs"],
)
async def test_parameters_a_model_cannot_return_are_500s_naming_them(result: oip_asgi.Result, message: str) -> None:
    model = Model(lambda x: result, outputs=[TensorSpec("y", "INT64", [-1])])
    request = {"inputs": [{"name": "x", "shape": [1], "datatype": "INT32", "data": [1]}]}
    async with client(mounted({"m": model})) as http:
        response = await http.post("/v2/models/m/infer", json=request)
    assert response.status_code == 500 and message in response.json()["error"], response.text


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_compressed_requests_and_responses(encoding: str) -> None:
    values = np.arange(1000, dtype=np.float32)
    request = {
        "inputs": [{"name": "INPUT0", "shape": [1000], "datatype": "FP32", "parameters": {"binary_data_size": 4000}}],
        "parameters": {"binary_data_output": True},
    }
    body, headers = binary_request(request, values.tobytes())
    compressed = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    headers |= {"content-encoding": encoding, "accept-encoding": encoding}
    async with client(identity_app()) as http:
        response = await http.post("/v2/models/fp32/infer", content=compressed, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-encoding"] == encoding
    header, payload = split_response(response)  # httpx has already decompressed the body
    assert np.frombuffer(payload, np.float32).tolist() == values.tolist()


async def test_a_small_compression_bomb_is_413_without_inflating_it() -> None:
    bomb = gzip.compress(b"[" + b" " * (64 * 2**20) + b"]")
    assert len(bomb) < 100_000
    async with client(identity_app(max_body_size=2**20)) as http:
        response = await http.post("/v2/models/echo/infer", content=bomb, headers={"content-encoding": "gzip"})
        assert response.status_code == 413 and "limit of 1048576 bytes" in response.json()["error"]
        response = await http.post("/v2/models/echo/infer", content=b"x", headers={"content-encoding": "br"})
        assert response.status_code == 415
        response = await http.post("/v2/models/echo/infer", content=b"not gzip", headers={"content-encoding": "gzip"})
        assert response.status_code == 400 and "not valid compressed data" in response.json()["error"]


async def test_claimed_huge_shapes_and_lengths_allocate_nothing() -> None:
    async with client(identity_app(max_body_size=2**20)) as http:
        header = {
            "inputs": [{"name": "x", "shape": [2**40], "datatype": "FP32", "parameters": {"binary_data_size": 2**42}}]
        }
        body, headers = binary_request(header, b"\x00" * 16)
        response = await http.post("/v2/models/echo/infer", content=body, headers=headers)
        assert response.status_code == 413 and "over the limit" in response.json()["error"]
        header["inputs"][0]["parameters"] = {"binary_data_size": 16}
        body, headers = binary_request(header, b"\x00" * 16)
        response = await http.post("/v2/models/echo/infer", content=body, headers=headers)
        assert response.status_code == 400 and "takes 4398046511104 bytes" in response.json()["error"]
        header = {
            "inputs": [{"name": "x", "shape": [2**40], "datatype": "BYTES", "parameters": {"binary_data_size": 16}}]
        }
        body, headers = binary_request(header, b"\x00" * 16)
        response = await http.post("/v2/models/echo/infer", content=body, headers=headers)
        assert response.status_code == 400 and "cannot hold 1099511627776 BYTES elements" in response.json()["error"]
        response = await http.post("/v2/models/echo/infer", content=b"{}", headers={"content-length": str(2**50)})
        assert response.status_code == 413


@pytest.mark.parametrize(
    ("header_length", "extra", "message"),
    [
        ("abc", b"", "Inference-Header-Content-Length must be a non-negative integer"),
        ("-5", b"", "Inference-Header-Content-Length must be a non-negative integer"),
        ("9999", b"", "exceeds the body's Content-Length"),
        (None, b"\x00", "Content-Length is"),
    ],
)
async def test_header_length_lies(header_length: str | None, extra: bytes, message: str) -> None:
    request = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT8", "parameters": {"binary_data_size": 2}}]}
    body, headers = binary_request(request, b"\x01\x02" + extra)
    if header_length is not None:
        headers["inference-header-content-length"] = header_length
    async with client(identity_app()) as http:
        response = await http.post("/v2/models/echo/infer", content=body, headers=headers)
    assert response.status_code == 400 and message in response.json()["error"]


async def test_chunked_body_without_content_length_streams_and_checks_its_end() -> None:
    request = {"inputs": [{"name": "x", "shape": [4], "datatype": "INT8", "parameters": {"binary_data_size": 4}}]}
    body, headers = binary_request(request, b"\x01\x02\x03\x04")

    async def chunks(data: bytes) -> Any:
        for start in range(0, len(data), 7):
            yield data[start : start + 7]

    async with client(identity_app()) as http:
        response = await http.post("/v2/models/echo/infer", content=chunks(body), headers=headers)
        assert response.status_code == 200 and response.json()["outputs"][0]["data"] == [1, 2, 3, 4]
        response = await http.post("/v2/models/echo/infer", content=chunks(body + b"\x05"), headers=headers)
        assert response.status_code == 400 and "longer than the" in response.json()["error"]
        response = await http.post("/v2/models/echo/infer", content=chunks(body[:-1]), headers=headers)
        assert response.status_code == 400 and "1 bytes short, in the middle of input 'x'" in response.json()["error"]


async def test_bad_binary_tensors() -> None:
    async with client(identity_app()) as http:
        request = {"inputs": [{"name": "b", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": 9}}]}
        body, headers = binary_request(request, (5).to_bytes(4, "little") + b"abcde")
        response = await http.post("/v2/models/echo/infer", content=body, headers=headers)
        assert response.status_code == 400 and "ends inside the length of element 1" in response.json()["error"]
        body, headers = binary_request(request, (50).to_bytes(4, "little") + b"abcde")
        response = await http.post("/v2/models/echo/infer", content=body, headers=headers)
        assert response.status_code == 400 and "element 0 claims 50 bytes" in response.json()["error"]
        request = {"inputs": [{"name": "t", "shape": [2], "datatype": "BOOL", "parameters": {"binary_data_size": 2}}]}
        body, headers = binary_request(request, b"\x01\x07")
        response = await http.post("/v2/models/echo/infer", content=body, headers=headers)
        assert response.status_code == 400 and "BOOL bytes must be 0 or 1" in response.json()["error"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "malformed inference request JSON"),
        (b"[1, 2]", "Expected `object`, got `array`"),
        (
            b'{"inputs": [{"name": "x", "shape": [-1], "datatype": "INT8", "data": [1]}]}',
            "shape [-1]; dimensions cannot be negative",
        ),
        (
            b'{"inputs": [{"name": "x", "shape": [1], "datatype": "INT9", "data": [1]}]}',
            "datatype 'INT9'; the datatypes are",
        ),
        (b'{"inputs": [{"name": "x", "shape": [1], "datatype": "INT8"}]}', "neither data nor binary_data_size"),
        (b'{"inputs": [], "parameters": {"p": ' + b"[" * 5000 + b"]" * 5000 + b"}}", "nested too deeply"),
        (
            b'{"inputs": [{"name": "x", "shape": [1], "datatype": "UINT64", "data": [18446744073709551616]}]}',
            "out of range",
        ),
        (
            json.dumps({"inputs": [], "parameters": {"binary_data_output": 1}}).encode(),
            "Unable to parse 'binary_data_output'",
        ),
    ],
    ids=[
        "truncated",
        "not-object",
        "negative-dim",
        "unknown-datatype",
        "no-data",
        "deep",
        "uint64-range",
        "bad-binary-output",
    ],
)
async def test_malformed_requests(body: bytes, message: str) -> None:
    async with client(identity_app()) as http:
        response = await http.post("/v2/models/echo/infer", content=body)
        assert response.status_code == 400 and message in response.json()["error"]
        assert (await http.get("/v2/health/live")).status_code == 200


async def test_bf16_without_ml_dtypes_is_a_clear_400(monkeypatch: pytest.MonkeyPatch) -> None:
    """To a model that declares no inputs; one that declares BF16 is refused when it is built (test_app.py)."""
    app = identity_app()
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` now fails
    request = {"inputs": [{"name": "x", "shape": [1], "datatype": "BF16", "parameters": {"binary_data_size": 2}}]}
    body, headers = binary_request(request, b"\x00\x00")
    async with client(app) as http:
        response = await http.post("/v2/models/echo/infer", content=body, headers=headers)
    assert response.status_code == 400 and "pip install -e '.[bf16]'" in response.json()["error"]
