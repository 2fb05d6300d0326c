"""REST and gRPC answer every case of tests/support/parity_cases.py alike, from one real server process serving both."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest

grpc = pytest.importorskip("grpc")
import oip_asgi.grpc  # noqa: E402
from oip_asgi._declarations.datatypes import numpy_dtype  # noqa: E402
from oip_asgi.grpc import inference_pb2 as pb  # noqa: E402
from oip_asgi.grpc import inference_pb2_grpc  # noqa: E402
from oip_asgi.grpc._codec import CONTENTS_FIELD  # noqa: E402
from tests.support.client import split_response  # noqa: E402
from tests.support.grpc import output_array  # noqa: E402
from tests.support.parity_cases import CASES, Case, rest_request  # noqa: E402
from tests.support.servers import HOST, free_port, serving  # noqa: E402

pytestmark = pytest.mark.slow

# Each wire's own switch for its output form, which reaches the model with the other parameters.
WIRE_PARAMETERS = {"binary_data_output", oip_asgi.grpc.TYPED_OUTPUTS}


@dataclass(frozen=True)
class Refusal:
    status: int | grpc.StatusCode
    message: str


Outputs = dict[str, tuple[str, tuple[int, ...], tuple[Any, ...]]]


@dataclass(frozen=True)
class Inference:
    model: tuple[str, str, str]  # name, version, request id
    outputs: Outputs
    parameters: dict[str, Any]


@pytest.fixture(scope="module")
def addresses() -> Iterator[tuple[str, str]]:
    """tests/apps/parity.py under uvicorn: its REST and its gRPC addresses."""
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "uvicorn", "tests.apps.parity:app", "--host", HOST, "--port", str(port), "--log-level", "warning"]
    # A model that never loads keeps the server from being ready: wait for liveness.
    env = {"OIP_GRPC_ADDRESS": f"{HOST}:{grpc_port}"}
    with serving(argv, port, env=env, ready_path="/v2/health/live") as server:
        yield server.address, f"{HOST}:{grpc_port}"


@pytest.fixture(scope="module")
def http(addresses: tuple[str, str]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://{addresses[0]}", timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def stub(addresses: tuple[str, str]) -> Iterator[inference_pb2_grpc.GRPCInferenceServiceStub]:
    with grpc.insecure_channel(addresses[1]) as channel:
        yield inference_pb2_grpc.GRPCInferenceServiceStub(channel)


# -- a case as REST requests -------------------------------------------------------------------------------------


def rest_infer(http: httpx.Client, case: Case, pair: str) -> Refusal | Inference:
    sent = rest_request(case, pair)
    response = http.request(sent.method, sent.path, content=sent.body, headers=dict(sent.headers))
    if response.status_code != 200:
        return Refusal(response.status_code, response.json()["error"])
    header, payload = split_response(response)
    outputs: Outputs = {}
    position = 0
    for output in header["outputs"]:
        size = (output.get("parameters") or {}).get("binary_data_size")
        if size is None:
            values = tuple(value.encode() if output["datatype"] == "BYTES" else value for value in output["data"])
        else:
            raw = payload[position : position + size]
            position += size
            values = _values(output["datatype"], _array(output["datatype"], raw))
        outputs[output["name"]] = (output["datatype"], tuple(output["shape"]), values)
    model = (header["model_name"], header["model_version"], header.get("id", ""))
    return Inference(model, outputs, header.get("parameters") or {})


def _array(datatype: str, raw: bytes) -> np.ndarray:
    if datatype != "BYTES":
        return np.frombuffer(raw, dtype=numpy_dtype(datatype))
    items, position = [], 0
    while position < len(raw):
        length = int.from_bytes(raw[position : position + 4], "little")
        items.append(raw[position + 4 : position + 4 + length])
        position += 4 + length
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def _values(datatype: str, array: np.ndarray) -> tuple[Any, ...]:
    if datatype in ("FP16", "BF16"):
        array = array.astype(np.float64)
    return tuple(array.ravel().tolist())


def rest_answer(http: httpx.Client, case: Case, pair: str) -> Refusal | Inference | dict[str, Any]:
    if case.rpc == "infer":
        return rest_infer(http, case, pair)
    sent = rest_request(case, pair)
    response = http.request(sent.method, sent.path)
    body: dict[str, Any] = response.json()
    if "error" in body:
        return Refusal(response.status_code, body["error"])
    if case.rpc == "metadata":
        return {key: body.get(key) for key in ("name", "versions", "platform", "inputs", "outputs")}
    return body


# -- the same case as gRPC messages ------------------------------------------------------------------------------


def _set(parameter: pb.InferParameter, value: Any) -> None:
    choice = {bool: "bool_param", int: "int64_param", float: "double_param", str: "string_param"}[type(value)]
    setattr(parameter, choice, value)


def _plain(parameters: Any) -> dict[str, Any]:
    return {name: getattr(value, value.WhichOneof("parameter_choice")) for name, value in parameters.items()}


def grpc_infer(stub: inference_pb2_grpc.GRPCInferenceServiceStub, case: Case, pair: str) -> Refusal | Inference:
    """Typed contents both ways for the "typed" pair; raw_input_contents and raw outputs for the "raw" pair."""
    message = pb.ModelInferRequest(model_name=case.model, model_version=case.version, id=case.request_id)
    for tensor in case.inputs:
        item = message.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        if pair == "raw":
            message.raw_input_contents.append(tensor.packed())
        elif tensor.data:
            getattr(item.contents, CONTENTS_FIELD[tensor.datatype]).extend(tensor.data)
    for output in case.outputs or ():
        requested = message.outputs.add(name=output.name)
        if output.classification is not None:
            requested.parameters["classification"].int64_param = output.classification
    for name, value in case.parameters.items():
        _set(message.parameters[name], value)
    if pair == "typed":
        message.parameters[oip_asgi.grpc.TYPED_OUTPUTS].bool_param = True
    try:
        response = stub.ModelInfer(message, timeout=10)
    except grpc.RpcError as error:
        return Refusal(error.code(), error.details())
    outputs: Outputs = {}
    for output in response.outputs:
        array = output_array(response, output.name, numpy_dtype(output.datatype))
        outputs[output.name] = (output.datatype, tuple(output.shape), _values(output.datatype, array))
    return Inference((response.model_name, response.model_version, response.id), outputs, _plain(response.parameters))


def _tensors(tensors: Any) -> list[dict[str, Any]]:
    return [{"name": item.name, "datatype": item.datatype, "shape": list(item.shape)} for item in tensors]


def grpc_answer(
    stub: inference_pb2_grpc.GRPCInferenceServiceStub, case: Case, pair: str
) -> Refusal | Inference | dict[str, Any]:
    if case.rpc == "infer":
        return grpc_infer(stub, case, pair)
    try:
        if case.rpc == "live":
            return {"live": stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live}
        if case.rpc == "ready":
            return {"ready": stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready}
        if case.rpc == "model_ready":
            ready = stub.ModelReady(pb.ModelReadyRequest(name=case.model, version=case.version), timeout=10).ready
            return {"name": case.model, "ready": ready}
        if case.rpc == "load":
            stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name=case.model), timeout=10)
            return {}
        if case.rpc == "server_metadata":
            server = stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=10)
            return {"name": server.name, "version": server.version, "extensions": list(server.extensions)}
        metadata = stub.ModelMetadata(pb.ModelMetadataRequest(name=case.model, version=case.version), timeout=10)
    except grpc.RpcError as error:
        return Refusal(error.code(), error.details())
    return {
        "name": metadata.name,
        "versions": list(metadata.versions),
        "platform": metadata.platform,
        "inputs": _tensors(metadata.inputs),
        "outputs": _tensors(metadata.outputs),
    }


# -- the table, run ------------------------------------------------------------------------------------------------


def _runs() -> Iterator[Any]:
    for case in CASES:
        for pair in case.pairs if case.rpc == "infer" else ("-",):
            reason = case.differs.get(pair)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(case, pair, marks=marks, id=f"{case.id}-{pair}" if pair != "-" else case.id)


@pytest.mark.parametrize(("case", "pair"), list(_runs()))
def test_rest_and_grpc_answer_alike(
    http: httpx.Client, stub: inference_pb2_grpc.GRPCInferenceServiceStub, case: Case, pair: str
) -> None:
    rest, over_grpc = rest_answer(http, case, pair), grpc_answer(stub, case, pair)
    if case.status != 200:
        assert isinstance(rest, Refusal) and isinstance(over_grpc, Refusal), (rest, over_grpc)
        assert (rest.status, over_grpc.status) == (case.status, oip_asgi.grpc.STATUS_CODES[case.status])
        assert case.message in rest.message, rest.message
        assert over_grpc.message == rest.message
    elif case.rpc == "infer":
        assert isinstance(rest, Inference) and isinstance(over_grpc, Inference), (rest, over_grpc)
        assert rest.outputs == over_grpc.outputs == case.expected
        assert rest.model == over_grpc.model
        assert rest.model[2] == case.request_id
        rest_parameters = {k: v for k, v in rest.parameters.items() if k not in WIRE_PARAMETERS}
        grpc_parameters = {k: v for k, v in over_grpc.parameters.items() if k not in WIRE_PARAMETERS}
        assert rest_parameters == grpc_parameters == case.parameters
    else:
        assert isinstance(rest, dict) and isinstance(over_grpc, dict), (rest, over_grpc)
        assert rest == over_grpc
        assert case.answer is not None and {key: rest[key] for key in case.answer} == case.answer


def test_case_ids_are_unique() -> None:
    assert len({case.id for case in CASES}) == len(CASES)
