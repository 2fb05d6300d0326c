"""gRPC end to end: real server processes (the REST+gRPC example under uvicorn, and `oip-asgi serve
--grpc-port`), driven by NVIDIA's tritonclient.grpc, sync and asyncio."""

from __future__ import annotations

import asyncio
import queue
import re
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("oip_asgi.grpc")
grpcclient = pytest.importorskip("tritonclient.grpc")
import tritonclient.grpc.aio as aioclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tests.support.servers import HOST, free_port, serving  # noqa: E402
from tests.support.strategies import DTYPES  # noqa: E402
from tests.support.waiting import HANG  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def example() -> Iterator[tuple[str, str]]:
    """examples/grpc_app.py under uvicorn: its REST and its gRPC addresses."""
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "uvicorn", "examples.grpc_app:app", "--host", HOST, "--port", str(port), "--log-level", "warning"]
    with serving(argv, port, env={"OIP_GRPC_ADDRESS": f"{HOST}:{grpc_port}"}) as server:
        yield server.address, f"{HOST}:{grpc_port}"


@pytest.fixture(scope="module")
def triton(example: tuple[str, str]) -> Iterator[grpcclient.InferenceServerClient]:
    client = grpcclient.InferenceServerClient(example[1])
    yield client
    client.close()


@pytest.fixture(scope="module")
def served() -> Iterator[grpcclient.InferenceServerClient]:
    """tests/apps/grpc.py through `oip-asgi serve --grpc-port`: models that fail, have versions, echo parameters."""
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "tests.apps.grpc:models", "--port", str(port), "--grpc-port", str(grpc_port)]
    # "broken" never loads, so the server is never ready: wait for liveness instead.
    with serving(argv, port, ready_path="/v2/health/live"):
        client = grpcclient.InferenceServerClient(f"{HOST}:{grpc_port}")
        yield client
        client.close()


def test_serving_says_the_address_it_bound_under_plain_uvicorn() -> None:
    port = free_port()
    argv = ["-m", "uvicorn", "examples.grpc_app:app", "--host", HOST, "--port", str(port), "--log-level", "warning"]
    # Port 0: only the line can tell where gRPC listens. uvicorn leaves the oip_asgi loggers bare.
    with serving(argv, port, env={"OIP_GRPC_ADDRESS": f"{HOST}:0"}) as server:
        # In uvicorn's format, as uvicorn's own lines (issue 35), though its --log-level hides its INFO lines.
        (said,) = re.findall(rf"^INFO: +oip-asgi gRPC running on {HOST}:(\d+)$", server.output(), re.M)
        client = grpcclient.InferenceServerClient(f"{HOST}:{said}")
        try:
            assert int(said) != 0 and client.is_server_ready()
        finally:
            client.close()


def tensor(name: str, array: np.ndarray, datatype: str) -> grpcclient.InferInput:
    infer_input = grpcclient.InferInput(name, list(array.shape), datatype)
    infer_input.set_data_from_numpy(array)
    return infer_input


def test_tritonclient_reads_health_and_metadata(triton: grpcclient.InferenceServerClient) -> None:
    # That REST says the same is tests/support/parity_cases.py's to check; here, NVIDIA's client reads our answers.
    assert triton.is_server_live() and triton.is_server_ready()
    assert triton.is_model_ready("simple") and triton.is_model_ready("simple", "1")
    assert not triton.is_model_ready("missing") and not triton.is_model_ready("simple", "9")
    metadata = triton.get_model_metadata("animals", as_json=True)
    assert (metadata["name"], metadata["versions"]) == ("animals", ["1"])
    assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in metadata["inputs"]] == [
        ("FEATURES", "FP32", [-1, 4])
    ]
    server = triton.get_server_metadata(as_json=True)
    assert server["name"] == "oip-asgi" and {"binary_tensor_data", "classification"} <= set(server["extensions"])


