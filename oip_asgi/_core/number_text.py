"""JSON text of numeric tensors, every float printed as the shortest text of its own precision.

Python floats are doubles, so ``float32(0.1)`` printed through ``tolist()`` would come out as
``0.10000000149011612``. orjson prints float32 arrays with the shortest float32 digits (the same
as numpy's ``repr``, measured over millions of values), about ten times faster than any vectorized
code of ours. float16 it widens to float32 first, so those go through a table of the double
nearest each float16's shortest text, which any shortest-repr printer then prints as that text.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import orjson

_NUMPY = orjson.OPT_SERIALIZE_NUMPY


@cache
def _float16_doubles() -> np.ndarray:
    every_float16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    return every_float16.astype(str).astype(np.float64)


def json_numbers(array: np.ndarray) -> bytes:
    """The flat JSON array of a numeric, native-endian tensor (finite floats only: NaN prints null)."""
    flat = array.ravel()  # orjson takes C-contiguous arrays; ravel copies only when the array is not
    if flat.dtype.char == "e":  # float16 (a dtype compared with a type costs a dtype made from the type)
        flat = _float16_doubles()[flat.view(np.uint16)]
    return orjson.dumps(flat, option=_NUMPY)


def number_texts(array: np.ndarray) -> list[str]:
    """Each element's shortest text, in order; non-finite floats as numpy prints them."""
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        return [str(value) for value in array.reshape(-1)]
    text = json_numbers(array)[1:-1].decode()
    return text.split(",") if text else []
