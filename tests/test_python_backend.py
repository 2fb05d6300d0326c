"""``pb_utils`` in-process: its values and tables, the auto-complete config's rules, Triton's error codes as
statuses, and a response sender's final flag."""

from __future__ import annotations

import json
import weakref

import numpy as np
import pytest

from oip_asgi._declarations.python_backend import host
from oip_asgi._declarations.python_backend import utils as pb_utils
from oip_asgi._declarations.python_backend.errors import answer_of


def test_tensors_and_lookups() -> None:
    tensor = pb_utils.Tensor("A", np.array([1, 2], np.int32))
    request = pb_utils.InferenceRequest(model_name="m", inputs=[tensor], requested_output_names=["B"])
    assert pb_utils.get_input_tensor_by_name(request, "A") is tensor
    assert pb_utils.get_input_tensor_by_name(request, "missing") is None
    response = pb_utils.InferenceResponse([pb_utils.Tensor("B", np.zeros(1))], parameters={"k": 1})
    assert pb_utils.get_output_tensor_by_name(response, "B").name() == "B"
    assert json.loads(response.parameters()) == {"k": 1} and not response.has_error()
    with pytest.raises(TypeError, match="numpy array"):
        pb_utils.Tensor("A", [1, 2])
    with pytest.raises(pb_utils.TritonModelException, match="response sender"):
        request.get_response_sender()


def test_type_tables_match_tritons_numbers() -> None:
    assert pb_utils.triton_string_to_numpy("TYPE_FP32") is np.float32
    assert pb_utils.numpy_to_triton_type(np.int32) == 8 and pb_utils.triton_to_numpy_type(13) is np.object_
    assert pb_utils.numpy_to_triton_type(np.bytes_) == 13
    encoded = pb_utils.serialize_byte_tensor(np.array([b"ab", b"c"], dtype=np.object_))
    assert encoded is not None
    assert pb_utils.deserialize_bytes_tensor(encoded.tobytes()).tolist() == [b"ab", b"c"]


def test_auto_complete_rules() -> None:
    declared = {"name": "m", "max_batch_size": 4, "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}]}
    config = pb_utils.ModelConfig(json.dumps(declared))
    config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})  # agrees: nothing added
    config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [2]})
    config.set_dynamic_batching()
    config.set_model_transaction_policy({"decoupled": False})
    assert [tensor["name"] for tensor in config.as_dict()["input"]] == ["X"]
    assert config.as_dict()["dynamic_batching"] == {}
    with pytest.raises(ValueError, match="configuration expects datatype TYPE_FP32 for input 'X'"):
        config.add_input({"name": "X", "data_type": "TYPE_INT32", "dims": [2]})
    with pytest.raises(ValueError, match="specified max_batch_size 4"):
        config.set_max_batch_size(2)
    with pytest.raises(ValueError, match="missing 'dims'"):
        config.add_input({"name": "Z", "data_type": "TYPE_FP32"})


@pytest.mark.parametrize(
    ("code", "status", "grpc_code"),
    [(pb_utils.TritonError.INTERNAL, 500, "INTERNAL"), (pb_utils.TritonError.NOT_FOUND, 404, "NOT_FOUND"),
     (pb_utils.TritonError.UNAVAILABLE, 503, "UNAVAILABLE"), (pb_utils.TritonError.UNSUPPORTED, 501, "UNIMPLEMENTED"),
     (pb_utils.TritonError.INVALID_ARG, 400, "INVALID_ARGUMENT"), (pb_utils.TritonError.UNKNOWN, 400, "UNKNOWN"),
     (pb_utils.TritonError.ALREADY_EXISTS, 400, "ALREADY_EXISTS"), (pb_utils.TritonError.CANCELLED, 400, "CANCELLED"),
     (None, 500, "INTERNAL")],
)  # fmt: skip
def test_triton_codes_become_tritons_statuses(code: int | None, status: int, grpc_code: str) -> None:
    error = answer_of(code, "why")
    assert (error.status_code, error.grpc_code, error.message) == (status, grpc_code, "why")


def test_a_sender_takes_nothing_after_its_final_response() -> None:
    sent: list[tuple[object, bool]] = []

    def sink(response: object, final: bool) -> None:
        sent.append((response, final))

    sender = pb_utils.InferenceResponseSender(sink)
    with pytest.raises(pb_utils.TritonModelException, match="must set TRITONSERVER_RESPONSE_COMPLETE_FINAL"):
        sender.send()
    sender.send(pb_utils.InferenceResponse())
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    with pytest.raises(pb_utils.TritonModelException, match="already sent its final response"):
        sender.send(pb_utils.InferenceResponse())
    assert [final for _, final in sent] == [False, True]


def test_server_calls_outside_a_model_name_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "_live", weakref.WeakSet())  # no server of another test counts
    with pytest.raises(RuntimeError, match="pb_utils.load_model needs the server that serves the calling model"):
        pb_utils.load_model("m")
