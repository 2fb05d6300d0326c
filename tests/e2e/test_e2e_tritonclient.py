"""The README's example server in a real uvicorn process, driven by NVIDIA's tritonclient."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

from tests.support.strategies import DTYPES  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def triton(example_server: str) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(example_server)


def test_health_and_metadata(triton: httpclient.InferenceServerClient) -> None:
    assert triton.is_server_live() and triton.is_server_ready()
    assert triton.is_model_ready("simple") and triton.is_model_ready("simple", "1")
    assert not triton.is_model_ready("missing")
    server = triton.get_server_metadata()
    assert {"binary_tensor_data", "classification"} <= set(server["extensions"])
    metadata = triton.get_model_metadata("simple")
    assert metadata["inputs"][0] == {"name": "INPUT0", "datatype": "INT32", "shape": [-1, 16]}


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_simple_add_sub(triton: httpclient.InferenceServerClient, binary: bool) -> None:
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.int32)
    inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"), httpclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(a, binary_data=binary)
    inputs[1].set_data_from_numpy(b, binary_data=binary)
    outputs = [httpclient.InferRequestedOutput(name, binary_data=binary) for name in ("OUTPUT0", "OUTPUT1")]
    result = triton.infer("simple", inputs, outputs=outputs, request_id="7")
    assert result.get_response()["id"] == "7"
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("datatype", [*DTYPES, "BYTES"], ids=str)
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_identity_every_datatype(triton: httpclient.InferenceServerClient, datatype: str, binary: bool) -> None:
    if datatype == "BYTES":
        data = np.array(["ascii", "ünïcode", ""], dtype=np.object_)
    elif datatype == "BOOL":
        data = np.array([True, False, True])
    else:  # thousands of numbers (JSON this large is parsed by simdjson), the dtype's extremes among them
        dtype = np.dtype(DTYPES[datatype])
        info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
        steps = np.arange(2000) % 100 * (1.5 if dtype.kind == "f" else 1)
        data = np.concatenate([np.array([info.min, info.max], dtype), steps.astype(dtype)])
    tensor = httpclient.InferInput("INPUT0", [len(data)], datatype)
    tensor.set_data_from_numpy(data, binary_data=binary)
    output = httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)
    result = triton.infer(f"identity_{datatype.lower()}", [tensor], outputs=[output]).as_numpy("OUTPUT0")
    if datatype == "BYTES":
        assert [item if isinstance(item, bytes) else item.encode() for item in result] == [s.encode() for s in data]
    else:
        np.testing.assert_array_equal(result, data)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_classification_with_labels(triton: httpclient.InferenceServerClient, binary: bool) -> None:
    features = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], dtype=np.float32)
    tensor = httpclient.InferInput("FEATURES", [2, 4], "FP32")
    tensor.set_data_from_numpy(features, binary_data=binary)
    output = httpclient.InferRequestedOutput("SCORES", binary_data=binary, class_count=2)
    result = triton.infer("animals", [tensor], outputs=[output]).as_numpy("SCORES")
    assert result.shape == (2, 2)
    assert [item.decode() if isinstance(item, bytes) else item for item in result.ravel()] == [
        "2.0:0:cat", "0.5:2:bird", "3.0:2:bird", "0.2:1:dog",
    ]  # fmt: skip


def test_text_model_and_compression(triton: httpclient.InferenceServerClient) -> None:
    tensor = httpclient.InferInput("TEXT", [2], "BYTES")
    tensor.set_data_from_numpy(np.array([b"hello", "grüße".encode()], dtype=np.object_))
    result = triton.infer(
        "text", [tensor], request_compression_algorithm="gzip", response_compression_algorithm="deflate"
    )
    assert result.as_numpy("UPPER").tolist() == [b"HELLO", "grüße".encode().upper()]
    assert result.as_numpy("LENGTH").tolist() == [5, 7]


def test_errors_reach_the_client(triton: httpclient.InferenceServerClient) -> None:
    tensor = httpclient.InferInput("INPUT0", [1, 15], "INT32")
    tensor.set_data_from_numpy(np.zeros((1, 15), np.int32))
    with pytest.raises(InferenceServerException, match=r"shape \[1, 15\], model 'simple' expects \[-1, 16\]"):
        triton.infer("simple", [tensor])
    with pytest.raises(InferenceServerException, match="Request for unknown model: 'nope' is not found"):
        triton.infer("nope", [tensor])
    assert triton.is_server_live()


def test_raw_binary_request_against_the_real_server(example_server: str) -> None:
    values = np.arange(5, dtype=np.float32)
    response = httpx.post(
        f"http://{example_server}/v2/models/identity_fp32/infer",
        content=values.tobytes(),
        headers={"Inference-Header-Content-Length": "0"},
    )
    assert response.status_code == 200
    length = int(response.headers["inference-header-content-length"])
    assert response.headers["content-type"] == "application/octet-stream"
    assert np.frombuffer(response.content[length:], np.float32).tolist() == values.tolist()


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_a_model_refusing_its_input_is_a_400_with_its_message(
    triton: httpclient.InferenceServerClient, binary: bool
) -> None:
    tensor = httpclient.InferInput("X", [3], "FP32")
    tensor.set_data_from_numpy(np.array([4.0, -1.0, 9.0], dtype=np.float32), binary_data=binary)
    with pytest.raises(InferenceServerException) as refused:
        triton.infer("sqrt", [tensor])
    assert refused.value.status() == "400"
    assert refused.value.message() == "sqrt takes non-negative X; X[1] is negative"
    tensor = httpclient.InferInput("X", [3], "FP32")
    tensor.set_data_from_numpy(np.array([4.0, 9.0, 0.0], dtype=np.float32), binary_data=binary)
    np.testing.assert_array_equal(triton.infer("sqrt", [tensor]).as_numpy("Y"), [2.0, 3.0, 0.0])


def test_64_concurrent_aio_requests_to_a_batched_model_each_get_their_own_rows(example_server: str) -> None:
    aio = pytest.importorskip("tritonclient.http.aio")

    async def main() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        client = aio.InferenceServerClient(example_server, conn_limit=64)
        try:

            async def one(index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                rows = np.arange(4 * (1 + index % 2), dtype=np.float32).reshape(-1, 4) + index
                tensor = aio.InferInput("X", list(rows.shape), "FP32")
                tensor.set_data_from_numpy(rows, binary_data=index % 3 != 0)
                result = await client.infer("batched", [tensor])
                return rows, result.as_numpy("Y"), result.as_numpy("BATCH_ROWS")

            return await asyncio.gather(*(one(index) for index in range(64)))
        finally:
            await client.close()

    answers = asyncio.run(main())
    for rows, doubled, batch_rows in answers:
        np.testing.assert_array_equal(doubled, rows * 2)  # its own rows, whatever batch they rode in
        assert len(set(batch_rows.tolist())) == 1 and rows.shape[0] <= batch_rows[0] <= 32
    assert max(batch_rows[0] for _, _, batch_rows in answers) > 2  # requests did share calls


def test_fp16_binary(triton: httpclient.InferenceServerClient) -> None:
    data = np.array([0.5, 1.25, -3.0], dtype=np.float16)
    tensor = httpclient.InferInput("INPUT0", [3], "FP16")
    tensor.set_data_from_numpy(data, binary_data=True)
    result = triton.infer("identity_fp16", [tensor])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_the_protocol_has_a_swagger_ui_page_on_the_host(example_server: str) -> None:
    page = httpx.get(f"http://{example_server}/docs/v2")
    assert page.status_code == 200 and "'/v2/openapi.json'" in page.text and "swagger-ui" in page.text
    document = httpx.get(f"http://{example_server}/v2/openapi.json").json()
    assert document["servers"] == [{"url": "/v2"}]  # Swagger UI's "try it out" reaches the mount
    assert "/models/{model_name}/infer" in document["paths"]


def test_exact_prefix_and_host_route(example_server: str) -> None:
    response = httpx.get(f"http://{example_server}/v2", follow_redirects=False)
    assert response.status_code == 200 and response.json()["name"] == "oip-asgi"
    assert httpx.get(f"http://{example_server}/").json()["message"].startswith("the Open Inference Protocol")
