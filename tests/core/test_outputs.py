"""A model's outputs made into what the wires send (`_core/inference.py`): an output whose array was found to go
out as it is skips the casts and checks on later responses (a stream's every token), and is still cast and
checked the moment it comes otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from oip_asgi import Model, TensorSpec
from oip_asgi._core.inference import model_outputs
from oip_asgi._core.request import DecodedRequest, RequestedOutput
from oip_asgi._core.serving import ServedModel
from oip_asgi._core.workers import WorkerPool
from oip_asgi._declarations.errors import ModelError


@pytest.fixture()
def served() -> ServedModel:
    outputs = [TensorSpec("text", "BYTES", [-1]), TensorSpec("count", "UINT32", [1]), TensorSpec("x", "FP32", [-1])]
    return ServedModel("m", Model(lambda **inputs: inputs, outputs=outputs), WorkerPool(1))


def sent(model: ServedModel, result: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    outputs, _ = model_outputs(model, DecodedRequest({}, outputs=[RequestedOutput(name) for name in result]), result)
    return {output.name: output.array for output in outputs}


def test_an_array_that_goes_out_as_it_is_is_sent_as_it_is_again(served: ServedModel) -> None:
    count, x, text = np.array([3], np.uint32), np.array([1.5], np.float32), np.array([b"a"], dtype=object)
    for _ in range(3):
        arrays = sent(served, {"count": count, "x": x, "text": text})
        assert arrays["count"] is count and arrays["x"] is x and arrays["text"].tolist() == [b"a"]
    assert set(served.output_forms) == {"count", "x", "text"}


def test_what_changes_is_cast_or_refused_as_on_the_first_response(served: ServedModel) -> None:
    sent(
        served,
        {"count": np.array([3], np.uint32), "x": np.array([1.5], np.float32), "text": np.array([b"a"], dtype=object)},
    )
    cast = sent(served, {"x": np.array([2.5, 3.5], np.float64)})["x"]  # another dtype and shape: cast, as ever
    assert cast.dtype == np.float32 and cast.tolist() == [2.5, 3.5]
    assert sent(served, {"text": np.array(["é"], dtype=object)})["text"].tolist() == ["é".encode()]
    with pytest.raises(ModelError, match="output 'text' is BYTES but element 0 is int"):
        sent(served, {"text": np.array([5], dtype=object)})  # the same dtype and shape: its element checked
    with pytest.raises(ModelError, match="with shape \\[2\\], declared \\[1\\]"):
        sent(served, {"count": np.array([1, 2], np.uint32)})
    with pytest.raises(ModelError, match="has dtype int64, which does not cast to UINT32"):
        sent(served, {"count": np.array([-1], np.int64)})
    with pytest.raises(ModelError, match="undeclared outputs: 'extra'"):
        sent(served, {"count": np.array([3], np.uint32), "extra": np.array([1])})


def test_an_undeclared_output_is_remembered_with_its_own_datatype_and_only_so_many_are() -> None:
    model = ServedModel("m", Model(lambda **inputs: inputs), WorkerPool(1))

    def datatypes(result: dict[str, np.ndarray]) -> dict[str, str]:
        outputs, _ = model_outputs(model, DecodedRequest({}), result)
        return {output.name: output.datatype for output in outputs}

    x = np.array([1.5], np.float32)
    for _ in range(2):
        assert datatypes({"x": x}) == {"x": "FP32"}
    assert set(model.output_forms) == {"x"}
    # Another dtype under the same name is its own datatype, never the first one's.
    assert datatypes({"x": np.array([1], np.int64)}) == {"x": "INT64"}
    assert datatypes({"x": np.array([1.5], np.float64)}) == {"x": "FP64"}
    assert datatypes({"x": x}) == {"x": "FP32"}
    # The names come from what the model returns (an identity's, from the request): a bounded number is kept.
    for index in range(100):
        assert datatypes({f"y{index}": x}) == {f"y{index}": "FP32"}
    assert len(model.output_forms) == 16  # the first 16 names kept, no more
