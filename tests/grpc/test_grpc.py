"""oip_asgi.grpc in-process: every RPC, both content forms, every error code, and hostile messages."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import oip_asgi  # noqa: E402
import oip_asgi.grpc  # noqa: E402
from oip_asgi import Model, OIPError, Result, TensorSpec  # noqa: E402
from oip_asgi.grpc import inference_pb2 as pb  # noqa: E402
from oip_asgi.grpc import inference_pb2_grpc  # noqa: E402
from oip_asgi.grpc._service import status_code  # noqa: E402
from tests.support.grpc import INFER, TYPED_FIELDS, grpc_server, output_array, request  # noqa: E402
from tests.support.strategies import tensors  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

INVALID = grpc.StatusCode.INVALID_ARGUMENT
ANIMALS = ["cat", "dog", "bird"]


def echo(**inputs: np.ndarray) -> dict[str, np.ndarray]:
    return inputs


def echo_parameters(X: np.ndarray, parameters: dict[str, Any]) -> Result:
    return Result({"Y": X}, parameters=dict(parameters), output_parameters={"Y": {"rows": len(X), "big": 2**63}})


def fails(X: np.ndarray) -> np.ndarray:
    raise ValueError("no luck")


def teapot(X: np.ndarray) -> np.ndarray:
    raise type("Teapot", (OIPError,), {"status_code": 418})("short and stout")


async def sleepy(X: np.ndarray) -> np.ndarray:
    await asyncio.sleep(float(X[0]))
    return X


def broken_load() -> None:
    raise RuntimeError("weights missing")


def scores(X: np.ndarray) -> np.ndarray:
    return X


MODELS: dict[str, Any] = {
    "echo": echo,
    "parameters": Model(
        echo_parameters, inputs=[TensorSpec("X", "FP32", [-1])], outputs=[TensorSpec("Y", "FP32", [-1])]
    ),
    "fails": fails,
    "teapot": teapot,
    "broken": Model(scores, load=broken_load),
    "versioned": [Model(lambda X: X + 1, version="1"), Model(lambda X: X + 2, version="2")],
    "described": Model(
        scores,
        inputs=[TensorSpec("X", "FP32", [-1, 3])],
        outputs=[TensorSpec("X", "FP32", [-1, 3])],
        properties={"task": "classification", "owner": "tests"},
        platform="numpy",
        labels=ANIMALS,
    ),
    "sleepy": sleepy,
}


@pytest.fixture(scope="module")
def app() -> oip_asgi.OIPApp:
    return oip_asgi.oip_app(MODELS)


@pytest.fixture(scope="module")
def address(app: oip_asgi.OIPApp) -> Iterator[str]:
    with grpc_server(app, health=True, reflection=True) as address:
        yield address


@pytest.fixture(scope="module")
def channel(address: str) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(address) as channel:
        yield channel


@pytest.fixture(scope="module")
def stub(channel: grpc.Channel) -> inference_pb2_grpc.GRPCInferenceServiceStub:
    return inference_pb2_grpc.GRPCInferenceServiceStub(channel)


def refused(call: Any, message: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call(message, timeout=10)
    error: grpc.RpcError = raised.value
    return error


def assert_refused(call: Any, message: Any, code: grpc.StatusCode, text: str) -> None:
    error = refused(call, message)
    assert (error.code(), text in error.details()) == (code, True), error.details()


# -- health and metadata ------------------------------------------------------------------------


def test_health(stub: inference_pb2_grpc.GRPCInferenceServiceStub, app: oip_asgi.OIPApp) -> None:
    assert stub.ServerLive(pb.ServerLiveRequest()).live
    assert stub.ServerReady(pb.ServerReadyRequest()).ready is False  # "broken" never loads, as REST says too
    assert stub.ModelReady(pb.ModelReadyRequest(name="echo")).ready
    assert stub.ModelReady(pb.ModelReadyRequest(name="versioned", version="1")).ready


@pytest.mark.parametrize(("name", "version"), [("missing", ""), ("", ""), ("versioned", "3"), ("broken", "")], ids=str)
def test_model_ready_is_false_not_an_error(
    stub: inference_pb2_grpc.GRPCInferenceServiceStub, name: str, version: str
) -> None:
    # As Triton: tritonclient's is_model_ready reads ready=false from an OK answer.
    assert stub.ModelReady(pb.ModelReadyRequest(name=name, version=version)).ready is False


def test_server_metadata(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    metadata = stub.ServerMetadata(pb.ServerMetadataRequest())
    assert metadata.name == "oip-asgi" and metadata.version == oip_asgi.__version__
    assert {"binary_tensor_data", "classification"} <= set(metadata.extensions)


def test_model_metadata_with_properties(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    metadata = stub.ModelMetadata(pb.ModelMetadataRequest(name="described"))
    assert (metadata.name, list(metadata.versions), metadata.platform) == ("described", ["1"], "numpy")
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [("X", "FP32", [-1, 3])]
    assert dict(metadata.properties) == {"task": "classification", "owner": "tests"}
    assert list(stub.ModelMetadata(pb.ModelMetadataRequest(name="versioned", version="1")).versions) == ["1", "2"]


def test_an_empty_model_name_is_not_found(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    # Unknown models and versions over both wires are in tests/support/parity_cases.py; REST cannot send an empty name.
    unknown = "Request for unknown model: '' is not found"
    assert_refused(stub.ModelMetadata, pb.ModelMetadataRequest(name=""), grpc.StatusCode.NOT_FOUND, unknown)
    infer = request("", ("X", "FP32", np.zeros(1, np.float32)))
    assert_refused(stub.ModelInfer, infer, grpc.StatusCode.NOT_FOUND, unknown)


# -- inference ----------------------------------------------------------------------------------


def test_parameters_reach_the_model_as_rests_do(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    message = request("parameters", ("X", "FP32", np.ones(2, np.float32)))
    message.parameters["flag"].bool_param = True
    message.parameters["count"].int64_param = -3
    message.parameters["name"].string_param = "ünï"
    message.parameters["ratio"].double_param = 0.25
    message.parameters["huge"].uint64_param = 2**64 - 1
    response = stub.ModelInfer(message)
    echoed = {name: getattr(value, value.WhichOneof("parameter_choice")) for name, value in response.parameters.items()}
    assert echoed == {"flag": True, "count": -3, "name": "ünï", "ratio": 0.25, "huge": 2**64 - 1}
    assert response.parameters["count"].WhichOneof("parameter_choice") == "int64_param"
    assert response.parameters["huge"].WhichOneof("parameter_choice") == "uint64_param"
    own = response.outputs[0].parameters
    assert (own["rows"].int64_param, own["big"].uint64_param) == (2, 2**63)


def test_a_parameter_without_a_value_is_refused(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    message = request("parameters", ("X", "FP32", np.ones(2, np.float32)))
    message.parameters["empty"].SetInParent()
    assert_refused(stub.ModelInfer, message, INVALID, "parameter 'empty' has no value")


@pytest.mark.parametrize(
    "set_value",
    [
        lambda p: setattr(p, "int64_param", -1),
        lambda p: setattr(p, "int64_param", 0),
        lambda p: setattr(p, "double_param", 2.0),
        lambda p: setattr(p, "string_param", "2"),
        lambda p: p.SetInParent(),
    ],
    ids=["negative", "zero", "double", "string", "empty"],
)
def test_classification_must_be_a_positive_integer(
    stub: inference_pb2_grpc.GRPCInferenceServiceStub, set_value: Any
) -> None:
    message = request("described", ("X", "FP32", np.zeros((1, 3), np.float32)))
    set_value(message.outputs.add(name="X").parameters["classification"])
    assert_refused(stub.ModelInfer, message, INVALID, "output 'X': parameter classification must be a positive integer")


def test_typed_contents_both_ways(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    x = np.array([[1, -2], [3, 4]], dtype=np.int16)
    message = request("echo", ("A", "INT16", x), ("B", "BYTES", np.array([b"a", b""], dtype=object)), typed=True)
    response = stub.ModelInfer(message)
    assert len(response.raw_output_contents) == 2  # raw by default, whatever the request sent
    message.parameters[oip_asgi.grpc.TYPED_OUTPUTS].bool_param = True
    response = stub.ModelInfer(message)
    assert not response.raw_output_contents
    assert list(response.outputs[0].contents.int_contents) == [1, -2, 3, 4]
    assert list(response.outputs[1].contents.bytes_contents) == [b"a", b""]


def test_typed_outputs_of_a_16_bit_float_are_refused(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    message = request("echo", ("A", "FP16", np.ones(2, np.float16)))
    message.parameters[oip_asgi.grpc.TYPED_OUTPUTS].bool_param = True
    assert_refused(stub.ModelInfer, message, INVALID, "output 'A' is FP16, which has no typed contents")
    message.parameters[oip_asgi.grpc.TYPED_OUTPUTS].string_param = "yes"
    assert_refused(stub.ModelInfer, message, INVALID, "parameter typed_output_contents must be a boolean, got 'yes'")


def test_bf16_through_raw_contents(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
    response = stub.ModelInfer(request("echo", ("X", "BF16", x)))
    assert response.outputs[0].datatype == "BF16"
    assert response.raw_output_contents[0] == x.tobytes()


@given(tensor=tensors(), typed_in=st.booleans(), typed_out=st.booleans())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_valid_requests_round_trip(
    stub: inference_pb2_grpc.GRPCInferenceServiceStub, tensor: tuple[str, np.ndarray], typed_in: bool, typed_out: bool
) -> None:
    datatype, array = tensor
    typed_in = typed_in and datatype in TYPED_FIELDS
    typed_out = typed_out and datatype in TYPED_FIELDS
    message = request("echo", ("T", datatype, array), typed=typed_in, id="round-trip")
    message.parameters[oip_asgi.grpc.TYPED_OUTPUTS].bool_param = typed_out
    response = stub.ModelInfer(message, timeout=10)
    assert (response.id, response.outputs[0].datatype, list(response.outputs[0].shape)) == (
        "round-trip", datatype, list(array.shape)
    )  # fmt: skip
    back = output_array(response, "T", array.dtype)
    if datatype == "BYTES":
        assert back.tolist() == array.tolist()
    else:
        assert back.astype(array.dtype).tobytes() == array.tobytes()


def test_stream_answers_in_order_with_ids_and_stays_open(channel: grpc.Channel) -> None:
    stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
    delays = [0.3, 0.0, 0.1]  # the first takes longest: answers still come in request order
    bodies = [request("sleepy", ("X", "FP32", np.array([d], np.float32)), id=f"s{i}") for i, d in enumerate(delays)]
    sent = [
        bodies[0].SerializeToString(),
        request("missing", ("X", "FP32", F), id="lost").SerializeToString(),
        bodies[1].SerializeToString(),
        b"\x0a\xff\xff",  # not a message at all
        request("echo", ("X", "FP16", F), typed=False, id="short").SerializeToString(),  # 16 bytes for FP16 [4]
        bodies[2].SerializeToString(),
    ]
    answers = [pb.ModelStreamInferResponse.FromString(body) for body in stream(iter(sent), timeout=10)]
    assert [answer.infer_response.id for answer in answers] == ["s0", "lost", "s1", "", "short", "s2"]
    assert [bool(answer.error_message) for answer in answers] == [False, True, False, True, True, False]
    assert answers[1].error_message.startswith("Request for unknown model: 'missing' is not found")
    assert answers[1].infer_response.model_name == "missing"
    assert "not a valid ModelInferRequest" in answers[3].error_message
    assert "input 'X' has 16 bytes of binary data, but FP16 of shape [4] takes 8 bytes" in answers[4].error_message
    for answer, delay in zip([answers[0], answers[2], answers[5]], delays, strict=True):
        assert output_array(answer.infer_response, "OUTPUT0", np.float32).tolist() == [np.float32(delay)]


# -- refusals -----------------------------------------------------------------------------------

F = np.zeros(4, np.float32)
RAW_F = F.tobytes()


def tensor(
    name: str = "X", datatype: str = "FP32", shape: Any = (4,), **fields: Any
) -> pb.ModelInferRequest.InferInputTensor:
    return pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype, shape=shape, **fields)


def typed(**contents: Any) -> pb.InferTensorContents:
    return pb.InferTensorContents(**contents)


# What only gRPC can send, and lying shapes whose refusal must allocate nothing; each with a piece of the
# message it is refused with (INVALID_ARGUMENT). What both wires can send is in tests/support/parity_cases.py.
BAD_REQUESTS: dict[str, tuple[pb.ModelInferRequest, str]] = {
    "more bytes than int64 counts": (
        pb.ModelInferRequest(model_name="echo", inputs=[tensor(shape=(2**62, 4))], raw_input_contents=[RAW_F]),
        "holds more bytes than int64 can count",
    ),
    "too few raw contents": (
        pb.ModelInferRequest(model_name="echo", inputs=[tensor("A"), tensor("B")], raw_input_contents=[RAW_F]),
        "the request has 1 raw_input_contents for 2 inputs; raw_input_contents[i] holds inputs[i]; "
        "no raw_input_contents for input 'B'",
    ),
    "raw contents for one of three": (
        pb.ModelInferRequest(
            model_name="echo", inputs=[tensor("A"), tensor("B"), tensor("C")], raw_input_contents=[RAW_F]
        ),
        "no raw_input_contents for inputs 'B', 'C'",
    ),
    "raw contents for one of twenty": (
        pb.ModelInferRequest(
            model_name="echo", inputs=[tensor(f"I{i}") for i in range(20)], raw_input_contents=[RAW_F]
        ),
        "no raw_input_contents for inputs 'I1', 'I2', 'I3', 'I4', 'I5', 'I6', 'I7', 'I8' and 11 more",
    ),
    "more raw contents than inputs": (
        pb.ModelInferRequest(model_name="echo", inputs=[tensor()], raw_input_contents=[RAW_F, RAW_F]),
        "the request has 2 raw_input_contents for 1 inputs",
    ),
    "no data": (pb.ModelInferRequest(model_name="echo", inputs=[tensor()]), "input 'X' has no data"),
    "raw and typed together": (
        pb.ModelInferRequest(
            model_name="echo", inputs=[tensor(contents=typed(fp32_contents=[0] * 4))], raw_input_contents=[RAW_F]
        ),
        # Triton's words first (clients match on them), then ours.
        "contents field must not be specified when using raw_input_contents for 'X' for model 'echo'; "
        "send every input one way",
    ),
    "wrong typed field": (
        pb.ModelInferRequest(model_name="echo", inputs=[tensor(contents=typed(fp64_contents=[0] * 4))]),
        "input 'X' is FP32, whose typed contents are fp32_contents, not fp64_contents",
    ),
    "typed FP16": (
        pb.ModelInferRequest(
            model_name="echo", inputs=[tensor(datatype="FP16", contents=typed(fp32_contents=[0] * 4))]
        ),
        "input 'X' is FP16, which has no typed contents; send raw_input_contents",
    ),
    "INT8 -129": (
        pb.ModelInferRequest(
            model_name="echo", inputs=[tensor(datatype="INT8", shape=(2,), contents=typed(int_contents=[1, -129]))]
        ),
        "input 'X': INT8 element 1 is -129, out of range [-128, 127]",
    ),
    "UINT8 256": (
        pb.ModelInferRequest(
            model_name="echo", inputs=[tensor(datatype="UINT8", shape=(1,), contents=typed(uint_contents=[256]))]
        ),
        "UINT8 element 0 is 256, out of range [0, 255]",
    ),
    "INT16 40000": (
        pb.ModelInferRequest(
            model_name="echo", inputs=[tensor(datatype="INT16", shape=(1,), contents=typed(int_contents=[40000]))]
        ),
        "INT16 element 0 is 40000, out of range [-32768, 32767]",
    ),
    "BYTES lying shape": (
        pb.ModelInferRequest(
            model_name="echo", inputs=[tensor(datatype="BYTES", shape=(2**40,))], raw_input_contents=[b"\0" * 8]
        ),
        "8 bytes cannot hold 1099511627776 BYTES elements",
    ),
    "not a protobuf": (None, "the request is not a valid ModelInferRequest"),  # sent as raw bytes below
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS), ids=str)
def test_bad_requests_are_invalid_argument_and_allocate_nothing(channel: grpc.Channel, case: str) -> None:
    message, text = BAD_REQUESTS[case]
    body = b"\x0a\xff\xff\xff\xff\x0f" if message is None else message.SerializeToString()
    call = channel.unary_unary(INFER)
    tracemalloc.start()
    try:
        error = refused(call, body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (error.code(), text in error.details()) == (INVALID, True), error.details()
    assert peak < 4 * 2**20  # no claimed shape allocated


def test_a_status_without_a_grpc_code_of_its_own_keeps_its_class(
    stub: inference_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    # The statuses STATUS_CODES maps are in tests/support/parity_cases.py, over both wires; a 418 is a client error.
    assert_refused(stub.ModelInfer, request("teapot", ("X", "FP32", F)), INVALID, "short and stout")


def test_status_codes_follow_the_error_classes() -> None:
    expected = {
        oip_asgi.BadRequest: "INVALID_ARGUMENT", oip_asgi.NotFound: "NOT_FOUND",
        oip_asgi.PayloadTooLarge: "RESOURCE_EXHAUSTED", oip_asgi.ModelError: "INTERNAL",
        oip_asgi.ModelNotReady: "UNAVAILABLE", oip_asgi.LengthRequired: "INVALID_ARGUMENT",
        oip_asgi.UnsupportedMediaType: "INVALID_ARGUMENT", oip_asgi.OIPError: "INTERNAL",
    }  # fmt: skip
    assert {cls: status_code(cls("x")).name for cls in expected} == expected


# -- hostile messages ---------------------------------------------------------------------------

VALID = request(
    "echo", ("A", "FP32", np.arange(6, dtype=np.float32).reshape(2, 3)), ("B", "BYTES", np.array([b"xy"], dtype=object))
)
VALID_BODY = VALID.SerializeToString()
SURVIVABLE = {grpc.StatusCode.OK, INVALID, grpc.StatusCode.NOT_FOUND}


def outcome(channel: grpc.Channel, body: bytes) -> grpc.StatusCode:
    try:
        channel.unary_unary(INFER)(body, timeout=10)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_every_truncation_is_refused_or_harmless(channel: grpc.Channel) -> None:
    codes = {cut: outcome(channel, VALID_BODY[:cut]) for cut in range(len(VALID_BODY))}
    assert set(codes.values()) <= SURVIVABLE
    raw_start = VALID_BODY.index(VALID.raw_input_contents[0]) - 2  # the raw contents are the last fields
    assert {codes[cut] for cut in range(raw_start + 1, len(VALID_BODY))} == {INVALID}
    assert outcome(channel, VALID_BODY) == grpc.StatusCode.OK


@given(
    flips=st.lists(st.tuples(st.integers(0, len(VALID_BODY) - 1), st.integers(0, 255)), min_size=1, max_size=6),
    extra=st.binary(max_size=16),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutated_requests_never_crash_the_server(
    channel: grpc.Channel, flips: list[tuple[int, int]], extra: bytes
) -> None:
    body = bytearray(VALID_BODY)
    for position, value in flips:
        body[position] = value
    assert outcome(channel, bytes(body) + extra) in SURVIVABLE


def test_a_shape_of_2_to_the_62_with_tiny_data_allocates_nothing(channel: grpc.Channel) -> None:
    lying = pb.ModelInferRequest(model_name="echo", inputs=[tensor(datatype="UINT8", shape=(2**31, 2**31))])
    lying.raw_input_contents.append(b"\0" * 64)
    assert outcome(channel, lying.SerializeToString()) == INVALID


# -- the server's options -----------------------------------------------------------------------


def test_messages_past_the_limit_are_resource_exhausted() -> None:
    app = oip_asgi.oip_app({"echo": echo}, max_body_size=2**20)
    big = np.zeros(2**20 // 4, np.float32)  # the REST limit's worth of tensor: gRPC takes it too
    with grpc_server(app) as address, grpc.insecure_channel(address) as channel:
        stub = inference_pb2_grpc.GRPCInferenceServiceStub(channel)
        assert stub.ModelInfer(request("echo", ("X", "FP32", big))).outputs[0].shape == [big.size]
        error = refused(stub.ModelInfer, request("echo", ("X", "FP32", np.zeros(2**19, np.float32))))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_expose_errors_false_hides_the_models_text() -> None:
    app = oip_asgi.oip_app({"fails": fails}, expose_errors=False)
    with grpc_server(app) as address, grpc.insecure_channel(address) as channel:
        error = refused(
            inference_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer, request("fails", ("X", "FP32", F))
        )
    assert error.code() == grpc.StatusCode.INTERNAL
    assert "no luck" not in error.details() and "error id" in error.details()


def test_a_cancelled_call_is_logged_as_499_as_rest_logs_a_client_that_left(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="oip_asgi.access")
    app = oip_asgi.oip_app({"sleepy": sleepy}, access_log=True)
    with grpc_server(app) as address, grpc.insecure_channel(address) as channel:
        call = inference_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer
        with pytest.raises(grpc.RpcError) as left:
            call(request("sleepy", ("X", "FP32", np.array([30], np.float32))), timeout=0.5)
        assert left.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        wait_until(lambda: caplog.records, "the access line")  # the server hears of it later, on its own thread
    assert [record.getMessage().split(" bytes_in")[0] for record in caplog.records] == [
        "model=sleepy version=1 status=499"
    ]


def test_interceptors_see_every_call() -> None:
    seen: list[str] = []

    class Recorder(grpc.aio.ServerInterceptor):  # type: ignore[misc]
        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            seen.append(details.method)
            return await continuation(details)

    with grpc_server(oip_asgi.oip_app({"echo": echo}), interceptors=[Recorder()]) as address:
        with grpc.insecure_channel(address) as channel:
            inference_pb2_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest())
    assert seen == ["/inference.GRPCInferenceService/ServerLive"]


@pytest.mark.slow
def test_tls(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {made.stderr.decode()[-200:]}")
    credentials = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
    with grpc_server(oip_asgi.oip_app({"echo": echo}), credentials=credentials) as address:
        port = address.rsplit(":", 1)[1]
        secure = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(f"localhost:{port}", secure) as channel:
            assert inference_pb2_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest()).live
        with grpc.insecure_channel(address) as channel:  # plaintext is not served
            error = refused(inference_pb2_grpc.GRPCInferenceServiceStub(channel).ServerLive, pb.ServerLiveRequest())
            assert error.code() == grpc.StatusCode.UNAVAILABLE


def test_health_checking(channel: grpc.Channel) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    health = health_pb2_grpc.HealthStub(channel)
    serving = health_pb2.HealthCheckResponse.SERVING
    assert health.Check(health_pb2.HealthCheckRequest(service="")).status == serving
    assert health.Check(health_pb2.HealthCheckRequest(service="liveness")).status == serving
    # The module's app holds a model that never loads: never ready, as ServerReady says.
    for service in ("readiness", "inference.GRPCInferenceService"):
        status = health.Check(health_pb2.HealthCheckRequest(service=service)).status
        assert status == health_pb2.HealthCheckResponse.NOT_SERVING
    error = refused(health.Check, health_pb2.HealthCheckRequest(service="other"))
    assert error.code() == grpc.StatusCode.NOT_FOUND


def test_health_says_serving_once_loaded() -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    app = oip_asgi.oip_app({"echo": echo})
    with grpc_server(app, health=True) as address, grpc.insecure_channel(address) as channel:
        check = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="readiness"))
        assert check.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_describes_the_service(channel: grpc.Channel) -> None:
    from google.protobuf.descriptor_pool import DescriptorPool
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    database = ProtoReflectionDescriptorDatabase(channel)
    assert {"inference.GRPCInferenceService", "grpc.health.v1.Health"} <= set(database.get_services())
    service = DescriptorPool(database).FindServiceByName("inference.GRPCInferenceService")
    assert "ModelStreamInfer" in [method.name for method in service.methods]


@pytest.mark.anyio
async def test_serving_stops_gracefully_and_lets_calls_in_flight_finish() -> None:
    entered = asyncio.Event()

    async def slow(X: np.ndarray) -> np.ndarray:
        entered.set()
        await asyncio.sleep(0.3)  # the subject: a call still running when the server is told to stop
        return X

    app = oip_asgi.oip_app({"slow": slow})
    async with oip_asgi.grpc.serving(app, "127.0.0.1:0", grace=5) as port:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        call = inference_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request("slow", ("X", "FP32", F)))
        await asyncio.wait_for(entered.wait(), 10)  # the call is in flight when the block ends
    response = await call
    np.testing.assert_array_equal(output_array(response, "OUTPUT0", np.float32), F)
    await channel.close()
    app.core.pool.shutdown()


@pytest.mark.anyio
async def test_a_port_in_use_fails_to_serve() -> None:
    app = oip_asgi.oip_app({"echo": echo})
    async with oip_asgi.grpc.serving(app, "127.0.0.1:0") as port:
        with pytest.raises(RuntimeError):
            async with oip_asgi.grpc.serving(app, f"127.0.0.1:{port}", options=[("grpc.so_reuseport", 0)]):
                pass


def test_server_is_unstarted_for_services_of_ones_own() -> None:
    async def main() -> bool:
        server = oip_asgi.grpc.server(oip_asgi.oip_app({"echo": echo}))
        port = oip_asgi.grpc.bind(server, "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                live = await inference_pb2_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest())
                return bool(live.live)
        finally:
            await server.stop(None)

    assert asyncio.run(main())
    with pytest.raises(ValueError, match="max_message_size"):
        oip_asgi.grpc.server(oip_asgi.oip_app({}), max_message_size=0)


def test_raw_contents_are_views_of_the_message() -> None:
    seen: dict[str, Any] = {}

    def look(X: np.ndarray) -> np.ndarray:
        seen["writeable"] = X.flags.writeable
        return X

    app = oip_asgi.oip_app({"look": look})
    with grpc_server(app) as address, grpc.insecure_channel(address) as channel:
        inference_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request("look", ("X", "FP32", F)))
    assert seen == {"writeable": False}


# -- large requests: raw contents split off the message unparsed (oip_asgi.grpc._codec.parse_request) ----

BIG = np.arange(oip_asgi.grpc._codec.SPLIT_ABOVE // 4 + 5, dtype=np.float32)
BIG_REQUEST = request("echo", ("A", "FP32", BIG), ("B", "BYTES", np.array([b"xy", b""], dtype=object)), id="big")
BIG_BODY = BIG_REQUEST.SerializeToString()


def key(number: int, wire: int) -> bytes:
    return oip_asgi.grpc._response.varint(number << 3 | wire)


def test_a_large_request_round_trips(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    response = stub.ModelInfer(BIG_REQUEST)
    assert response.id == "big"
    np.testing.assert_array_equal(output_array(response, "A", np.float32), BIG)
    assert output_array(response, "B").tolist() == [b"xy", b""]


def test_a_large_request_with_fields_in_any_order(channel: grpc.Channel) -> None:
    # Raw contents first, the inputs they belong to after them: protobuf's order is free.
    raw, header = raw_first(BIG_REQUEST)
    answer = channel.unary_unary(INFER)(raw + header, timeout=10)
    response = pb.ModelInferResponse.FromString(answer)
    np.testing.assert_array_equal(output_array(response, "A", np.float32), BIG)


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (BIG_BODY + key(8, 3), "is truncated"),  # a group that never ends
        (BIG_BODY + b"\xff" * 11, "a varint at byte"),
        (BIG_BODY + key(9, 1) + b"\0", "is truncated"),
        (BIG_BODY + key(1, 2) + b"\x05ab", "is truncated"),
        (BIG_BODY[:-3], "is truncated"),
        (BIG_BODY + key(0, 0) + b"\x00", "not a valid ModelInferRequest"),
    ],
    ids=["open group", "endless varint", "fixed64 cut", "string cut", "raw cut", "field zero"],
)
def test_malformed_large_requests_are_invalid_argument(channel: grpc.Channel, body: bytes, text: str) -> None:
    error = refused(channel.unary_unary(INFER), body)
    assert (error.code(), text in error.details()) == (INVALID, True), error.details()


# Unknown fields in group encoding (wire types 3 and 4), which protobuf skips: as a small message parsed
# by protobuf, and after a large one's raw contents, parsed by our reader, they get the same answer.
GROUPS = {
    "group": (key(15, 3) + key(1, 0) + b"\x07" + key(15, 4), grpc.StatusCode.OK),
    "nested groups": (
        key(15, 3) + key(300, 3) + key(2, 2) + b"\x02ab" + key(300, 4) + key(3, 5) + b"\0" * 4 + key(15, 4),
        grpc.StatusCode.OK,
    ),
    "group closed by another field's end tag": (key(15, 3) + key(16, 4), INVALID),
    "end tag with no group": (key(15, 4), INVALID),
}


@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("case", list(GROUPS), ids=str)
def test_unknown_groups_are_skipped_as_protobuf_skips_them(channel: grpc.Channel, case: str, size: str) -> None:
    field, code = GROUPS[case]
    body = (VALID_BODY if size == "small" else BIG_BODY) + field
    assert (len(body) < oip_asgi.grpc._codec.SPLIT_ABOVE) == (size == "small")
    assert outcome(channel, body) == code


def test_client_strings_in_grpc_only_messages_are_cut(stub: inference_pb2_grpc.GRPCInferenceServiceStub) -> None:
    # Past grpcio's 16 KiB limit on a status message, the client would get RESOURCE_EXHAUSTED instead.
    # The names both wires echo are in tests/support/parity_cases.py.
    long = "p" * 20_000
    cut = f"'{'p' * 100}...{'p' * 100}' (20000 characters)"
    message = request("parameters", ("X", "FP32", np.ones(2, np.float32)))
    message.parameters[long].SetInParent()
    assert_refused(stub.ModelInfer, message, INVALID, f"parameter {cut} has no value")
    message = request("parameters", ("X", "FP32", np.ones(2, np.float32)))
    message.parameters[oip_asgi.grpc.TYPED_OUTPUTS].string_param = long
    assert_refused(stub.ModelInfer, message, INVALID, f"must be a boolean, got {cut}")
    message = request("described", ("X", "FP32", np.zeros((1, 3), np.float32)))
    message.outputs.add(name="X").parameters["classification"].string_param = long
    assert_refused(stub.ModelInfer, message, INVALID, f"got string_param {cut}")
    message = request("echo", (long, "FP32", F), ("B", "FP32", F))
    message.inputs[0].contents.fp32_contents.extend([0] * 4)
    assert_refused(stub.ModelInfer, message, INVALID, f"using raw_input_contents for {cut} for model 'echo'")
    message = request("echo", ("A", "FP32", F), (long, "FP32", F))
    del message.raw_input_contents[1]
    assert_refused(stub.ModelInfer, message, INVALID, f"no raw_input_contents for input {cut}")


def raw_first(message: pb.ModelInferRequest) -> tuple[bytes, bytes]:
    """The message's raw contents as fields, and the rest serialized after them."""
    raw = b"".join(
        key(7, 2) + oip_asgi.grpc._response.varint(len(content)) + content for content in message.raw_input_contents
    )
    header = pb.ModelInferRequest()
    header.CopyFrom(message)
    header.ClearField("raw_input_contents")
    return raw, header.SerializeToString()


