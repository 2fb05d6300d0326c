"""Triton's generate extension: ``/generate`` and ``/generate_stream``, a flat JSON object in, one per response out.

The request is a JSON object: ``id``, ``parameters`` (an object of parameters), and any other key
that names one of the model's inputs is that input, given as one value or a flat list (its shape is
the declared one, its variable dimensions filled as Triton fills them); the keys that name no input
are parameters. A key of ``parameters`` that names a declared input is that input too, as Triton maps
it. A model with no declared inputs takes every other key as an input. Keys are read in
order and the first mistake is the answer, in Triton's words first where its tests compare them.

The response is a JSON object: ``model_name``, ``model_version``, ``id`` when the request had one,
the response's parameters, and each output by name (one element as that value, more as a flat list).
``/generate`` answers with exactly one response; ``/generate_stream`` sends each as a server-sent
event, and a failure after the first as an event of its own, ``{"error": ...}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core.inference import OutputTensor
from .._core.request import DecodedRequest
from .._core.serving import ServedModel
from .._declarations.datatypes import native_dtype
from .._declarations.errors import BadRequest, ModelError, quoted
from .._declarations.spec import TensorSpec
from .json_tensors import json_data
from .schemas import encoder

ONE_RESPONSE = (
    "generate expects model to produce exactly 1 response, use generate stream for model that generates "
    "various number of responses"
)
INVALID_PARAMETER = "parameter {} has invalid type. It should be either 'int', 'bool', or 'string'."
# Triton's JSON library's words for a value of the wrong type, by the datatype asked for.
_NOT = {
    "BYTES": "attempt to access JSON non-string as string",
    "BOOL": "attempt to access JSON non-boolean as boolean",
    "INT": "attempt to access JSON non-signed-integer as signed integer",
    "UINT": "attempt to access JSON non-unsigned-integer as unsigned integer",
    "FP": "attempt to access JSON non-number as double",
}


class _Object(list[tuple[str, Any]]):
    """A JSON object's members in order, repeated keys kept (a dict would keep only the last)."""


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    return _Object(pairs)


def generate_request(body: bytes | bytearray | memoryview, model: ServedModel) -> DecodedRequest:
    """The generate request `body` as the core takes it, checked against `model`'s inputs."""
    try:
        document = json.loads(bytes(body) or b"{}", object_pairs_hook=_pairs)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise BadRequest(f"malformed generate request JSON: {exc}") from None
    if not isinstance(document, _Object):
        raise BadRequest(f"a generate request is a JSON object, got {_kind(document)}")
    request = DecodedRequest({})
    seen: set[str] = set()
    for key, value in document:
        if key in seen:
            what = "input" if _is_input(model, key) else "key"
            raise BadRequest(f"{what} {quoted(key)} already exists in request")
        seen.add(key)
        if key == "id":
            if not isinstance(value, str):
                raise BadRequest(f"the generate request's id must be a string, got {_kind(value)}")
            request.id = value or None
        elif key == "parameters" and model.input_spec(key) is None:
            if not isinstance(value, _Object):
                raise BadRequest("Expected JSON object for keyword: 'parameters'")
            for name, item in value:
                try:
                    _member(model, request, name, item)
                except BadRequest as exc:
                    raise BadRequest(f"Converting keyword: 'parameters': {exc.message}") from None
        elif _is_input(model, key):
            request.inputs[key] = _tensor(key, value, model.input_spec(key))
        else:
            request.parameters[key] = _parameter(key, value)
    _check_count(model, request)
    return request


def _member(model: ServedModel, request: DecodedRequest, name: str, value: Any) -> None:
    """A member of the request's ``"parameters"``: an input where the model declares one of its name (as
    Triton maps it), else a parameter."""
    spec = model.input_spec(name)
    if spec is not None:
        if name in request.inputs:
            raise BadRequest(f"input {quoted(name)} already exists in request")
        request.inputs[name] = _tensor(name, value, spec)
    elif name in request.parameters:
        raise BadRequest(f"parameter {quoted(name)} already exists")
    else:
        request.parameters[name] = _parameter(name, value)


def _is_input(model: ServedModel, key: str) -> bool:
    return model.input_spec(key) is not None or (model.inputs is None and key not in ("id", "parameters"))


def _parameter(name: str, value: Any) -> str | int | float | bool:
    if isinstance(value, (str, int, float, bool)):
        return value
    raise BadRequest(INVALID_PARAMETER.format(quoted(name)))


