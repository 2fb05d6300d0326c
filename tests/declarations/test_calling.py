"""`Calling`: how the core calls a model, declared on the `Model` (a user's model declares nothing, a model
file's runner computes only, a Triton Python model takes requests on its instances and says when it is ready)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oip_asgi import Model, TensorSpec
from oip_asgi._core.inline import FUNCTION_STREAK
from oip_asgi._core.serving import ServedModel
from oip_asgi._core.workers import WorkerPool
from oip_asgi._declarations.calling import BY_KEYWORD, COMPUTES_ONLY, Calling
from oip_asgi._declarations.repository import RepositoryError, read_model

SPECS = {"inputs": [TensorSpec("x", "INT32", [-1])], "outputs": [TensorSpec("y", "INT32", [-1])]}


def identity(x: np.ndarray) -> np.ndarray:
    return x


def test_a_model_written_in_python_is_called_by_keyword_and_options_list_how() -> None:
    model = Model(identity, **SPECS)
    assert model.calling is BY_KEYWORD
    assert model.options()["calling"] is BY_KEYWORD
    assert model.replace(calling=COMPUTES_ONLY).calling is COMPUTES_ONLY


def test_a_model_files_model_computes_only_and_keeps_it_when_replaced() -> None:
    model = Model.from_file("missing.onnx", lazy=True)  # not read until it loads
    assert model.calling == COMPUTES_ONLY
    assert model.replace(version="2").calling == COMPUTES_ONLY
    served = ServedModel("m", model, WorkerPool()).inline
    assert served is not None and served.needed == 0  # a library computes: measured cheap is enough
    function = ServedModel("m", Model(identity, **SPECS), WorkerPool()).inline
    assert function is not None and function.needed == FUNCTION_STREAK  # arbitrary code: a streak first
    for kept in (model.replace(inline=False), Model.from_file("missing.onnx", lazy=True, inline=False)):
        assert kept.inline is False and ServedModel("m", kept, WorkerPool()).inline is None


def test_a_calling_is_checked() -> None:
    with pytest.raises(ValueError, match="instance_count must be at least 1"):
        Calling(instance_count=0)
    with pytest.raises(TypeError, match="ready must be callable"):
        Calling(ready=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="calling must be a Calling"):
        Model(identity, calling={"takes_requests": True})  # type: ignore[arg-type]


TRITON = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def is_ready(self):
        return False

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "X")]) for r in requests]
"""


def _triton(root: Path, config: str) -> Path:
    (root / "m" / "1").mkdir(parents=True)
    (root / "m" / "1" / "model.py").write_text(TRITON)
    (root / "m" / "config.pbtxt").write_text('backend: "python"\n' + config)
    return root


def test_a_triton_python_model_takes_requests_on_its_instances_and_is_ready_as_they_say(tmp_path: Path) -> None:
    read = read_model(_triton(tmp_path, "instance_group [{ count: 3, kind: KIND_CPU }]\n"), "m")
    model = read.versions[0]
    calling = model.calling
    assert calling.takes_requests and not calling.computes_only and calling.instance_count == 3
    assert calling.ready is not None
    assert model.load is not None
    model.load()
    try:
        assert calling.ready() is False  # its instances' is_ready()
    finally:
        assert model.unload is not None
        model.unload()


def test_a_triton_python_model_whose_config_reshapes_is_refused_with_why(tmp_path: Path) -> None:
    config = (
        'input [ { name: "X", data_type: TYPE_FP32, dims: [ 2, 2 ], reshape: { shape: [ 4 ] } } ]\n'
        'output [ { name: "X", data_type: TYPE_FP32, dims: [ 4 ] } ]\n'
    )
    with pytest.raises(RepositoryError, match="does not reshape a Triton Python model's tensors"):
        read_model(_triton(tmp_path, config), "m")
