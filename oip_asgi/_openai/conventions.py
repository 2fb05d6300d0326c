"""What a served model must declare to be reachable here, and its request built the way that model reads it.

The LLM convention is Triton's vLLM backend's model contract: ``text_input`` (BYTES, one element) in,
``text_output`` (BYTES) out, and, when declared, ``stream`` (BOOL), ``sampling_parameters`` (BYTES, a
JSON object) and ``exclude_input_in_output`` (BOOL), each of one element. Its additional outputs come
in pairs, an input asking (BOOL, one element) and the output answering: ``return_finish_reason`` and
``finish_reason`` (BYTES), ``return_num_input_tokens`` and ``num_input_tokens`` (UINT32 or INT32),
``return_num_output_tokens`` and ``num_output_tokens`` (the tokens of that response: UINT32 or INT32),
``return_logprobs`` and ``logprobs`` (BYTES, each response's new tokens' logprobs as JSON). A pair a
model declares whole is asked for when the request needs it; an output is requested only when asked for.

Two embedding conventions: one BYTES input of shape ``[-1]`` (one text each) and one FP32 output of
shape ``[-1, d]``; or the vLLM backend's, ``embedding_request`` (BYTES, one element: a JSON object with
the ``input`` and its ``pooling_params``) in and ``text_output`` (BYTES: the embedding as a JSON list)
out, one text a request, with ``num_input_tokens`` when it declares that pair.
A model must declare its tensors: one that declares none tells nothing to follow a convention by.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._core.request import DecodedRequest, RequestedOutput
from .._core.serving import ServedModel
from .._declarations.errors import quoted
from .._declarations.spec import TensorSpec
from .errors import UnsuitableModel

TEXT_INPUT, TEXT_OUTPUT = "text_input", "text_output"
EMBEDDING_REQUEST = "embedding_request"
# The optional inputs of the convention, and the datatype each must have.
_OPTIONAL = {
    "stream": "BOOL",
    "sampling_parameters": "BYTES",
    "exclude_input_in_output": "BOOL",
    "return_finish_reason": "BOOL",
    "return_num_input_tokens": "BOOL",
    "return_num_output_tokens": "BOOL",
    "return_logprobs": "BOOL",
    "return_cumulative_logprob": "BOOL",
    EMBEDDING_REQUEST: "BYTES",
}
# Each additional output the vLLM backend gives, and the datatypes it may have.
EXTRAS = {
    "finish_reason": ("BYTES",),
    "num_input_tokens": ("UINT32", "INT32", "UINT64", "INT64"),
    "num_output_tokens": ("UINT32", "INT32", "UINT64", "INT64"),
    "logprobs": ("BYTES",),
}
_LLM = (
    "the LLM convention (inputs text_input BYTES [1] and optionally stream BOOL [1], sampling_parameters "
    "BYTES [1], exclude_input_in_output BOOL [1] and the vLLM backend's return_* BOOL [1]; output text_output BYTES)"
)
_EMBEDDING = (
    "an embedding convention (one BYTES input of shape [-1], one FP32 output of shape [-1, d]; or the vLLM "
    "backend's: input embedding_request BYTES [1], output text_output BYTES)"
)
# The flags every request sends, shared: read-only, so that no model can change them for the next request.
_TRUE = np.array([True])
_FALSE = np.array([False])
_TRUE.setflags(write=False)
_FALSE.setflags(write=False)


def _lacks(model: ServedModel, convention: str, what: str) -> UnsuitableModel:
    return UnsuitableModel(f"model {quoted(model.name)} does not follow {convention}: {what}")


def _one_element(spec: TensorSpec) -> list[int]:
    """`spec`'s shape holding one element (its variable dimensions 1), or [] when it cannot."""
    shape = [1 if dim == -1 else dim for dim in spec.shape]
    return shape if math.prod(shape) == 1 else []


def _inputs(model: ServedModel, convention: str, required: str) -> dict[str, list[int]]:
    """The one-element shape of each input of the convention `model` declares; a required input the
    convention does not give, or one of the convention's of another datatype, is what it lacks."""
    if model.inputs is None or model.outputs is None:
        raise _lacks(model, convention, "it declares no inputs and outputs")
    shapes: dict[str, list[int]] = {}
    for spec in model.inputs:
        wanted = "BYTES" if spec.name == TEXT_INPUT else _OPTIONAL.get(spec.name)
        if wanted is None:
            if not spec.optional:
                raise _lacks(
                    model, convention, f"it needs the input {quoted(spec.name)}, which the convention does not give"
                )
            continue
        shape = _one_element(spec)
        if spec.datatype != wanted or not shape:
            raise _lacks(model, convention, f"its input {quoted(spec.name)} is {spec.datatype} {list(spec.shape)}")
        shapes[spec.name] = shape
    if required not in shapes:
        raise _lacks(model, convention, f"it has no input {quoted(required)}")
    output = model.output_spec(TEXT_OUTPUT)
    if output is None or output.datatype != "BYTES":
        raise _lacks(model, convention, "it has no BYTES output 'text_output'")
    return shapes


