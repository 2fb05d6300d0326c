"""``pb_utils`` in-process: its values and tables, the auto-complete config's rules, Triton's error codes as
statuses, and a response sender's final flag."""

from __future__ import annotations

import asyncio
import json
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oip_asgi import oip_app
from oip_asgi._declarations.python_backend import host
from oip_asgi._declarations.python_backend import utils as pb_utils
from oip_asgi._declarations.python_backend.errors import answer_of
from tests.support.client import client


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


# What pb_utils named before it became a thin module over smaller ones: Triton's names, and two of ours.
TRITON_NAMES = {
    "InferenceRequest", "InferenceResponse", "InferenceResponseSender", "Logger", "Metric", "MetricFamily",
    "ModelConfig", "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END", "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL", "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL", "TRITON_STRING_TO_NUMPY", "Tensor", "TritonError", "TritonModelException",
    "deserialize_bytes_tensor", "get_input_config_by_name", "get_input_tensor_by_name", "get_output_config_by_name",
    "get_output_tensor_by_name", "is_model_ready", "load_model", "numpy_to_triton_type", "serialize_byte_tensor",
    "triton_string_to_numpy", "triton_to_numpy_type", "unload_model", "using_decoupled_model_transaction_policy",
}  # fmt: skip


def test_pb_utils_names_what_it_always_named() -> None:
    assert set(pb_utils.__all__) == TRITON_NAMES
    assert TRITON_NAMES | {"BLSRequest", "datatype_of"} <= set(dir(pb_utils))


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


def test_server_calls_outside_a_model_name_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "_live", weakref.WeakSet())  # no server of another test counts
    with pytest.raises(RuntimeError, match="pb_utils.load_model needs the server that serves the calling model"):
        pb_utils.load_model("m")


HEADER = "import json\nimport numpy as np\nimport triton_python_backend_utils as pb_utils\n\n"
DOUBLE = """
class TritonPythonModel:
    def initialize(self, args):
        self.factor = int(json.loads(args["model_config"])["parameters"]["factor"]["string_value"])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                                                            * self.factor)]) for r in requests]
"""
CALLER = """
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            answer = pb_utils.InferenceRequest(model_name="times2", inputs=[x], requested_output_names=["Y"]).exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", answer.output_tensors()[0].as_numpy())]))
        return out
"""


def _repository(root: Path, factor: int) -> Path:
    for name, body in (("times2", DOUBLE), ("caller", CALLER)):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(HEADER + body)
    # The caller's target multiplies by its own server's factor.
    config = f'backend: "python"\nparameters {{ key: "factor" value {{ string_value: "{factor}" }} }}\n'
    (root / "times2" / "config.pbtxt").write_text(config)
    return root


async def _call(http: Any, name: str) -> Any:
    body = {"inputs": [{"name": "X", "datatype": "INT32", "shape": [2], "data": [1, 2]}]}
    response = await http.post(f"/models/{name}/infer", json=body)
    assert response.status_code == 200, response.text
    return response.json()["outputs"][0]["data"]


@pytest.mark.anyio
async def test_bls_reaches_its_own_server_and_a_pool_of_one_thread_does_not_deadlock(tmp_path: Path) -> None:
    # Two servers in one process, each with one worker thread: the caller's exec() waits on a thread
    # while its target needs one, and each server's caller reaches its own "times2".
    first = oip_app(model_repository=_repository(tmp_path / "a", 2), max_threads=1)
    second = oip_app(model_repository=_repository(tmp_path / "b", 3), max_threads=1)
    async with client(first) as one, client(second) as other:
        await first.load()
        await second.load()
        assert await _call(one, "caller") == [2, 4]
        assert await _call(other, "caller") == [3, 6]
        answers = await asyncio.gather(*(_call(one, "caller") for _ in range(4)))
        assert answers == [[2, 4]] * 4


def test_instance_groups_complete_and_name_as_triton() -> None:
    from oip_asgi._declarations.python_backend.instances import completed_groups, instance_specs

    assert completed_groups({}, "m") == [{"name": "m_0", "kind": "KIND_CPU", "count": 1}]
    groups = completed_groups(
        {"instance_group": [{"count": 2}, {"name": "g", "kind": "KIND_GPU", "gpus": [0, 1]}, {"kind": "KIND_MODEL"}]},
        "m",
    )
    specs = instance_specs(groups, "m")
    assert [(spec.name, spec.kind) for spec in specs] == [
        ("m_0_0", "CPU"), ("m_0_1", "CPU"), ("g_0", "CPU"), ("g_0", "CPU"), ("m_2_0", "MODEL")
    ]  # fmt: skip
    with pytest.raises(ValueError, match="count -1"):
        instance_specs([{"name": "m_0", "kind": "KIND_CPU", "count": -1}], "m")


PICKY = """
class TritonPythonModel:
    made = []

    def initialize(self, args):
        TritonPythonModel.made.append(self)
        if args["model_instance_name"] == "m_0_2":
            raise RuntimeError("out of memory on the third")

    def finalize(self):
        self.finalized = True

    def execute(self, requests):
        return []
"""


def test_a_failing_instance_finalizes_those_made_and_instance_group_is_no_warning(tmp_path: Path) -> None:
    from oip_asgi._declarations.repository import read_model

    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.py").write_text(HEADER + PICKY)
    (tmp_path / "m" / "config.pbtxt").write_text('backend: "python"\ninstance_group [{ count: 3, kind: KIND_CPU }]\n')
    read = read_model(tmp_path, "m")
    assert read.warnings == []
    model = read.versions[0]
    assert model.load is not None
    with pytest.raises(RuntimeError, match="third"):
        model.load()
    made = read.modules[next(iter(read.modules))].TritonPythonModel.made
    # The two initialized are finalized; the one whose initialize failed was never initialized.
    assert [getattr(instance, "finalized", False) for instance in made] == [True, True, False]