def _tensor(name: str, value: Any, spec: TensorSpec | None) -> np.ndarray:
    items = value if isinstance(value, list) and not isinstance(value, _Object) else [value]
    datatype = spec.datatype if spec is not None else _datatype_of(name, items)
    kind = "UINT" if datatype.startswith("UINT") else "INT" if datatype.startswith("INT") else datatype
    kind = "FP" if datatype in ("FP16", "FP32", "FP64", "BF16") else kind
    for item in items:
        if not _fits(kind, item):
            raise BadRequest(
                f"{_NOT[kind]}: input {quoted(name)} is {datatype}, got {_kind(item)} (a value or a flat list of them)"
            )
    shape = _shape(name, len(items), spec.shape if spec is not None else (-1,))
    if datatype == "BYTES":
        array = np.empty(len(items), dtype=object)
        array[:] = [item.encode() for item in items]
        return array.reshape(shape)
    try:
        return np.array(items, dtype=native_dtype(datatype)).reshape(shape)
    except OverflowError:
        raise BadRequest(f"input {quoted(name)}: a value is out of range for {datatype}") from None


def _fits(kind: str, item: Any) -> bool:
    if kind == "BYTES":
        return isinstance(item, str)
    if kind == "BOOL":
        return isinstance(item, bool)
    if isinstance(item, bool):
        return False
    if kind == "INT":
        return isinstance(item, int)
    if kind == "UINT":
        return isinstance(item, int) and item >= 0
    return isinstance(item, (int, float))


def _datatype_of(name: str, items: list[Any]) -> str:
    """An undeclared input's datatype, from its JSON values."""
    if all(isinstance(item, bool) for item in items):
        return "BOOL"
    if all(isinstance(item, str) for item in items):
        return "BYTES"
    if all(isinstance(item, int) and not isinstance(item, bool) for item in items):
        return "INT64"
    if all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in items):
        return "FP64"
    raise BadRequest(
        f"input {quoted(name)} mixes JSON types or nests values; give one value or a flat list of one type"
    )


def _shape(name: str, count: int, declared: Sequence[int]) -> list[int]:
    """`count` elements in the declared shape, as Triton fills it: the innermost variable dimension takes
    what the fixed ones leave, any other variable dimension is 1."""
    shape, left = list(declared), count
    fits = True
    for dim in shape:
        if dim != -1:
            fits = fits and dim > 0 and left % dim == 0
            left = left // dim if dim > 0 else left
    for index in reversed(range(len(shape))):
        if shape[index] == -1:
            shape[index], left = left, 1
    if not fits or left != 1:
        raise BadRequest(
            f"The schema can not convert input {quoted(name)} to tensor with proper shape: "
            f"{count} elements for shape {list(declared)}"
        )
    return shape


def _check_count(model: ServedModel, request: DecodedRequest) -> None:
    if model.inputs is None:
        return
    required = [spec.name for spec in model.inputs if not spec.optional]
    missing = [name for name in required if name not in request.inputs]
    if not missing:
        return
    given, total = len(request.inputs), len(model.inputs)
    expected = f"between {len(required)} and {total}" if len(required) != total else str(total)
    raise BadRequest(
        f"expected number of inputs {expected} but got {given} inputs for model {quoted(model.name)}; "
        f"missing {', '.join(map(quoted, missing))}"
    )


def generate_response(
    model: ServedModel, request: DecodedRequest, outputs: list[OutputTensor], parameters: dict[str, Any] | None
) -> bytes:
    """One response as the generate extension's JSON object."""
    answer: dict[str, Any] = {"model_name": model.name, "model_version": model.version}
    if request.id:
        answer["id"] = request.id
    if parameters:
        answer.update(parameters)
    for output in outputs:
        if output.datatype == "BYTES":
            data: Any = json_data(output.name, output.array, "BYTES")
        elif output.datatype in ("BF16",):
            raise ModelError(f"output {quoted(output.name)} is BF16, which the generate extension cannot carry")
        else:
            data = output.array.ravel().tolist()
        answer[output.name] = data[0] if len(data) == 1 else data
    return encoder.encode(answer)


def error_event(message: str) -> bytes:
    return b"data: " + encoder.encode({"error": message}) + b"\n\n"


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a JSON object" if isinstance(value, _Object) else "a JSON array"
    return {bool: "a boolean", str: "a string", int: "a number", float: "a number", type(None): "null"}.get(
        type(value), type(value).__name__
    )
