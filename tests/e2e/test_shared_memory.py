"""Triton's system shared memory against a real `oip-asgi serve`: tritonclient's HTTP and gRPC clients with
`tritonclient.utils.shared_memory`, as Triton's own shm examples use them (INT32 and BYTES tensors, regions
reused between requests and requests without them), Triton's words for a region in use at unregister, and
perf_analyzer's `--shared-memory system` where bench/perf_analyzer.py has set it up."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_perf_analyzer import BINARY, ENVIRONMENT, inference_count, missing
from tests.support.servers import HOST, free_port, serving
from tests.support.waiting import wait_until, written

pytestmark = pytest.mark.slow
httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
shm = pytest.importorskip("tritonclient.utils.shared_memory")
from tritonclient import utils  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

SIZE = 64  # bytes of an INT32 [1, 16] tensor


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """The example models and the gated `simple` through `oip-asgi serve --grpc-port`: REST and gRPC addresses."""
    gate = tmp_path_factory.mktemp("gate")
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "tests.apps.gate:models", "--port", str(port), "--grpc-port", str(grpc_port)]
    environment = {"OIP_GATE_ENTERED": str(gate / "entered"), "OIP_GATE_OPEN": str(gate / "open")}
    with serving(argv, port, env=environment) as server:
        yield server.address, f"{HOST}:{grpc_port}", gate


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, served: tuple[str, str, Path]) -> Iterator[Any]:
    rest, grpc_address, _ = served
    made = (
        httpclient.InferenceServerClient(rest)
        if request.param == "http"
        else grpcclient.InferenceServerClient(grpc_address)
    )
    made.unregister_system_shared_memory()
    made.unregister_cuda_shared_memory()  # no region here: it answers as a Triton without GPUs
    yield made
    made.unregister_system_shared_memory()
    made.close()


def kit(client: Any) -> Any:
    return httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient


def region(name: str, size: int) -> Any:
    handle = shm.create_shared_memory_region(name, f"/oip_e2e_{name}", size)
    return handle


def output_of(result: Any, name: str) -> tuple[str, list[int]]:
    output = result.get_output(name)
    if isinstance(output, dict):
        return output["datatype"], output["shape"]
    return output.datatype, list(output.shape)


def no_data(result: Any, name: str) -> bool:
    output = result.get_output(name)
    if isinstance(output, dict):
        return "data" not in output and "binary_data_size" not in output.get("parameters", {})
    response = result.get_response()
    index = [output.name for output in response.outputs].index(name)
    return bool(response.raw_output_contents[index] == b"")


def test_tensors_go_through_regions_and_regions_are_reused(client: Any) -> None:
    module = kit(client)
    handles = [region("input", 2 * SIZE), region("output", 2 * SIZE)]
    try:
        first, second = np.arange(16, dtype=np.int32), np.ones(16, dtype=np.int32)
        shm.set_shared_memory_region(handles[0], [first])
        shm.set_shared_memory_region(handles[0], [second], offset=SIZE)
        client.register_system_shared_memory("input", "/oip_e2e_input", 2 * SIZE)
        client.register_system_shared_memory("output", "/oip_e2e_output", 2 * SIZE)
        inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
        outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
        for round_ in range(3):  # shared memory, then the same objects without it, then with it again
            in_memory = round_ != 1
            if in_memory:
                inputs[0].set_shared_memory("input", SIZE)
                inputs[1].set_shared_memory("input", SIZE, offset=SIZE)
                outputs[0].set_shared_memory("output", SIZE)
                outputs[1].set_shared_memory("output", SIZE, offset=SIZE)
            else:
                inputs[0].set_data_from_numpy(first.reshape(1, 16) * 3)
                inputs[1].set_data_from_numpy(second.reshape(1, 16))
                outputs[0].unset_shared_memory()
                outputs[1].unset_shared_memory()
            result = client.infer("simple", inputs, outputs=outputs)
            assert output_of(result, "OUTPUT0") == ("INT32", [1, 16])
            if in_memory:
                assert no_data(result, "OUTPUT0")  # answered without data, as Triton answers
                total = shm.get_contents_as_numpy(handles[1], np.int32, [1, 16])
                difference = shm.get_contents_as_numpy(handles[1], np.int32, [1, 16], offset=SIZE)
                assert total.tolist() == [(first + second).tolist()]
                assert difference.tolist() == [(first - second).tolist()]
            else:
                assert result.as_numpy("OUTPUT0").tolist() == [(first * 3 + second).tolist()]
        status = client.get_system_shared_memory_status()
        names = [entry["name"] for entry in status] if isinstance(status, list) else list(status.regions)
        assert sorted(names) == ["input", "output"]
    finally:
        client.unregister_system_shared_memory()
        for handle in handles:
            shm.destroy_shared_memory_region(handle)


def test_bytes_tensors_in_regions(client: Any) -> None:
    module = kit(client)
    left = np.array([str(value).encode() for value in range(16)], dtype=object).reshape(1, 16)
    right = np.array([b"1"] * 16, dtype=object).reshape(1, 16)
    serialized = [utils.serialize_byte_tensor(tensor) for tensor in (left, right)]
    sizes = [utils.serialized_byte_size(tensor) for tensor in serialized]
    handles = [region("text0", sizes[0]), region("text1", sizes[1]), region("text_out", 256)]
    try:
        for index, name in enumerate(("text0", "text1")):
            shm.set_shared_memory_region(handles[index], [serialized[index]])
            client.register_system_shared_memory(name, f"/oip_e2e_{name}", sizes[index])
        client.register_system_shared_memory("text_out", "/oip_e2e_text_out", 256)
        inputs = [module.InferInput("INPUT0", [1, 16], "BYTES"), module.InferInput("INPUT1", [1, 16], "BYTES")]
        inputs[0].set_shared_memory("text0", sizes[0])
        inputs[1].set_shared_memory("text1", sizes[1])
        outputs = [module.InferRequestedOutput("OUTPUT0")]
        outputs[0].set_shared_memory("text_out", 256)
        result = client.infer("simple_string", inputs, outputs=outputs)
        datatype, shape = output_of(result, "OUTPUT0")
        total = shm.get_contents_as_numpy(handles[2], utils.triton_to_np_dtype(datatype), shape)
        assert total.tolist() == [[str(value + 1).encode() for value in range(16)]]
    finally:
        client.unregister_system_shared_memory()
        for handle in handles:
            shm.destroy_shared_memory_region(handle)


def test_wrong_requests_get_triton_s_words_and_the_server_serves_on(client: Any) -> None:
    module = kit(client)
    handles = [region("small", 32)]
    try:
        with pytest.raises(InferenceServerException, match="Unable to open shared memory region"):
            client.register_system_shared_memory("absent", "/oip_e2e_never_made", 8)
        with pytest.raises(InferenceServerException, match="invalid args"):
            client.register_system_shared_memory("small", "/oip_e2e_small", 64)
        with pytest.raises(InferenceServerException, match="names no POSIX shared-memory object"):
            client.register_system_shared_memory("escape", "/../../etc/hostname", 8)
        client.register_system_shared_memory("small", "/oip_e2e_small", 32)
        inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
        inputs[0].set_shared_memory("small", 32)
        inputs[1].set_shared_memory("nowhere", SIZE)
        with pytest.raises(InferenceServerException, match="input byte size mismatch for input 'INPUT0'"):
            client.infer("simple", inputs)
        inputs[0].set_data_from_numpy(np.zeros((1, 16), dtype=np.int32))
        with pytest.raises(InferenceServerException, match="Unable to find shared memory region: 'nowhere'"):
            client.infer("simple", inputs)
        inputs[1].set_data_from_numpy(np.ones((1, 16), dtype=np.int32))
        output = module.InferRequestedOutput("OUTPUT0")
        output.set_shared_memory("small", 32)
        with pytest.raises(InferenceServerException, match="should be at least 64 bytes to hold the results"):
            client.infer("simple", inputs, outputs=[output])
        assert client.infer("simple", inputs).as_numpy("OUTPUT1").tolist() == [[-1] * 16]
        assert client.is_server_live()
    finally:
        client.unregister_system_shared_memory()
        for handle in handles:
            shm.destroy_shared_memory_region(handle)


def test_a_region_in_use_is_not_unregistered(served: tuple[str, str, Path]) -> None:
    """A request in the model (gRPC's async_infer: grpcio's own thread) holds its region; REST's unregister waits."""
    rest, grpc_address, gate = served
    first, second = grpcclient.InferenceServerClient(grpc_address), httpclient.InferenceServerClient(rest)
    handles = [region("busy", SIZE)]
    answers: list[Any] = []
    try:
        first.register_system_shared_memory("busy", "/oip_e2e_busy", SIZE)
        inputs = [grpcclient.InferInput("INPUT0", [1, 16], "INT32"), grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
        inputs[0].set_shared_memory("busy", SIZE)
        inputs[1].set_data_from_numpy(np.ones((1, 16), dtype=np.int32))
        first.async_infer("gated", inputs, callback=lambda result, error: answers.append(error or result))
        written(gate / "entered", "the gated model called")
        with pytest.raises(InferenceServerException, match=r"Cannot unregister shared memory region 'busy', it is "):
            second.unregister_system_shared_memory("busy")
        with pytest.raises(InferenceServerException, match="the following system shared memory regions: busy ,"):
            second.unregister_system_shared_memory()
        (gate / "open").write_text("open\n")
        wait_until(lambda: answers, "the gated request answered")
        assert answers[0].as_numpy("OUTPUT0").tolist() == [[1] * 16]
        second.unregister_system_shared_memory("busy")
        with pytest.raises(InferenceServerException, match="Unable to find system shared memory region: 'busy'"):
            second.get_system_shared_memory_status("busy")
    finally:
        (gate / "open").write_text("open\n")
        wait_until(lambda: answers, "the gated request answered")
        first.unregister_system_shared_memory()
        for handle in handles:
            shm.destroy_shared_memory_region(handle)
        first.close()
        second.close()


@pytest.mark.skipif(missing(BINARY) is not None, reason=missing(BINARY) or "")
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_analyzer_runs_with_system_shared_memory(served: tuple[str, str, Path], protocol: str) -> None:
    rest, grpc_address, _ = served
    before = inference_count(rest, "identity_fp32")
    command = [
        str(BINARY), "-m", "identity_fp32", "-u", grpc_address if protocol == "grpc" else rest, "-i", protocol,
        "--shared-memory", "system", "--output-shared-memory-size", "4096", "--shape", "INPUT0:1024",
        "-p", "400", "-s", "1000", "-r", "3", "--concurrency-range", "1",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=ENVIRONMENT, timeout=60, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "error" not in output.lower(), output
    assert inference_count(rest, "identity_fp32") > before
    status = httpclient.InferenceServerClient(rest)
    try:
        assert status.get_system_shared_memory_status() == []  # it unregistered what it registered
    finally:
        status.close()
