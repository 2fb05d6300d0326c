"""Triton's words for what a declaration says: its datatype names, the backend of each platform, a tensor
as its ModelConfig writes one, and its integer versions. The model configuration extension (the core)
and the reader of a repository's config.pbtxt both speak them."""

from __future__ import annotations

from typing import Any

from .spec import TensorSpec

# Triton's DataType enum names for the protocol's datatypes; BYTES is Triton's TYPE_STRING.
DATA_TYPES = {
    "BOOL": "TYPE_BOOL",
    "UINT8": "TYPE_UINT8",
    "UINT16": "TYPE_UINT16",
    "UINT32": "TYPE_UINT32",
    "UINT64": "TYPE_UINT64",
    "INT8": "TYPE_INT8",
    "INT16": "TYPE_INT16",
    "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64",
    "FP16": "TYPE_FP16",
    "FP32": "TYPE_FP32",
    "FP64": "TYPE_FP64",
    "BYTES": "TYPE_STRING",
    "BF16": "TYPE_BF16",
}
DATATYPES_OF = {type_name: datatype for datatype, type_name in DATA_TYPES.items()}

# Triton's backend for the platforms it has one for; any other model runs in Python, as in Triton's python backend.
BACKENDS = {
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "torch_export": "pytorch",
    "tensorflow_savedmodel": "tensorflow",
    "tensorflow_graphdef": "tensorflow",
    "tensorrt_plan": "tensorrt",
}


def backend_of(platform: str) -> str:
    return BACKENDS.get(platform, "python")


def tensor_json(spec: TensorSpec, batching: bool) -> dict[str, Any]:
    """`spec` as a ModelConfig input or output: a batching model's dims leave out the batch dimension."""
    dims = list(spec.shape[1:] if batching else spec.shape)  # a batching model's specs all start with -1
    return {"name": spec.name, "data_type": DATA_TYPES[spec.datatype], "dims": dims}


def is_integer_version(version: str) -> bool:
    """Whether `version` is one of Triton's (a folder name or a request's version of ASCII digits)."""
    return version.isascii() and version.isdigit()  # isdigit alone takes "²", which int() refuses


def version_key(version: str) -> tuple[int, int, str]:
    """The order of versions: integers numerically (as Triton's), after any named ones."""
    return (1, int(version), "") if is_integer_version(version) else (0, 0, version)
