"""The protocol's tensor datatypes and their numpy counterparts (little-endian on the wire)."""

from __future__ import annotations

import numpy as np

from .errors import BadRequest
from .extras import install_line

# Wire dtypes: explicit little-endian so a big-endian host still reads and writes the protocol's bytes.
_NUMPY: dict[str, np.dtype] = {
    "BOOL": np.dtype("?"),
    "UINT8": np.dtype("u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BYTES": np.dtype(object),
}
# The same in the host's byte order: what arrays are built in and models get.
NATIVE_DTYPES = {name: dtype.newbyteorder("=") for name, dtype in _NUMPY.items()}
DATATYPE_OF_NATIVE = {dtype: name for name, dtype in NATIVE_DTYPES.items() if name != "BYTES"}  # the usual case
_DATATYPE_OF_KIND = {(dt.kind, dt.itemsize): name for name, dt in _NUMPY.items() if name != "BYTES"}

DATATYPES: tuple[str, ...] = (*_NUMPY, "BF16")


def rounds_to_infinity(dtype: type[np.floating]) -> float:
    """The smallest double that rounds to infinity in `dtype`: 2**maxexp less half the top step (ties go up)."""
    info = np.finfo(dtype)
    return float(2.0**info.maxexp - 2.0 ** (info.maxexp - info.nmant - 2))


def bfloat16() -> np.dtype | None:
    """ml_dtypes' bfloat16, or None without the optional package."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    bfloat16: np.dtype = np.dtype(ml_dtypes.bfloat16)
    return bfloat16


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype for a protocol datatype; BF16 needs the optional ``ml_dtypes`` package."""
    dtype = _NUMPY.get(datatype)
    if dtype is not None:
        return dtype
    bf16 = bfloat16()  # BF16, the one datatype numpy lacks (datatypes are checked before they get here)
    if bf16 is None:
        raise BadRequest(f"BF16 tensors need the ml_dtypes package on the server: {install_line('bf16')}")
    return bf16


def native_dtype(datatype: str) -> np.dtype:
    """`numpy_dtype` in the host's byte order."""
    dtype = NATIVE_DTYPES.get(datatype)
    return dtype if dtype is not None else numpy_dtype(datatype).newbyteorder("=")


def datatype_of(dtype: np.dtype) -> str | None:
    """The protocol datatype of a numpy dtype, or None when the protocol has none for it."""
    datatype = DATATYPE_OF_NATIVE.get(dtype)
    if datatype is not None:
        return datatype
    if dtype.kind in "OSU":
        return "BYTES"
    datatype = _DATATYPE_OF_KIND.get((dtype.kind, dtype.itemsize))
    if datatype is None and dtype.name == "bfloat16":  # ml_dtypes' bfloat16 is a "V" kind
        return "BF16"
    return datatype


ELEMENT_SIZES = {**{name: dtype.itemsize for name, dtype in _NUMPY.items()}, "BYTES": 0, "BF16": 2}


def element_size(datatype: str) -> int:
    """Bytes per element in binary form; BYTES has no fixed size and answers 0."""
    return ELEMENT_SIZES[datatype]
