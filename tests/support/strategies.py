"""Hypothesis strategies the property tests share."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

DTYPES = {
    "BOOL": np.dtype(bool), "UINT8": np.dtype("u1"), "UINT16": np.dtype("u2"), "UINT32": np.dtype("u4"),
    "UINT64": np.dtype("u8"), "INT8": np.dtype("i1"), "INT16": np.dtype("i2"), "INT32": np.dtype("i4"),
    "INT64": np.dtype("i8"), "FP16": np.dtype("f2"), "FP32": np.dtype("f4"), "FP64": np.dtype("f8"),
}  # fmt: skip

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


@st.composite
def tensors(draw: st.DrawFn) -> tuple[str, np.ndarray]:
    datatype = draw(st.sampled_from([*DTYPES, "BYTES"]))
    shape = draw(shapes)
    if datatype == "BYTES":
        items = draw(st.lists(st.binary(max_size=12), min_size=math.prod(shape), max_size=math.prod(shape)))
        array = np.empty(len(items), dtype=object)
        array[:] = items
        return datatype, array.reshape(shape)
    elements = (
        st.floats(allow_nan=False, allow_infinity=False, width=DTYPES[datatype].itemsize * 8)
        if datatype.startswith("FP")
        else None
    )
    return datatype, draw(hnp.arrays(DTYPES[datatype], shape, elements=elements))
