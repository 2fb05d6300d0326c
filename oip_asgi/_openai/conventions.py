"""What a served model must declare to be reachable here, and its request built the way that model reads it.

The LLM convention is Triton's vLLM-backend model contract: ``text_input`` (BYTES, one element) in,
``text_output`` (BYTES) out, and, when declared, ``stream`` (BOOL), ``sampling_parameters`` (BYTES, a
JSON object) and ``exclude_input_in_output`` (BOOL), each of one element. The embedding convention is
one BYTES input of shape ``[-1]`` (one text each) and one FP32 output of shape ``[-1, d]``.
A model must declare its tensors: one that declares none tells nothing to follow a convention by.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._core.request import DecodedRequest, RequestedOutput
from .._core.serving import ServedModel
from .._declarations.errors import quoted
from .._declarations.spec import TensorSpec
from .errors import UnsuitableModel

TEXT_INPUT, TEXT_OUTPUT = "text_input", "text_output"
# The optional inputs of the convention, and the datatype each must have.
_OPTIONAL = {"stream": "BOOL", "sampling_parameters": "BYTES", "exclude_input_in_output": "BOOL"}
_LLM = (
    "the LLM convention (inputs text_input BYTES [1] and optionally stream BOOL [1], sampling_parameters "
    "BYTES [1], exclude_input_in_output BOOL [1]; output text_output BYTES)"
)
_EMBEDDING = "the embedding convention (one BYTES input of shape [-1], one FP32 output of shape [-1, d])"


def _lacks(model: ServedModel, convention: str, what: str) -> UnsuitableModel:
    return UnsuitableModel(f"model {quoted(model.name)} does not follow {convention}: {what}")


def _one_element(spec: TensorSpec) -> list[int]:
    """`spec`'s shape holding one element (its variable dimensions 1), or [] when it cannot."""
    shape = [1 if dim == -1 else dim for dim in spec.shape]
    return shape if math.prod(shape) == 1 else []


@dataclass(frozen=True, slots=True)
class TextModel:
    """A model of the LLM convention: the shape of each input it declares (one element each)."""

    shapes: dict[str, list[int]]

    def request(self, prompt: str, *, stream: bool, sampling: dict[str, Any]) -> DecodedRequest:
        inputs = {TEXT_INPUT: _bytes([prompt.encode()], self.shapes[TEXT_INPUT])}
        if "stream" in self.shapes:
            inputs["stream"] = np.array([stream], dtype=bool).reshape(self.shapes["stream"])
        if "sampling_parameters" in self.shapes:
            text = json.dumps(sampling).encode()
            inputs["sampling_parameters"] = _bytes([text], self.shapes["sampling_parameters"])
        if "exclude_input_in_output" in self.shapes:  # OpenAI's answers never repeat the prompt
            inputs["exclude_input_in_output"] = np.array([True], dtype=bool).reshape(
                self.shapes["exclude_input_in_output"]
            )
        return DecodedRequest(inputs, outputs=[RequestedOutput(TEXT_OUTPUT)])


def text_model(model: ServedModel) -> TextModel:
    """`model` as a model of the LLM convention, or an `UnsuitableModel` saying what it lacks."""
    if model.inputs is None or model.outputs is None:
        raise _lacks(model, _LLM, "it declares no inputs and outputs")
    shapes: dict[str, list[int]] = {}
    for spec in model.inputs:
        wanted = "BYTES" if spec.name == TEXT_INPUT else _OPTIONAL.get(spec.name)
        if wanted is None:
            if not spec.optional:
                raise _lacks(model, _LLM, f"it needs the input {quoted(spec.name)}, which the convention does not give")
            continue
        shape = _one_element(spec)
        if spec.datatype != wanted or not shape:
            raise _lacks(model, _LLM, f"its input {quoted(spec.name)} is {spec.datatype} {list(spec.shape)}")
        shapes[spec.name] = shape
    if TEXT_INPUT not in shapes:
        raise _lacks(model, _LLM, "it has no input 'text_input'")
    output = model.output_spec(TEXT_OUTPUT)
    if output is None or output.datatype != "BYTES":
        raise _lacks(model, _LLM, "it has no BYTES output 'text_output'")
    return TextModel(shapes)


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    input: str
    output: str
    dimensions: int | None  # None: the model's output tells

    def request(self, texts: Sequence[str]) -> DecodedRequest:
        return DecodedRequest({self.input: _bytes([text.encode() for text in texts], [len(texts)])})


def embedding_model(model: ServedModel) -> EmbeddingModel:
    """`model` as a model of the embedding convention, or an `UnsuitableModel` saying what it lacks."""
    if model.inputs is None or model.outputs is None:
        raise _lacks(model, _EMBEDDING, "it declares no inputs and outputs")
    if model.decoupled:
        raise _lacks(model, _EMBEDDING, "it is decoupled (a generator), where an embedding is one answer")
    required = [spec for spec in model.inputs if not spec.optional]
    if len(required) != 1 or required[0].datatype != "BYTES" or list(required[0].shape) != [-1]:
        found = ", ".join(f"{spec.name} {spec.datatype} {list(spec.shape)}" for spec in required) or "none"
        raise _lacks(model, _EMBEDDING, f"its required inputs are {found}")
    fp32 = [spec for spec in model.outputs if spec.datatype == "FP32" and len(spec.shape) == 2]
    if len(model.outputs) != 1 or not fp32 or fp32[0].shape[0] != -1:
        found = ", ".join(f"{spec.name} {spec.datatype} {list(spec.shape)}" for spec in model.outputs) or "none"
        raise _lacks(model, _EMBEDDING, f"its outputs are {found}")
    width = fp32[0].shape[1]
    return EmbeddingModel(required[0].name, fp32[0].name, None if width == -1 else width)


def _bytes(items: list[bytes], shape: list[int]) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array.reshape(shape)
