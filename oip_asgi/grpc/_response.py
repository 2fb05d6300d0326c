"""A ModelInferResponse's bytes written directly, in the order protobuf writes its fields, so the bytes are
those `_codec.serialize` writes: its head (model name and version, id), each output's header (name, datatype,
shape) and raw contents appended straight from the arrays.

A head with parameters is serialized by protobuf (once while it stays the same: every response of a stream);
the head of none, and each output's header, are written here and kept for the next response that has the same.
For the replies of raw outputs without parameters of their own, which is nearly every reply; the others go
through `_codec.encode_response`.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .._core.inference import OutputTensor
from .._core.tensors import binary_chunks
from .._declarations.datatypes import numpy_dtype

# Tags of length-delimited fields: ModelInferResponse's model_name (1), model_version (2), id (3), outputs (5) and
# raw_output_contents (6); InferOutputTensor's name (1), datatype (2) and shape (3, packed).
_MODEL_NAME, _MODEL_VERSION, _ID, _OUTPUTS, _RAW = (bytes([field << 3 | 2]) for field in (1, 2, 3, 5, 6))
_NAME, _DATATYPE, _SHAPE = _MODEL_NAME, _MODEL_VERSION, _ID
_LENGTH = struct.Struct("<I")  # a BYTES element's length, before it
_SMALL = [bytes([value]) for value in range(0x80)]  # the varints of one byte, made once
# The datatypes whose raw contents are the array's own bytes in the wire's byte order (BYTES is encoded, and BF16
# needs its optional dtype: both go through `binary_chunks`).
_WIRE = {name: numpy_dtype(name) for name in ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                              "INT32", "INT64", "FP16", "FP32", "FP64")}  # fmt: skip
# What was written once and is written again as it was: the heads of (model, version), the headers of
# (name, datatype, shape). Bounded: a model's outputs of varying shapes, or many models, start them afresh.
_KEPT = 1024
heads: dict[tuple[str, str], bytes] = {}
_headers: dict[tuple[str, str, tuple[int, ...]], bytes] = {}


def varint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(tag: bytes, text: str) -> bytes:
    data = text.encode()
    return tag + varint(len(data)) + data if data else b""  # proto3 leaves "" out


def head(model: str, version: str, request_id: str | None) -> bytes:
    """The serialized fields of a response without parameters before its outputs."""
    key = (model, version)
    fields = heads.get(key)
    if fields is None:
        if len(heads) >= _KEPT:
            heads.clear()
        fields = heads[key] = _string(_MODEL_NAME, model) + _string(_MODEL_VERSION, version)
    if not request_id:
        return fields
    data = request_id.encode()
    length = len(data)
    return b"".join((fields, _ID, _SMALL[length] if length < 0x80 else varint(length), data))


def _header(name: str, datatype: str, shape: tuple[int, ...]) -> bytes:
    """An output's field in the response (its tag and length too), but its contents."""
    tensor = _string(_NAME, name) + _string(_DATATYPE, datatype)
    if shape:
        dims = b"".join([varint(dim) for dim in shape])
        tensor += _SHAPE + varint(len(dims)) + dims
    field = _OUTPUTS + varint(len(tensor)) + tensor
    if len(_headers) >= _KEPT:
        _headers.clear()
    _headers[name, datatype, shape] = field
    return field


def response_bytes(head: bytes, outputs: list[OutputTensor], field: int | None = None) -> bytes | None:
    """The response of `head` (its serialized fields before the outputs) and `outputs` (raw contents); with
    `field`, as that field of a message. None unless every output is plain: none has parameters of its own (a
    model's, or the binary size's) and none goes to shared memory (`_codec.encode_response` writes those)."""
    parts: list[Any] = [head]
    raw: list[Any] = []
    size = len(head)
    for output in outputs:
        if output.parameters or (output.requested is not None and output.requested.placed is not None):
            return None
        array: np.ndarray = output.array
        datatype = output.datatype
        shape = array.shape
        header = _headers.get((output.name, datatype, shape)) or _header(output.name, datatype, shape)
        parts.append(header)
        wire = _WIRE.get(datatype)
        if wire is not None:  # a C-contiguous array in the wire's byte order: its own buffer, not copied
            content: Any = np.ascontiguousarray(array, dtype=wire)
            length = content.nbytes
        elif datatype == "BYTES" and array.size == 1 and (item := array.item()).__class__ is bytes:
            content = _LENGTH.pack(len(item)) + item  # one element (a token of a stream): its length, then itself
            length = len(content)
        else:
            length, chunks = binary_chunks(array, datatype)
            content = chunks[0]
        length_bytes = _SMALL[length] if length < 0x80 else varint(length)
        raw += (_RAW, length_bytes, content)
        size += len(header) + 1 + len(length_bytes) + length
    if field is not None:
        parts[:0] = (bytes([field << 3 | 2]), _SMALL[size] if size < 0x80 else varint(size))
    return b"".join(parts + raw)
