"""A ModelInferResponse's bytes written directly: its head (names, id, parameters) serialized by protobuf once
and reused while it stays the same (every response of a stream), each output's header and raw contents
appended in the order protobuf writes its fields, so the bytes are those `_codec.serialize` writes.

For the replies of raw outputs without parameters of their own, which is nearly every reply; the others go
through `_codec.encode_response`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._core.inference import OutputTensor
from .._core.tensors import binary_chunks

# Tags of length-delimited fields: ModelInferResponse.outputs (5) and raw_output_contents (6); InferOutputTensor's
# name (1), datatype (2) and shape (3, packed).
_OUTPUTS, _RAW, _NAME, _DATATYPE, _SHAPE = (bytes([field << 3 | 2]) for field in (5, 6, 1, 2, 3))
_SMALL = [bytes([value]) for value in range(0x80)]  # the varints of one byte, made once


def varint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def plain(outputs: list[OutputTensor]) -> bool:
    """Whether these outputs are written here: none has parameters of its own (a model's, or the binary size's),
    and none goes to shared memory (`_codec.encode_response` writes it there)."""
    for output in outputs:
        if output.parameters or (output.requested is not None and output.requested.placed is not None):
            return False
    return True


def response_bytes(head: bytes, outputs: list[OutputTensor], field: int | None = None) -> bytes:
    """The response of `head` (its serialized fields before the outputs) and `outputs` (raw contents); with
    `field`, as that field of a message."""
    parts: list[Any] = [head]
    raw: list[Any] = []
    for output in outputs:
        array: np.ndarray = output.array
        name = output.name.encode()
        datatype = output.datatype.encode()
        tensor: list[bytes] = [_NAME, varint(len(name)), name] if name else []  # proto3 leaves "" out
        tensor += (_DATATYPE, varint(len(datatype)), datatype)
        if array.ndim:
            dims = b"".join([varint(dim) for dim in array.shape])
            tensor += (_SHAPE, varint(len(dims)), dims)
        header = b"".join(tensor)
        parts += (_OUTPUTS, varint(len(header)), header)
        size, chunks = binary_chunks(array, output.datatype)
        raw += (_RAW, varint(size), chunks[0])
    message = b"".join(parts + raw)
    if field is None:
        return message
    return b"".join((bytes([field << 3 | 2]), varint(len(message)), message))