def test_simple_with_request_id(triton: grpcclient.InferenceServerClient) -> None:
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), -3, dtype=np.int32)
    result = triton.infer("simple", [tensor("INPUT0", a, "INT32"), tensor("INPUT1", b, "INT32")], request_id="42")
    assert result.get_response().id == "42"
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    only = triton.infer(
        "simple",
        [tensor("INPUT0", a, "INT32"), tensor("INPUT1", b, "INT32")],
        outputs=[grpcclient.InferRequestedOutput("OUTPUT1")],
    )
    assert [output.name for output in only.get_response().outputs] == ["OUTPUT1"]


@pytest.mark.parametrize("datatype", [*DTYPES, "BYTES"], ids=str)
def test_identity_every_datatype(triton: grpcclient.InferenceServerClient, datatype: str) -> None:
    if datatype == "BYTES":
        data = np.array([b"ascii", "ünïcode".encode(), b"", b"\0\xff"], dtype=np.object_)
    elif datatype == "BOOL":
        data = np.array([True, False, True])
    else:
        dtype = np.dtype(DTYPES[datatype])
        info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
        data = np.concatenate([np.array([info.min, info.max], dtype), (np.arange(100) % 7).astype(dtype)])
    result = triton.infer(f"identity_{datatype.lower()}", [tensor("INPUT0", data, datatype)])
    back = result.as_numpy("OUTPUT0")
    if datatype == "BYTES":
        assert back.tolist() == data.tolist()
    else:
        assert back.dtype == data.dtype
        np.testing.assert_array_equal(back, data)


def test_classification_with_labels(triton: grpcclient.InferenceServerClient) -> None:
    features = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], dtype=np.float32)
    output = grpcclient.InferRequestedOutput("SCORES", class_count=2)
    result = triton.infer("animals", [tensor("FEATURES", features, "FP32")], outputs=[output]).as_numpy("SCORES")
    assert result.shape == (2, 2)
    assert result.ravel().tolist() == [b"2.0:0:cat", b"0.5:2:bird", b"3.0:2:bird", b"0.2:1:dog"]


def test_text_model_bytes_both_ways(triton: grpcclient.InferenceServerClient) -> None:
    words = np.array(["héllo".encode(), b"oip"], dtype=np.object_)
    result = triton.infer("text", [tensor("TEXT", words, "BYTES")])
    assert result.as_numpy("UPPER").tolist() == [word.upper() for word in words]
    assert result.as_numpy("LENGTH").tolist() == [6, 3]


def test_a_16_mib_tensor_both_ways(triton: grpcclient.InferenceServerClient) -> None:
    data = np.random.default_rng(0).standard_normal(4 * 2**20, dtype=np.float32)  # 16 MiB
    result = triton.infer("identity_fp32", [tensor("INPUT0", data, "FP32")])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_errors_from_the_example(triton: grpcclient.InferenceServerClient) -> None:
    x = np.array([4.0, -1.0], dtype=np.float32)
    cases = [
        (
            lambda: triton.infer("missing", [tensor("X", x, "FP32")]),
            "StatusCode.NOT_FOUND",
            "Request for unknown model: 'missing' is not found",
        ),
        (lambda: triton.get_model_metadata(""), "StatusCode.NOT_FOUND", "Request for unknown model: '' is not found"),
        (lambda: triton.infer("sqrt", [tensor("X", x, "FP32")]), "StatusCode.INVALID_ARGUMENT", "X[1] is negative"),
        (
            lambda: triton.infer("sqrt", [tensor("Y", x, "FP32")]),
            "StatusCode.INVALID_ARGUMENT",
            "unexpected input 'Y'; model 'sqrt' takes X",
        ),
        (
            lambda: triton.infer("sqrt", [tensor("X", x.astype(np.float64), "FP64")]),
            "StatusCode.INVALID_ARGUMENT",
            "input 'X' has datatype FP64, model 'sqrt' expects FP32",
        ),
        (
            lambda: triton.infer("sqrt", [tensor("X", x, "FP32")], outputs=[grpcclient.InferRequestedOutput("Z")]),
            "StatusCode.INVALID_ARGUMENT",
            "unknown output 'Z'; model 'sqrt' produces Y",
        ),
    ]
    for call, status, text in cases:
        with pytest.raises(InferenceServerException) as raised:
            call()
        assert (raised.value.status(), text in raised.value.message()) == (status, True), raised.value.message()


