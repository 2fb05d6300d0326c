"""A request checked against the protocol's limits and the model's specs, before any data is decoded.

Wire-neutral: REST's decoded JSON and gRPC's protobuf messages both have tensors with a name, a
datatype and a shape, and both get the same checks and the same messages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from .._declarations.datatypes import DATATYPES, ELEMENT_SIZES, element_size
from .._declarations.errors import BadRequest, quoted
from .._declarations.spec import TensorSpec
from .request import RequestedOutput
from .serving import ServedModel
from .tensors import binary_size, shape_text

_MAX_DIMS = 64  # numpy's limit on array dimensions
_MAX_BYTES = 2**63 - 1


class TensorHeader(Protocol):
    """What a wire says of an input before its data: REST's `RequestInput`, gRPC's `InferInputTensor`."""

    @property
    def name(self) -> str: ...
    @property
    def datatype(self) -> str: ...
    @property
    def shape(self) -> Sequence[int]: ...


def check_shape(tensor: TensorHeader) -> None:
    """Refuse shapes no array can take, before any data is decoded or allocated."""
    shape = tensor.shape
    if len(shape) > _MAX_DIMS:
        raise BadRequest(f"input {quoted(tensor.name)} has {len(shape)} dimensions; at most {_MAX_DIMS} are supported")
    if shape and min(shape) < 0:
        raise BadRequest(negative_dimensions(tensor.name, shape))
    # numpy counts an array's bytes in int64, zero dimensions aside: [0, 2**62] is too large even empty.
    count = math.prod(shape) or math.prod(dim for dim in shape if dim)
    if count * (ELEMENT_SIZES.get(tensor.datatype) or 8) > _MAX_BYTES:
        raise BadRequest(
            f"input {quoted(tensor.name)}: shape {shape_text(shape)} holds more bytes than int64 can count"
        )


def _unique(names: Sequence[str], repeated: str) -> set[str]:
    """The names, or BadRequest(`repeated` naming the first that comes twice)."""
    seen = set(names)
    if len(seen) == len(names):  # the common case, in one C call
        return seen
    seen = set()
    for name in names:
        if name in seen:
            raise BadRequest(repeated.format(quoted(name)))
        seen.add(name)
    return seen


def negative_dimensions(name: str, shape: Sequence[int]) -> str:
    return f"input {quoted(name)} has shape {shape_text(shape)}; dimensions cannot be negative"


def check_binary_size(name: str, datatype: str, shape: Sequence[int], size: int) -> None:
    """Refuse binary data (REST's binary_data_size, gRPC's raw_input_contents) that its shape does not take."""
    expected = binary_size(datatype, shape)
    if expected is not None and size != expected:
        raise BadRequest(
            f"input {quoted(name)} has {size} bytes of binary data, but {datatype} of shape {shape_text(shape)} "
            f"takes {expected} bytes"
        )


def bad_classification(name: str, got: str) -> str:
    return f"output {quoted(name)}: parameter classification must be a positive integer, got {got}"


def unknown_datatype(name: str, datatype: str) -> str:
    return f"input {quoted(name)} has datatype {quoted(datatype)}; the datatypes are {', '.join(DATATYPES)}"


def check_inputs(model: ServedModel, inputs: Sequence[TensorHeader]) -> None:
    seen: set[str] = set()
    for tensor in inputs:  # a loop of its own: a name given twice is told before anything else
        if tensor.name in seen:
            raise BadRequest(f"input {quoted(tensor.name)} appears more than once")
        seen.add(tensor.name)
    for tensor in inputs:
        if tensor.datatype not in DATATYPES:
            raise BadRequest(unknown_datatype(tensor.name, tensor.datatype))
        check_shape(tensor)
    if model.inputs is None:
        return
    for tensor in inputs:
        spec = model.input_spec(tensor.name)
        if spec is None:
            takes = ", ".join(spec.name for spec in model.inputs) or "no inputs"
            raise BadRequest(f"unexpected input {quoted(tensor.name)}; model '{model.name}' takes {takes}")
        check_against(spec, tensor.datatype, tensor.shape, model.name)
    for spec in model.inputs:
        if spec.name not in seen and not spec.optional:
            raise BadRequest(f"missing input '{spec.name}' for model '{model.name}'")


FLOATS = {"FP32", "FP64"}
# tritonclient users often send float32 rows to a model file fitted on float64 ones: say both ways forward.
FLOAT_ADVICE = (
    "; send {expected} (a numpy array of that type), or, for a scikit-learn, XGBoost or LightGBM file, serve it "
    "with oip-asgi serve FILE --input-datatype {sent} (docs/models.md)"
)


def check_against(spec: TensorSpec, datatype: str, shape: Sequence[int], model: str) -> None:
    if datatype != spec.datatype:
        raise BadRequest(
            f"input '{spec.name}' has datatype {datatype}, model '{model}' expects {spec.datatype}"
            + (
                FLOAT_ADVICE.format(sent=datatype, expected=spec.datatype)
                if {datatype, spec.datatype} == FLOATS
                else ""
            )
        )
    if not spec.accepts_shape(shape):
        raise BadRequest(
            f"input '{spec.name}' has shape {shape_text(shape)}, model '{model}' expects {shape_text(spec.shape)}"
        )


def check_outputs(model: ServedModel, requested: Sequence[RequestedOutput]) -> None:
    _unique([output.name for output in requested], "output {} is requested more than once")
    if model.outputs is None:
        return
    for output in requested:
        spec = model.output_spec(output.name)
        if spec is None:
            names = ", ".join(spec.name for spec in model.outputs)
            raise BadRequest(
                f"unknown output {quoted(output.name)}; model '{model.name}' produces {names or 'no outputs'}"
            )
        if output.classification is not None and spec.datatype in ("BOOL", "BYTES"):
            raise BadRequest(f"output {quoted(output.name)} is {spec.datatype}; classification needs a numeric output")


def raw_input_shape(spec: TensorSpec, size: int) -> list[int]:
    """The shape of a raw binary body of `size` bytes for `spec`, deduced as Triton deduces it.

    A BYTES body is one element: a leading variable dimension is its batch of one, and any other
    dimension must be 1. Numeric bodies fill one variable dimension; with two, the leading one is
    a batch of one.
    """
    dims = list(spec.shape)
    if spec.datatype == "BYTES":
        shape = [1, *dims[1:]] if dims and dims[0] == -1 else dims
        if -1 in shape or math.prod(shape) != 1:
            raise BadRequest(
                f"input '{spec.name}' has shape {shape_text(spec.shape)}, which a raw binary BYTES body "
                "(one element) cannot fill: only a leading batch dimension may be variable, the others must be 1"
            )
        return shape
    itemsize = element_size(spec.datatype)
    if size % itemsize:
        raise BadRequest(f"raw binary body of {size} bytes is not a whole number of {spec.datatype} elements")
    count = size // itemsize
    variable = [axis for axis, dim in enumerate(dims) if dim == -1]
    if len(variable) > 1 and variable[0] == 0:
        dims[0] = 1  # a raw request is a batch of one
        variable = variable[1:]
    if len(variable) > 1:
        raise BadRequest(
            f"input '{spec.name}' has shape {shape_text(dims)}: a raw binary request allows one variable dimension"
        )
    fixed = math.prod(dim for dim in dims if dim != -1)
    if variable and fixed and count % fixed == 0:
        dims[variable[0]] = count // fixed
    elif variable or count != fixed:
        raise BadRequest(
            f"raw binary body of {count} {spec.datatype} elements does not fit shape {shape_text(spec.shape)}"
        )
    return dims
