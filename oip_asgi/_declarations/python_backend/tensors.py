"""``pb_utils.Tensor`` and Triton's type tables: a named numpy array on the CPU, and its types' names and numbers."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .errors import unsupported

# The config's type names and Triton's TRITONSERVER_DataType numbers, to numpy (BYTES: object arrays).
TRITON_STRING_TO_NUMPY: dict[str, type] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}
_NUMPY_OF_NUMBER: dict[int, type[np.generic]] = {
    1: np.bool_, 2: np.uint8, 3: np.uint16, 4: np.uint32, 5: np.uint64, 6: np.int8, 7: np.int16, 8: np.int32,
    9: np.int64, 10: np.float16, 11: np.float32, 12: np.float64, 13: np.object_,
}  # fmt: skip
_NUMBER_OF_NUMPY = {np.dtype(kind): number for number, kind in _NUMPY_OF_NUMBER.items()}
_NUMBER_OF_NUMPY[np.dtype(np.bytes_)] = 13
# The protocol's datatype names by Triton's number (a BLS tensor's datatype is read from its array).
_DATATYPE_OF_NUMBER = {1: "BOOL", 2: "UINT8", 3: "UINT16", 4: "UINT32", 5: "UINT64", 6: "INT8", 7: "INT16",
                       8: "INT32", 9: "INT64", 10: "FP16", 11: "FP32", 12: "FP64", 13: "BYTES"}  # fmt: skip


def triton_to_numpy_type(data_type: int) -> type[np.generic] | None:
    """The numpy type of Triton's TRITONSERVER_DataType number (None for one it has none for, as Triton)."""
    return _NUMPY_OF_NUMBER.get(data_type)


def numpy_to_triton_type(data_type: DTypeLike) -> int | None:
    try:
        return _NUMBER_OF_NUMPY.get(np.dtype(data_type))
    except TypeError:
        return None


def triton_string_to_numpy(triton_type_string: str) -> type:
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def serialize_byte_tensor(input_tensor: np.ndarray) -> np.ndarray | None:
    """BYTES elements as Triton lays them out: each a 4-byte little-endian length, then its bytes."""
    if input_tensor.size == 0:
        return None
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        raise ValueError("cannot serialize bytes tensor: invalid datatype")
    flattened = bytearray()
    for item in input_tensor.flat:
        value = item if isinstance(item, bytes) else str(item).encode("utf-8")
        flattened += struct.pack("<I", len(value)) + value
    return np.frombuffer(bytes(flattened), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray:
    """The object array of a serialized BYTES tensor (`serialize_byte_tensor`'s layout)."""
    items: list[bytes] = []
    offset = 0
    data = bytes(encoded_tensor)
    while offset < len(data):
        (length,) = struct.unpack_from("<I", data, offset)
        offset += 4
        items.append(data[offset : offset + length])
        offset += length
    return np.array(items, dtype=np.object_)


def as_text(value: str | bytes) -> str:
    """A name as a string (Triton's binding takes bytes for its strings too: a name read from a BYTES tensor)."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


class Tensor:
    """A named tensor: a numpy array on the CPU (BYTES as an object array of bytes)."""

    __slots__ = ("_array", "_name")

    def __init__(self, name: str, data: np.ndarray, dtype: DTypeLike | None = None) -> None:
        if name.__class__ is not str:  # (the exact-type tests first: a model makes tensors on every request)
            name = as_text(name)
            if not isinstance(name, str):
                raise TypeError(f"a Tensor's name is a string, got {type(name).__name__}")
        if data.__class__ is not np.ndarray and not isinstance(data, np.ndarray):
            if hasattr(data, "__dlpack__"):
                raise TypeError(
                    f"Tensor {name!r} got a {type(data).__name__}; use Tensor.from_dlpack for DLPack objects"
                )
            raise TypeError(f"Tensor {name!r} takes a numpy array, got {type(data).__name__}")
        if dtype is not None:
            data = data.astype(dtype, copy=False)
        if data.dtype.kind in "SU":  # bytes_ or str_: BYTES, as Triton's object arrays of bytes
            data = data.astype(np.object_)
        self._name = name
        self._array: np.ndarray = data

    @classmethod
    def of(cls, name: str, array: np.ndarray) -> Tensor:
        """A request's input as the core decoded it: a name and a numpy array, nothing to check."""
        tensor = cls.__new__(cls)
        tensor._name = name
        tensor._array = array.astype(np.object_) if array.dtype.kind in "SU" else array
        return tensor

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def triton_dtype(self) -> int | None:
        return numpy_to_triton_type(self._array.dtype)

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self) -> Any:
        return self._array.__dlpack__()

    def __dlpack__(self, stream: Any = None) -> Any:
        return self._array.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        device: tuple[int, int] = self._array.__dlpack_device__()
        return device

    @staticmethod
    def from_dlpack(name: str, capsule: Any) -> Tensor:
        """A CPU tensor from a DLPack object (a GPU one is refused: this server has no GPU tensors)."""
        device = getattr(capsule, "__dlpack_device__", None)
        if device is not None and device()[0] != 1:  # kDLCPU
            raise unsupported("a GPU tensor (Tensor.from_dlpack of a device array)")
        try:
            return Tensor(name, np.from_dlpack(capsule))
        except (TypeError, BufferError, RuntimeError) as exc:
            raise unsupported(f"Tensor.from_dlpack of this object ({exc})") from exc

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, shape={list(self._array.shape)}, dtype={self._array.dtype})"


def datatype_of(tensor: Tensor) -> str:
    """The protocol datatype of a tensor's array."""
    array = tensor.as_numpy()
    number = numpy_to_triton_type(array.dtype)
    if number is None:
        raise TypeError(f"tensor {tensor.name()!r} has dtype {array.dtype}, which Triton has no type for")
    return _DATATYPE_OF_NUMBER[number]