def test_errors_versions_and_parameters_through_oip_asgi_serve(served: grpcclient.InferenceServerClient) -> None:
    x = np.array([1.0, 2.0], dtype=np.float32)
    for model, status, text in [
        ("fails", "StatusCode.INTERNAL", "model 'fails' raised ValueError: no luck"),
        ("busy", "StatusCode.UNAVAILABLE", "warming up"),
        ("broken", "StatusCode.UNAVAILABLE", "failed to load: RuntimeError: weights missing"),
    ]:
        with pytest.raises(InferenceServerException) as raised:
            served.infer(model, [tensor("X", x, "FP32")])
        assert (raised.value.status(), text in raised.value.message()) == (status, True), raised.value.message()
    assert not served.is_server_ready() and not served.is_model_ready("broken")

    for version, added in (("1", 1), ("2", 2), ("", 2)):
        result = served.infer("versioned", [tensor("X", x, "FP32")], model_version=version)
        assert result.get_response().model_version == (version or "2")
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x + added)

    parameters = {"flag": True, "count": 7, "name": "ünï"}  # tritonclient sends no double parameters
    response = served.infer("parameters", [tensor("X", x, "FP32")], parameters=parameters).get_response()
    assert {k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in response.parameters.items()} == parameters
    metadata = served.get_model_metadata("described", as_json=True)
    assert metadata["name"] == "described"  # tritonclient's message has no properties field; our stub reads them
    output = grpcclient.InferRequestedOutput("X", class_count=2)
    output._output.parameters["classification"].int64_param = -2  # tritonclient itself sends only positive ones
    with pytest.raises(InferenceServerException) as raised:
        served.infer("described", [tensor("X", np.zeros((1, 3), np.float32), "FP32")], outputs=[output])
    assert raised.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "parameter classification must be a positive integer" in raised.value.message()


def test_stream_answers_in_order_and_survives_errors(triton: grpcclient.InferenceServerClient) -> None:
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    triton.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        for index in range(20):
            x = np.array([float(index), -1.0 if index % 5 == 3 else 4.0], dtype=np.float32)
            triton.async_stream_infer("sqrt", [tensor("X", x, "FP32")], request_id=str(index))
        got = [answers.get(timeout=HANG) for _ in range(20)]
    finally:
        triton.stop_stream()
    for index, (result, error) in enumerate(got):
        if index % 5 == 3:
            assert result is None and "sqrt takes non-negative X" in error.message()
        else:
            assert error is None and result.get_response().id == str(index)
            np.testing.assert_allclose(result.as_numpy("Y"), np.sqrt([index, 4.0]))


def test_aio_client_and_its_stream(example: tuple[str, str]) -> None:
    async def main() -> None:
        client = aioclient.InferenceServerClient(example[1])
        try:
            assert await client.is_server_ready()
            assert (await client.get_model_metadata("simple", as_json=True))["name"] == "simple"

            async def requests() -> Any:
                for index in range(10):
                    text = aioclient.InferInput("TEXT", [1], "BYTES")
                    text.set_data_from_numpy(np.array([f"item {index}".encode()], dtype=np.object_))
                    model = "missing" if index == 4 else "text"
                    yield {"model_name": model, "inputs": [text], "request_id": str(index)}

            seen = []
            async for result, error in client.stream_infer(requests()):
                seen.append(error.message() if error else result.as_numpy("UPPER").tolist())
            assert seen[4].startswith("Request for unknown model: 'missing' is not found")
            assert [answer for index, answer in enumerate(seen) if index != 4] == [
                [f"ITEM {index}".encode()] for index in range(10) if index != 4
            ]
        finally:
            await client.close()

    asyncio.run(main())


