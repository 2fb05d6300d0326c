"""The inference responses gRPC writes directly (`grpc/_response.py`) are byte for byte those protobuf writes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from oip_asgi._core.inference import OutputTensor
from oip_asgi._core.responding import Reply
from oip_asgi.grpc import _response
from oip_asgi.grpc import inference_pb2 as pb
from oip_asgi.grpc._codec import encode_response, serialize

OUTPUTS: dict[str, list[tuple[str, Any, str]]] = {
    "FP32 [1,16]": [("y", np.arange(16, dtype=np.float32).reshape(1, 16), "FP32")],
    "a scalar": [("y", np.array(2.5, dtype=np.float64), "FP64")],
    "empty": [("y", np.zeros((0, 3), dtype=np.int32), "INT32")],
    "dimensions past one byte's varint": [("y", np.zeros((1, 300), dtype=np.uint8), "UINT8")],
    "not contiguous": [("y", np.arange(12, dtype=np.int64).reshape(3, 4).T, "INT64")],
    "BOOL and FP16": [("a", np.array([True, False]), "BOOL"), ("b", np.ones(3, dtype=np.float16), "FP16")],
    "one BYTES element": [("text_output", np.array([b"token"], dtype=object), "BYTES")],
    "several BYTES elements": [("t", np.array([[b"a", b""], [b"ccc", b"d" * 200]], dtype=object), "BYTES")],
    "a name past 127 bytes, not ASCII": [("é" * 100, np.ones(2, dtype=np.float32), "FP32")],
    "no name": [("", np.ones(2, dtype=np.float32), "FP32")],
    "raw contents past 127 bytes": [("y", np.ones(1000, dtype=np.float32), "FP32")],
    "no outputs": [],
}
HEADS = {
    "an id": ("model", "1", "request-7"),
    "no id": ("model", "1", None),
    "no version": ("model", "", "x"),
    "an id past 127 bytes": ("m" * 130, "12", "i" * 300),
}


@pytest.mark.parametrize("outputs", OUTPUTS.values(), ids=OUTPUTS.keys())
@pytest.mark.parametrize("head", HEADS.values(), ids=HEADS.keys())
@pytest.mark.parametrize("field", [None, 2], ids=["ModelInfer", "ModelStreamInfer"])
def test_direct_bytes_are_protobufs(outputs: list[tuple[str, Any, str]], head: tuple[str, str, str | None],
                                    field: int | None) -> None:  # fmt: skip
    name, version, request_id = head
    tensors = [OutputTensor(output, array, datatype) for output, array, datatype in outputs]
    model = SimpleNamespace(name=name, version=version)
    reply = Reply(model, SimpleNamespace(id=request_id), tensors, None)  # type: ignore[arg-type]
    written = _response.response_bytes(_response.head(name, version, request_id), tensors, field)
    assert written == serialize(*encode_response(reply, None, False), field)
    message = pb.ModelStreamInferResponse.FromString(written).infer_response if field else None
    response = message or pb.ModelInferResponse.FromString(written)
    assert (response.model_name, response.model_version, response.id) == (name, version, request_id or "")
    assert [(output.name, output.datatype, list(output.shape)) for output in response.outputs] == [
        (output, datatype, list(array.shape)) for output, array, datatype in outputs
    ]


def test_outputs_with_parameters_are_left_to_protobuf() -> None:
    tensor = OutputTensor("y", np.ones(2, dtype=np.float32), "FP32", parameters={"rows": 2})
    assert _response.response_bytes(_response.head("m", "1", None), [tensor]) is None


def test_the_kept_headers_stay_bounded() -> None:
    for index in range(_response._KEPT + 10):
        tensor = OutputTensor("y", np.ones((1, index), dtype=np.float32), "FP32")
        _response.response_bytes(_response.head("m", str(index), None), [tensor])
    assert len(_response._headers) <= _response._KEPT and len(_response.heads) <= _response._KEPT
