"""Tensor codecs every wire shares: binary tensor bytes to numpy arrays and back, and a model's
outputs as arrays of their datatypes. (REST's JSON ``data`` is in ``_rest/json_tensors.py``.)"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._declarations.datatypes import (
    DATATYPE_OF_NATIVE,
    NATIVE_DTYPES,
    datatype_of,
    element_size,
    native_dtype,
    numpy_dtype,
    rounds_to_infinity,
)
from .._declarations.errors import BadRequest, ModelError, quoted

_LENGTH = struct.Struct("<I")


def shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def miscount(name: str, count: int, shape: Sequence[int]) -> BadRequest:
    """Elements that do not fill a shape: REST's JSON data and gRPC's typed contents say it alike."""
    return BadRequest(
        f"input {quoted(name)}: data has {count} elements, shape {shape_text(shape)} needs {math.prod(shape)}"
    )


INTEGERS = frozenset(("UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"))


def out_of_range(name: str, datatype: str, index: int, value: int, low: int, high: int) -> str:
    return f"input {quoted(name)}: {datatype} element {index} is {value}, out of range [{low}, {high}]"


def integer_out_of_range(name: str, datatype: str, data: Any) -> str | None:
    """The message for the first element of `data` (an integer datatype's, maybe nested) outside the datatype's
    range, worded as for gRPC's typed contents; None when an element before it is no integer (its own error)."""
    info = np.iinfo(native_dtype(datatype))
    pending, index = [data], 0
    while pending:  # row-major, as typed contents count their elements
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(reversed(item))
            continue
        if type(item) is not int:
            return None
        if not info.min <= item <= info.max:
            return out_of_range(name, datatype, index, item, int(info.min), int(info.max))
        index += 1
    return None


_OVERFLOW = {np.dtype(t): rounds_to_infinity(t) for t in (np.float16, np.float32)}


def _first_overflow(values: np.ndarray, dtype: np.dtype) -> int | None:
    """The flat index of the first finite value that would round to infinity in FP16/FP32 `dtype`."""
    limit = _OVERFLOW[dtype]
    # One pass for the common case (in doubles: the int64 minimum has no int64 absolute value);
    # NaN fails the comparison and takes the exact path.
    magnitudes = np.abs(values.reshape(-1), dtype=np.float64)
    if not magnitudes.size or float(magnitudes.max()) < limit:
        return None
    overflowed = np.flatnonzero(np.isfinite(magnitudes) & (magnitudes >= limit))
    return int(overflowed[0]) if overflowed.size else None


def binary_size(datatype: str, shape: Sequence[int]) -> int | None:
    """The exact byte size of a fixed-size tensor; None for BYTES, whose size is its own."""
    size = element_size(datatype)
    return size * math.prod(shape) if size else None


def array_from_binary(name: str, datatype: str, shape: list[int], buffer: np.ndarray) -> np.ndarray:
    """View received bytes (a uint8 array) as the tensor, without copying fixed-size data."""
    if datatype == "BYTES":
        return _bytes_from_binary(name, shape, buffer.data)
    if datatype == "BOOL" and buffer.size and buffer.max() > 1:
        raise BadRequest(f"input {quoted(name)}: BOOL bytes must be 0 or 1")
    return buffer.view(numpy_dtype(datatype)).reshape(shape)


def _bytes_from_binary(name: str, shape: list[int], data: memoryview) -> np.ndarray:
    count = math.prod(shape)
    # Every element costs at least its 4-byte length: a shape claiming more cannot be satisfied.
    if count * _LENGTH.size > len(data):
        raise BadRequest(
            f"input {quoted(name)}: {len(data)} bytes cannot hold {count} BYTES elements of shape {shape_text(shape)}"
        )
    array = np.empty(count, dtype=object)
    position = 0
    for index in range(count):
        if position + _LENGTH.size > len(data):
            raise BadRequest(f"input {quoted(name)}: binary data ends inside the length of element {index}")
        (length,) = _LENGTH.unpack_from(data, position)
        position += _LENGTH.size
        if position + length > len(data):
            raise BadRequest(
                f"input {quoted(name)}: element {index} claims {length} bytes, only {len(data) - position} remain"
            )
        array[index] = bytes(data[position : position + length])
        position += length
    if position != len(data):
        raise BadRequest(f"input {quoted(name)}: {len(data) - position} bytes remain after the {count} BYTES elements")
    return array.reshape(shape)


def output_array(model: str, name: str, value: Any, datatype: str | None) -> tuple[np.ndarray, str]:
    """A model's output as an array and its datatype, cast to the declared datatype if any; a
    `ModelError` for the model's author (`model` names it) when that is impossible."""
    try:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
    except Exception as exc:  # a ragged list, a torch tensor that requires grad: the array-like's own words
        raise ModelError(f"model '{model}': output '{name}' is not an array: {type(exc).__name__}: {exc}") from exc
    actual = DATATYPE_OF_NATIVE.get(array.dtype) or datatype_of(array.dtype)
    if datatype is None:
        if actual is None:
            raise ModelError(
                f"model '{model}': output {quoted(name)} has dtype {array.dtype}, which no protocol datatype carries"
            )
        datatype = actual
    if datatype == "BYTES":
        return _as_bytes_array(model, name, array), datatype
    target = NATIVE_DTYPES.get(datatype) or native_dtype(datatype)
    if array.dtype != target:
        if actual is None or actual == "BYTES" or not np.can_cast(array.dtype, target, casting="same_kind"):
            raise ModelError(
                f"model '{model}': output {quoted(name)} has dtype {array.dtype}, which does not cast to {datatype}"
            )
        if array.dtype.kind in "iu" and target.kind in "iu" and array.size and not np.can_cast(array.dtype, target):
            # same_kind lets int64 become INT32; a value that does not fit would silently wrap.
            info, low, high = np.iinfo(target), int(array.min()), int(array.max())
            if low < info.min or high > info.max:
                value = low if low < info.min else high
                raise ModelError(f"model '{model}': output {quoted(name)} holds {value}, out of range for {datatype}")
        if target in _OVERFLOW:  # FP64 -> FP32 (or a large integer -> FP16) can overflow to infinity
            index = _first_overflow(array, target)
            if index is not None:
                value = array.reshape(-1)[index].item()
                raise ModelError(f"model '{model}': output {quoted(name)} holds {value!r}, out of range for {datatype}")
        array = array.astype(target)
    return array, datatype


def _as_bytes_array(model: str, name: str, array: np.ndarray) -> np.ndarray:
    flat = array.ravel()
    result = np.empty(flat.size, dtype=object)
    for index, item in enumerate(flat.tolist()):
        if isinstance(item, str):
            item = item.encode()
        elif not isinstance(item, bytes):
            raise ModelError(
                f"model '{model}': output {quoted(name)} is BYTES but element {index} is {type(item).__name__}, "
                "not bytes or str"
            )
        result[index] = item
    return result.reshape(array.shape)


def binary_chunks(array: np.ndarray, datatype: str) -> tuple[int, list[bytes | memoryview]]:
    """The binary form of a tensor as (size, pieces); fixed-size tensors are not copied."""
    if datatype == "BYTES":
        pieces: list[bytes | memoryview] = []
        size = 0
        for item in array.ravel().tolist():
            pieces.append(_LENGTH.pack(len(item)))
            pieces.append(item)
            size += _LENGTH.size + len(item)
        return size, [b"".join(pieces)]
    wire = np.ascontiguousarray(array, dtype=numpy_dtype(datatype))
    return wire.nbytes, [wire.reshape(-1).view(np.uint8).data]
