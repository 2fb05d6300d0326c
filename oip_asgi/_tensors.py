"""Tensor codecs: JSON ``data`` and binary tensor bytes to numpy arrays, and back.

Decoding is strict: JSON elements are decoded by a msgspec decoder typed for the datatype and the
nesting depth, so a string in an INT32 tensor, a float in an integer tensor, a bool where a number
belongs or a value out of the dtype's range is an error that names the element's JSON path.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from functools import cache
from typing import Any

import msgspec
import numpy as np

from ._datatypes import datatype_of, element_size, native_dtype, numpy_dtype, rounds_to_infinity
from ._errors import BadRequest, quoted
from ._numbers import json_numbers
from ._schemas import ELEMENT

_LENGTH = struct.Struct("<I")


def shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


@cache
def _nested_type(datatype: str, depth: int) -> Any:
    element_type: Any = ELEMENT[datatype]
    for _ in range(depth):
        element_type = list[element_type]
    return element_type


def _nesting_depth(data: list[Any]) -> int:
    """How many arrays open before the first element: 1 for flat data, len(shape) for nested."""
    depth = 1
    while data and isinstance(data[0], list):
        data = data[0]
        depth += 1
    return depth


def _flatten(nested: list[Any], shape: list[int], name: str) -> list[Any]:
    if len(nested) != shape[0]:
        raise BadRequest(
            f"input {quoted(name)}: data has {len(nested)} rows at dimension 0, "
            f"shape {shape_text(shape)} says {shape[0]}"
        )
    items = nested
    for axis in range(1, len(shape)):
        flat: list[Any] = []
        for row in items:
            if len(row) != shape[axis]:
                raise BadRequest(
                    f"input {quoted(name)}: data has a row of {len(row)} at dimension {axis}, "
                    f"shape {shape_text(shape)} says {shape[axis]}"
                )
            flat.extend(row)
        items = flat
    return items


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


def array_from_json(name: str, datatype: str, shape: list[int], data: list[Any] | np.ndarray) -> np.ndarray:
    """The tensor of decoded JSON ``data``: flat elements were checked by the request's schema."""
    if isinstance(data, np.ndarray):  # flat numbers the bulk parser already put in an array
        if data.size != math.prod(shape):
            raise miscount(name, data.size, shape)
        return data.reshape(shape)
    if datatype == "BF16":
        raise BadRequest(f"input {quoted(name)}: BF16 has no JSON form; send it as binary data (binary_data_size)")
    depth = _nesting_depth(data)
    items = data
    if depth > 1:
        # Nesting stops early only where a dimension is 0: [[]] is a tensor of shape [1, 0, 5].
        if depth != len(shape) and not (depth < len(shape) and 0 in shape[:depth]):
            raise BadRequest(
                f"input {quoted(name)}: data is nested {depth} deep, but shape {shape_text(shape)} "
                f"has {len(shape)} dimensions"
            )
        try:
            nested = msgspec.convert(data, _nested_type(datatype, depth))
        except msgspec.ValidationError as exc:
            outside = integer_out_of_range(name, datatype, data) if datatype in INTEGERS else None
            if outside is not None:
                raise BadRequest(outside) from None
            raise BadRequest(f"input {quoted(name)}: invalid {datatype} data: {exc}".replace("`$", "`$.data")) from None
        items = _flatten(nested, shape[:depth], name)
    count = math.prod(shape)
    if len(items) != count:
        raise miscount(name, len(items), shape)
    if datatype == "BYTES":
        array = np.empty(count, dtype=object)
        try:
            array[:] = [item.encode() for item in items]
        except AttributeError:
            raise _mixed(name) from None
        return array.reshape(shape)
    dtype = native_dtype(datatype)
    try:
        if datatype == "BOOL":
            array = np.array(items, dtype=bool)  # fromiter would take a list as a true value
        else:  # FP16/FP32 round straight from the parsed doubles, which the schema kept in range
            array = np.fromiter(items, dtype, count)
    except OverflowError:  # UINT64 above 2**64 - 1: msgspec's bounds stop at int64
        raise BadRequest(f"input {quoted(name)}: a value is out of range for {datatype}") from None
    except (TypeError, ValueError):
        raise _mixed(name) from None
    return array.reshape(shape)