def test_32_concurrent_aio_requests_share_batches(example: tuple[str, str]) -> None:
    async def main() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        client = aioclient.InferenceServerClient(example[1])
        try:

            async def one(index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                rows = np.arange(4 * (1 + index % 2), dtype=np.float32).reshape(-1, 4) + index
                infer_input = aioclient.InferInput("X", list(rows.shape), "FP32")
                infer_input.set_data_from_numpy(rows)
                result = await client.infer("batched", [infer_input], request_id=str(index))
                assert result.get_response().id == str(index)
                return rows, result.as_numpy("Y"), result.as_numpy("BATCH_ROWS")

            return await asyncio.gather(*(one(index) for index in range(32)))
        finally:
            await client.close()

    answers = asyncio.run(main())
    for rows, doubled, batch_rows in answers:
        np.testing.assert_array_equal(doubled, rows * 2)
        assert len(set(batch_rows.tolist())) == 1 and rows.shape[0] <= batch_rows[0] <= 32
    assert max(batch_rows[0] for _, _, batch_rows in answers) > 2  # gRPC requests share the model's calls too


def test_rest_and_grpc_share_the_models(example: tuple[str, str], triton: grpcclient.InferenceServerClient) -> None:
    before = httpx.get(f"http://{example[0]}/v2/models/identity_int64/stats").json()["model_stats"][0]
    data = np.arange(5, dtype=np.int64)
    triton.infer("identity_int64", [tensor("INPUT0", data, "INT64")])
    after = httpx.get(f"http://{example[0]}/v2/models/identity_int64/stats").json()["model_stats"][0]
    assert after["inference_count"] == before["inference_count"] + 1  # counted in the same statistics


def test_tritonclient_grpc_reads_the_statistics_rest_serves(
    example: tuple[str, str], triton: grpcclient.InferenceServerClient
) -> None:
    def counts() -> tuple[int, int]:
        (entry,) = triton.get_inference_statistics("identity_fp64", as_json=True)["model_stats"]
        # protobuf's JSON writes uint64 as strings, and leaves zeros out.
        return int(entry.get("inference_count", 0)), int(entry.get("execution_count", 0))

    data = np.arange(3, dtype=np.float64)
    before = counts()
    for _ in range(2):
        triton.infer("identity_fp64", [tensor("INPUT0", data, "FP64")])
    with pytest.raises(InferenceServerException):
        triton.infer("identity_fp64", [tensor("INPUT0", data.astype(np.float32), "FP32")])  # counted nowhere
    assert counts() == (before[0] + 2, before[1] + 2)
    (rest,) = httpx.get(f"http://{example[0]}/v2/models/identity_fp64/stats").json()["model_stats"]
    (entry,) = triton.get_inference_statistics("identity_fp64", "1", as_json=True)["model_stats"]
    assert (entry["name"], entry["version"]) == ("identity_fp64", "1")
    assert int(entry["inference_count"]) == rest["inference_count"]
    assert int(entry["last_inference"]) == rest["last_inference"]
    assert int(entry["inference_stats"]["success"]["count"]) == rest["inference_stats"]["success"]["count"]
    assert [int(batch["batch_size"]) for batch in entry["batch_stats"]] == [1]
    every = triton.get_inference_statistics(as_json=True)["model_stats"]
    assert {item["name"] for item in every} >= {"identity_fp64", "simple", "batched"}
    with pytest.raises(InferenceServerException, match="Request for unknown model: 'nope' is not found") as unknown:
        triton.get_inference_statistics("nope")
    assert unknown.value.status() == "StatusCode.NOT_FOUND"