def test_every_truncation_of_a_large_request_is_refused(channel: grpc.Channel) -> None:
    raw, header = raw_first(BIG_REQUEST)
    body = raw + header  # the fields after the raw contents are the ones a cut can leave half-parsed
    cuts = [*range(oip_asgi.grpc._codec.SPLIT_ABOVE, len(raw), 997), *range(len(raw), len(body))]
    codes = {outcome(channel, body[:cut]) for cut in cuts}
    assert INVALID in codes and codes <= {INVALID, grpc.StatusCode.NOT_FOUND}  # a cut before the name: no model


@given(flips=st.lists(st.tuples(st.integers(0, 120), st.integers(0, 255)), min_size=1, max_size=4))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutated_large_requests_never_crash_the_server(channel: grpc.Channel, flips: list[tuple[int, int]]) -> None:
    body = bytearray(BIG_BODY)
    for position, value in flips:
        body[position] = value
    assert outcome(channel, bytes(body)) in SURVIVABLE


def test_large_raw_inputs_are_not_copied() -> None:
    seen: dict[str, Any] = {}

    def look(X: np.ndarray) -> np.ndarray:
        base = X
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        seen["base"] = type(base).__name__
        return X

    with grpc_server(oip_asgi.oip_app({"look": look})) as address, grpc.insecure_channel(address) as channel:
        inference_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request("look", ("X", "FP32", BIG)))
    assert seen == {"base": "memoryview"}  # a view of the received message's bytes


def test_a_streams_access_line_counts_the_responses_and_bytes_it_sent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="oip_asgi.access")

    def three(X: np.ndarray) -> Any:
        for step in range(3):
            yield {"Y": X + step}

    model = Model(three, inputs=[TensorSpec("X", "FP32", [-1])], outputs=[TensorSpec("Y", "FP32", [-1])])
    app = oip_asgi.oip_app({"three": model}, access_log=True)
    with grpc_server(app) as address, grpc.insecure_channel(address) as channel:
        stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        sent = [request("three", ("X", "FP32", F), typed=False, id="t").SerializeToString()]
        answers = list(stream(iter(sent), timeout=10))
        wait_until(lambda: any(record.name == "oip_asgi.access" for record in caplog.records), "the access line")
    assert [output_array(pb.ModelStreamInferResponse.FromString(answer).infer_response, "Y", np.float32)[0]
            for answer in answers] == [F[0], F[0] + 1, F[0] + 2]  # fmt: skip
    (line,) = [record.getMessage() for record in caplog.records if record.name == "oip_asgi.access"]
    assert f" bytes_out={sum(map(len, answers))} responses=3 " in line and " status=200 " in line