def miscount(name: str, count: int, shape: Sequence[int]) -> BadRequest:
    return BadRequest(
        f"input {quoted(name)}: data has {count} elements, shape {shape_text(shape)} needs {math.prod(shape)}"
    )


def _mixed(name: str) -> BadRequest:
    return BadRequest(f"input {quoted(name)}: data mixes elements and nested arrays at the same depth")


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


def output_array(name: str, value: Any, datatype: str | None) -> tuple[np.ndarray, str]:
    """Normalize a model's output to an array and its datatype, casting to the declared datatype if any.

    Raises TypeError or ValueError with a message for the model author when that is impossible.
    """
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    actual = datatype_of(array.dtype)
    if datatype is None:
        if actual is None:
            raise TypeError(f"output {quoted(name)} has dtype {array.dtype}, which no protocol datatype carries")
        datatype = actual
    if datatype == "BYTES":
        return _as_bytes_array(name, array), datatype
    target = native_dtype(datatype)
    if array.dtype != target:
        if actual is None or actual == "BYTES" or not np.can_cast(array.dtype, target, casting="same_kind"):
            raise TypeError(f"output {quoted(name)} has dtype {array.dtype}, which does not cast to {datatype}")
        if array.dtype.kind in "iu" and target.kind in "iu" and array.size and not np.can_cast(array.dtype, target):
            # same_kind lets int64 become INT32; a value that does not fit would silently wrap.
            info, low, high = np.iinfo(target), int(array.min()), int(array.max())
            if low < info.min or high > info.max:
                value = low if low < info.min else high
                raise ValueError(f"output {quoted(name)} holds {value}, out of range for {datatype}")
        if target in _OVERFLOW:  # FP64 -> FP32 (or a large integer -> FP16) can overflow to infinity
            index = _first_overflow(array, target)
            if index is not None:
                value = array.reshape(-1)[index].item()
                raise ValueError(f"output {quoted(name)} holds {value!r}, out of range for {datatype}")
        array = array.astype(target)
    return array, datatype


def _as_bytes_array(name: str, array: np.ndarray) -> np.ndarray:
    flat = array.ravel()
    result = np.empty(flat.size, dtype=object)
    for index, item in enumerate(flat.tolist()):
        if isinstance(item, str):
            item = item.encode()
        elif not isinstance(item, bytes):
            raise TypeError(
                f"output {quoted(name)} is BYTES but element {index} is {type(item).__name__}, not bytes or str"
            )
        result[index] = item
    return result.reshape(array.shape)


def json_data(name: str, array: np.ndarray, datatype: str) -> list[str] | msgspec.Raw:
    """The flat JSON ``data`` of an output; raises BadRequest when JSON cannot carry it."""
    if datatype == "BYTES":
        try:
            return [item.decode() for item in array.ravel().tolist()]
        except UnicodeDecodeError:
            raise BadRequest(
                f"output {quoted(name)} holds BYTES that are not UTF-8, which JSON cannot carry; "
                "request it as binary data"
            ) from None
    if datatype == "BF16":
        raise BadRequest(f"output {quoted(name)} is BF16, which has no JSON form; request it as binary data")
    text = json_numbers(array)
    # orjson prints NaN and infinity as null, the only "n" in numbers; one byte is searched by memchr.
    if array.dtype.kind == "f" and b"n" in text:
        raise BadRequest(
            f"output {quoted(name)} holds NaN or infinity, which JSON cannot carry; request it as binary data"
        )
    return msgspec.Raw(text)


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
