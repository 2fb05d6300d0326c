"""Triton's system shared memory on gRPC, with tritonclient's gRPC client against an in-process server: the RPCs,
ModelInfer with inputs and outputs in regions (answered as Triton answers: the output with an empty raw content),
and Triton's codes and words for what is wrong (the whole extension against `oip-asgi serve`: tests/e2e)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import numpy as np
import pytest

from examples.models import models as example_models
from oip_asgi import oip_app
from oip_asgi.grpc import inference_pb2 as pb
from tests.support.grpc import INFER, grpc_server
from tests.support.shared_memory import Object, shm_object

grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

SIZE = 64


@pytest.fixture
def served() -> Iterator[tuple[str, Object, Object]]:
    with (
        grpc_server(oip_app(example_models)) as address,
        shm_object(2 * SIZE) as inputs,
        shm_object(2 * SIZE) as outputs,
    ):
        inputs.write(np.arange(16, dtype=np.int32))
        inputs.write(np.ones(16, dtype=np.int32), SIZE)
        yield address, inputs, outputs


def simple(client: object, **offsets: int) -> tuple[list[object], list[object]]:
    inputs = [grpcclient.InferInput("INPUT0", [1, 16], "INT32"), grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("input", SIZE)
    inputs[1].set_shared_memory("input", SIZE, offset=offsets.get("input1", SIZE))
    outputs = [grpcclient.InferRequestedOutput("OUTPUT0"), grpcclient.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("output", offsets.get("output_size", SIZE))
    outputs[1].set_shared_memory("output", SIZE, offset=SIZE)
    return inputs, outputs


def test_regions_register_tell_and_serve_model_infer(served: tuple[str, Object, Object]) -> None:
    address, inputs, outputs = served
    client = grpcclient.InferenceServerClient(address)
    try:
        client.unregister_system_shared_memory()
        client.unregister_cuda_shared_memory()  # no region, as in Triton without GPUs
        client.register_system_shared_memory("input", inputs.key, 2 * SIZE)
        client.register_system_shared_memory("output", outputs.key, 2 * SIZE, offset=0)
        status = client.get_system_shared_memory_status()
        assert {name: (region.key, region.offset, region.byte_size) for name, region in status.regions.items()} == {
            "input": (inputs.key, 0, 128),
            "output": (outputs.key, 0, 128),
        }
        assert list(client.get_system_shared_memory_status("input").regions) == ["input"]
        inputs_, outputs_ = simple(client)
        result = client.infer("simple", inputs_, outputs=outputs_)
        response = result.get_response()
        assert [(output.name, output.datatype, list(output.shape)) for output in response.outputs] == [
            ("OUTPUT0", "INT32", [1, 16]),
            ("OUTPUT1", "INT32", [1, 16]),
        ]
        assert list(response.raw_output_contents) == [b"", b""]  # as Triton: no data for an output in a region
        assert outputs.array(np.int32, [2, 16]).tolist() == [list(range(1, 17)), list(range(-1, 15))]
        assert client.get_cuda_shared_memory_status().regions == {}
        client.unregister_system_shared_memory("input")
        assert list(client.get_system_shared_memory_status().regions) == ["output"]
        client.unregister_system_shared_memory()
    finally:
        client.close()


def test_triton_s_codes_and_words_for_what_is_wrong(served: tuple[str, Object, Object]) -> None:
    address, inputs, outputs = served
    client = grpcclient.InferenceServerClient(address)
    try:
        with pytest.raises(InferenceServerException, match="Unable to open shared memory region") as refused:
            client.register_system_shared_memory("input", "/oip_test_never_made", 8)
        assert refused.value.status() == "StatusCode.INVALID_ARGUMENT"
        with pytest.raises(InferenceServerException, match="names no POSIX shared-memory object"):
            client.register_system_shared_memory("input", "/../../etc/passwd", 8)
        client.register_system_shared_memory("input", inputs.key, 2 * SIZE)
        client.register_system_shared_memory("output", outputs.key, 2 * SIZE)
        with pytest.raises(InferenceServerException, match="already in manager") as exists:
            client.register_system_shared_memory("input", inputs.key, 2 * SIZE)
        assert exists.value.status() == "StatusCode.ALREADY_EXISTS"
        with pytest.raises(InferenceServerException, match="Unable to find system shared memory region: 'x'") as gone:
            client.get_system_shared_memory_status("x")
        assert gone.value.status() == "StatusCode.NOT_FOUND"
        for offsets, message in (
            ({"input1": 2 * SIZE}, "Invalid offset for shared memory region: 'input'"),
            ({"input1": SIZE + 1}, r"Invalid offset \+ byte size for shared memory region: 'input'"),
            ({"output_size": 32}, r"output 'OUTPUT0' \(32 bytes\) should be at least 64 bytes"),
        ):
            with pytest.raises(InferenceServerException, match=message) as wrong:
                inputs_, outputs_ = simple(client, **offsets)
                client.infer("simple", inputs_, outputs=outputs_)
            assert wrong.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert outputs.read(2 * SIZE) == bytes(2 * SIZE)
        with pytest.raises(InferenceServerException, match="it runs no GPU code") as cuda:
            client.register_cuda_shared_memory("gpu", b"\0" * 64, 0, 8)
        assert cuda.value.status() == "StatusCode.UNIMPLEMENTED"
        inputs_, outputs_ = simple(client)
        client.infer("simple", inputs_, outputs=outputs_)  # serving on, nothing left held
        client.unregister_system_shared_memory()
    finally:
        client.close()


def test_parameters_of_the_wrong_type_or_alone_are_refused_in_triton_s_words(
    served: tuple[str, Object, Object],
) -> None:
    address, inputs, _ = served
    with grpc.insecure_channel(address) as channel:
        register = channel.unary_unary("/inference.GRPCInferenceService/SystemSharedMemoryRegister")
        register(pb.SystemSharedMemoryRegisterRequest(name="input", key=inputs.key, byte_size=128).SerializeToString())
        infer = channel.unary_unary(INFER)
        cases = [
            ({"shared_memory_region": pb.InferParameter(int64_param=1)}, "expected string_param."),
            (
                {"shared_memory_region": pb.InferParameter(string_param="input"),
                 "shared_memory_byte_size": pb.InferParameter(uint64_param=64)},
                "invalid value type for 'shared_memory_byte_size' parameter for tensor 'INPUT0', expected int64_param.",
            ),
            (
                {"shared_memory_offset": pb.InferParameter(int64_param=0)},
                "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter "
                "for tensor 'INPUT0'",
            ),
        ]  # fmt: skip
        for parameters, message in cases:
            request = pb.ModelInferRequest(model_name="identity_int32")
            request.inputs.add(name="INPUT0", datatype="INT32", shape=[16], parameters=parameters)
            with pytest.raises(grpc.RpcError) as refused:
                infer(request.SerializeToString())
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert message in (refused.value.details() or "")
        # An input in a region beside one in raw_input_contents: raw contents count the others only.
        request = pb.ModelInferRequest(model_name="simple")
        request.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 16]).parameters[
            "shared_memory_region"
        ].string_param = "input"
        request.inputs[0].parameters["shared_memory_byte_size"].int64_param = 64
        request.inputs.add(name="INPUT1", datatype="INT32", shape=[1, 16])
        request.raw_input_contents.append(np.full(16, 3, dtype=np.int32).tobytes())
        response = pb.ModelInferResponse.FromString(infer(request.SerializeToString()))
        assert np.frombuffer(response.raw_output_contents[0], np.int32).tolist() == [v + 3 for v in range(16)]
        request.inputs[1].contents.int_contents.extend([0] * 16)  # contents beside raw contents: refused as ever
        with pytest.raises(grpc.RpcError, match="contents field must not be specified"):
            infer(request.SerializeToString())
        request.inputs[0].contents.int_contents.extend([0] * 16)
        with pytest.raises(grpc.RpcError, match="unexpected 'content' provided when using shared memory"):
            infer(request.SerializeToString())
