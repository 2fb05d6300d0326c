"""REST's JSON tensor ``data``: decoded JSON into numpy arrays, and arrays into JSON numbers.

Decoding is strict: JSON elements are decoded by a msgspec decoder typed for the datatype and the
nesting depth, so a string in an INT32 tensor, a float in an integer tensor, a bool where a number
belongs or a value out of the dtype's range is an error that names the element's JSON path.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import msgspec
import numpy as np

from .._core.number_text import json_numbers
from .._core.tensors import INTEGERS, integer_out_of_range, miscount, shape_text
from .._declarations.datatypes import NATIVE_DTYPES, native_dtype
from .._declarations.errors import BadRequest, quoted
from .schemas import ELEMENT


@cache
def _nested_type(datatype: str, depth: int) -> Any:
    """A struct whose ``data`` holds `depth` nested lists of the datatype's elements."""
    element_type: Any = ELEMENT[datatype]
    for _ in range(depth):
        element_type = list[element_type]
    return msgspec.defstruct("Data", [("data", element_type)])


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


def nested_data_error(datatype: str, data: list[Any]) -> str | None:
    """What is wrong with nested rows of `datatype` elements, in msgspec's words (path from `$.data`);
    None when they hold what they should."""
    try:
        msgspec.convert({"data": data}, _nested_type(datatype, _nesting_depth(data)))
    except msgspec.ValidationError as exc:
        return str(exc)
    return None


def array_from_json(name: str, datatype: str, shape: list[int], data: list[Any] | np.ndarray) -> np.ndarray:
    """The tensor of decoded JSON ``data``: flat elements were checked by the request's schema."""
    if isinstance(data, np.ndarray):  # flat numbers the bulk parser already put in an array
        if data.size != math.prod(shape):
            raise miscount(name, data.size, shape)
        return data.reshape(shape)
    if datatype == "BF16":
        raise BadRequest(f"input {quoted(name)}: BF16 has no JSON form; send it as binary data (binary_data_size)")
    depth = _nesting_depth(data) if data and type(data[0]) is list else 1
    items = data
    if depth > 1:
        # Nesting stops early only where a dimension is 0: [[]] is a tensor of shape [1, 0, 5].
        if depth != len(shape) and not (depth < len(shape) and 0 in shape[:depth]):
            raise BadRequest(
                f"input {quoted(name)}: data is nested {depth} deep, but shape {shape_text(shape)} "
                f"has {len(shape)} dimensions"
            )
        try:
            # Converted as the ``data`` field of a struct, msgspec's error path starts at `$.data`.
            nested = msgspec.convert({"data": data}, _nested_type(datatype, depth)).data
        except msgspec.ValidationError as exc:
            # An integer out of range in words gRPC's typed contents share (tests/support/parity_cases.py).
            outside = integer_out_of_range(name, datatype, data) if datatype in INTEGERS else None
            if outside is not None:
                raise BadRequest(outside) from None
            raise BadRequest(f"input {quoted(name)}: invalid {datatype} data: {exc}") from None
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
    dtype = NATIVE_DTYPES.get(datatype) or native_dtype(datatype)
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


def _mixed(name: str) -> BadRequest:
    return BadRequest(f"input {quoted(name)}: data mixes elements and nested arrays at the same depth")


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
    # orjson prints NaN and infinity as null, the only "n" in numbers; one byte is searched by memchr (`find`:
    # `in` on bytes first tries its operand as an integer, and raises and clears a TypeError each time).
    if array.dtype.kind == "f" and text.find(b"n") >= 0:
        raise BadRequest(
            f"output {quoted(name)} holds NaN or infinity, which JSON cannot carry; request it as binary data"
        )
    return msgspec.Raw(text)
