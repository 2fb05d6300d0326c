"""Wire schemas: msgspec Structs for every JSON object the protocol exchanges.

The flat request's decoder and the encoder are built once at import; the nested forms (data as rows of
lists), which few requests use, on first use. Annotations are evaluated as the classes are defined (no
``from __future__ import annotations``): msgspec would otherwise parse each one from its text at import,
about half of this module's import time. Unknown request fields are tolerated so that
clients speaking a newer protocol revision still work; msgspec's errors carry a JSON path
(``$.inputs[0].shape[1]``), which is passed through to the client as the error message.
"""

import functools
from typing import Annotated, Any, ClassVar, Union

import msgspec
import numpy as np

from .._declarations.datatypes import rounds_to_infinity

# A dimension is "representable as an unsigned 64-bit integer"; numpy indexes with int64, so that is our ceiling.
Dim = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
ByteCount = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
ClassCount = Annotated[int, msgspec.Meta(ge=1)]


class InputParameters(msgspec.Struct, gc=False):
    binary_data_size: ByteCount | None = None
    # Triton's shared memory extension: the tensor is in a registered region, at an offset into it.
    shared_memory_region: str | None = None
    shared_memory_offset: ByteCount | None = None
    shared_memory_byte_size: ByteCount | None = None


class RequestInput(msgspec.Struct, gc=False, tag_field="datatype"):
    """An input tensor. Each datatype is a subclass (the tag) that types its ``data`` elements, so the
    whole request is decoded and validated in one pass, and a tensor's numbers are parsed only once."""

    datatype: ClassVar[str]  # the tag, as a plain class attribute of each subclass

    name: str
    shape: list[Dim]
    parameters: InputParameters | None = None
    # Flat data arrives as checked elements; a nested row stays a list, checked against the shape later.
    # A large request's flat numbers arrive as an array of the datatype instead (see `_bulk_json`).
    data: list[Any] | np.ndarray | None = None

    @property
    def binary_data_size(self) -> int | None:
        return None if self.parameters is None else self.parameters.binary_data_size


def _int_bound(dtype: type[np.integer[Any]]) -> msgspec.Meta:
    info = np.iinfo(dtype)
    return msgspec.Meta(ge=int(info.min), le=int(info.max))


def _float_bound(dtype: type[np.floating[Any]]) -> msgspec.Meta:
    limit = rounds_to_infinity(dtype)  # values short of it round to the largest finite value
    return msgspec.Meta(gt=-limit, lt=limit)


# The JSON element type of each datatype: bounds reject what the dtype cannot hold, while the
# numbers are parsed (msgspec itself rejects what overflows a double). UINT64's top is checked
# by numpy, since msgspec's bounds stop at int64. BF16 has no JSON form.
ELEMENT: dict[str, Any] = {
    "BOOL": bool,
    "UINT8": Annotated[int, _int_bound(np.uint8)],
    "UINT16": Annotated[int, _int_bound(np.uint16)],
    "UINT32": Annotated[int, _int_bound(np.uint32)],
    "UINT64": Annotated[int, msgspec.Meta(ge=0)],
    "INT8": Annotated[int, _int_bound(np.int8)],
    "INT16": Annotated[int, _int_bound(np.int16)],
    "INT32": Annotated[int, _int_bound(np.int32)],
    "INT64": Annotated[int, _int_bound(np.int64)],
    "FP16": Annotated[float, _float_bound(np.float16)],
    "FP32": Annotated[float, _float_bound(np.float32)],
    "FP64": float,
    "BYTES": str,
    "BF16": Any,
}


class OutputParameters(msgspec.Struct, gc=False):
    binary_data: bool | None = None
    classification: ClassCount | None = None
    shared_memory_region: str | None = None
    shared_memory_offset: ByteCount | None = None
    shared_memory_byte_size: ByteCount | None = None


class RequestOutput(msgspec.Struct, gc=False):
    name: str
    parameters: OutputParameters | None = None


class InferenceRequest(msgspec.Struct, gc=False):
    inputs: list[RequestInput]  # decoded as the datatypes' subclasses: see `_input_type`
    id: str | None = None
    parameters: dict[str, Any] | None = None
    outputs: list[RequestOutput] | None = None


def _typed_input(datatype: str, element: Any, nested: bool) -> type[RequestInput]:
    data = list[Union[element, list[Any]]] if nested else list[element]  # noqa: UP007
    typed = msgspec.defstruct(
        f"{datatype}Input",
        [("data", data | None, None)],
        bases=(RequestInput,),
        tag=datatype,
        namespace={"datatype": datatype},
        gc=False,
    )
    return typed  # type: ignore[return-value]


def _input_type(nested: bool) -> Any:
    """An input typed by its datatype (the tag). Flat ``data`` is checked element by element as it is
    parsed; `nested` also takes rows, kept as lists and checked against the shape later. A union of
    element and row costs ~10 ns per element, so flat data, the common form, goes without."""
    return Union[tuple(_typed_input(datatype, element, nested) for datatype, element in ELEMENT.items())]  # noqa: UP007


def _request_type(input_type: Any) -> type[InferenceRequest]:
    typed = msgspec.defstruct("InferenceRequest", [("inputs", list[input_type])], bases=(InferenceRequest,), gc=False)
    return typed  # type: ignore[return-value]


FLAT_INPUT = _input_type(nested=False)
FLAT_REQUEST = _request_type(FLAT_INPUT)


@functools.cache
def nested_input_type() -> Any:
    return _input_type(nested=True)


@functools.cache
def nested_request_type() -> type[InferenceRequest]:
    return _request_type(nested_input_type())


class ResponseOutput(msgspec.Struct, gc=False, omit_defaults=True, kw_only=True):
    name: str
    datatype: str
    shape: list[int]
    parameters: dict[str, Any] | None = None
    data: Any = msgspec.UNSET


class InferenceResponse(msgspec.Struct, gc=False, omit_defaults=True, kw_only=True):
    model_name: str
    model_version: str
    id: str | None = None
    parameters: dict[str, Any] | None = None
    outputs: list[ResponseOutput]


class RepositoryIndexRequest(msgspec.Struct, gc=False):
    ready: bool = False


class RegisterRequest(msgspec.Struct, gc=False):
    """A system shared memory region's register request: Triton's ``key``, ``offset`` and ``byte_size``."""

    key: str | None = None
    offset: ByteCount = 0
    byte_size: ByteCount | None = None


class ModelControlRequest(msgspec.Struct, gc=False):
    """A load or unload request's body: Triton's ``config`` (ModelConfig JSON) and ``file:<path>`` (base64)."""

    parameters: dict[str, str | int | float | bool] = {}


request_decoder = msgspec.json.Decoder(FLAT_REQUEST)
encoder = msgspec.json.Encoder()


@functools.cache
def nested_request_decoder() -> msgspec.json.Decoder[InferenceRequest]:
    return msgspec.json.Decoder(nested_request_type())


@functools.cache
def flat_input_decoder() -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(FLAT_INPUT)


@functools.cache
def nested_input_decoder() -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(nested_input_type())