def _extras(model: ServedModel, shapes: dict[str, list[int]]) -> frozenset[str]:
    """The additional outputs `model` gives when asked: the pairs it declares whole, of the right datatypes."""
    found = []
    for name, datatypes in EXTRAS.items():
        spec = model.output_spec(name)
        if f"return_{name}" in shapes and spec is not None and spec.datatype in datatypes:
            found.append(name)
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class TextModel:
    """A model of the LLM convention: the shape of each input it declares (one element each), and the
    additional outputs it gives when asked (`extras`: finish_reason, num_input_tokens, ...)."""

    shapes: dict[str, list[int]]
    extras: frozenset[str]

    @property
    def echoes(self) -> bool:
        """It repeats the prompt before its answer when asked (``exclude_input_in_output`` false)."""
        return "exclude_input_in_output" in self.shapes

    def request(
        self, prompt: str, *, stream: bool, sampling: bytes, echo: bool, extras: Collection[str]
    ) -> DecodedRequest:
        """The request for `prompt`, `sampling` its sampling parameters as JSON; `echo` asks the model to
        repeat the prompt; `extras` are the additional outputs asked for (some of `self.extras`)."""
        shapes = self.shapes
        inputs = {TEXT_INPUT: _bytes([prompt.encode()], shapes[TEXT_INPUT])}
        if "stream" in shapes:
            inputs["stream"] = (_TRUE if stream else _FALSE).reshape(shapes["stream"])
        if "sampling_parameters" in shapes:
            inputs["sampling_parameters"] = _bytes([sampling], shapes["sampling_parameters"])
        if "exclude_input_in_output" in shapes:  # OpenAI's answers repeat the prompt only when echo asks
            inputs["exclude_input_in_output"] = (_FALSE if echo else _TRUE).reshape(shapes["exclude_input_in_output"])
        outputs = [RequestedOutput(TEXT_OUTPUT)]
        for name in extras:
            inputs[f"return_{name}"] = _TRUE.reshape(shapes[f"return_{name}"])
            outputs.append(RequestedOutput(name))
        return DecodedRequest(inputs, outputs=outputs)


def text_model(model: ServedModel) -> TextModel:
    """`model` as a model of the LLM convention, or an `UnsuitableModel` saying what it lacks."""
    shapes = _inputs(model, _LLM, TEXT_INPUT)
    return TextModel(shapes, _extras(model, shapes))


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    input: str
    output: str
    dimensions: int | None  # None: the model's output tells

    def request(self, texts: Sequence[str]) -> DecodedRequest:
        return DecodedRequest({self.input: _bytes([text.encode() for text in texts], [len(texts)])})


@dataclass(frozen=True, slots=True)
class VllmEmbeddingModel:
    """A model of the vLLM backend's embedding convention: one input (a text or token ids) a request."""

    shapes: dict[str, list[int]]
    counts: bool  # it gives num_input_tokens when asked

    def request(self, item: str | list[int], dimensions: int | None) -> DecodedRequest:
        pooling = {} if dimensions is None else {"dimensions": [dimensions]}
        asked: dict[str, Any] = {"input": item, "pooling_params": pooling}
        inputs = {EMBEDDING_REQUEST: _bytes([json.dumps(asked).encode()], self.shapes[EMBEDDING_REQUEST])}
        if TEXT_INPUT in self.shapes:  # required by the backend's config; its embedding task reads embedding_request
            inputs[TEXT_INPUT] = _bytes([item.encode() if isinstance(item, str) else b""], self.shapes[TEXT_INPUT])
        outputs = [RequestedOutput(TEXT_OUTPUT)]
        if self.counts:
            inputs["return_num_input_tokens"] = _TRUE.reshape(self.shapes["return_num_input_tokens"])
            outputs.append(RequestedOutput("num_input_tokens"))
        return DecodedRequest(inputs, outputs=outputs)


def embedding_model(model: ServedModel) -> EmbeddingModel | VllmEmbeddingModel:
    """`model` as a model of an embedding convention, or an `UnsuitableModel` saying what it lacks."""
    if model.inputs is None or model.outputs is None:
        raise _lacks(model, _EMBEDDING, "it declares no inputs and outputs")
    if any(spec.name == EMBEDDING_REQUEST for spec in model.inputs):
        shapes = _inputs(model, _EMBEDDING, EMBEDDING_REQUEST)
        if TEXT_INPUT in shapes and any(spec.name == TEXT_INPUT and spec.optional for spec in model.inputs):
            del shapes[TEXT_INPUT]  # the vLLM backend reads embedding_request alone
        return VllmEmbeddingModel(shapes, "num_input_tokens" in _extras(model, shapes))
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
