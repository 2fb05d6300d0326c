"""The server's and a model's metadata, as every wire tells them (REST encodes these structs as they are,
gRPC builds its messages from them)."""

from __future__ import annotations

import msgspec

from .._declarations.spec import TensorSpec
from .serving import ServedModel


class TensorMetadata(msgspec.Struct, gc=False):
    name: str
    datatype: str
    shape: list[int]


class ServerMetadata(msgspec.Struct, gc=False):
    name: str
    version: str
    extensions: list[str]


class ModelMetadata(msgspec.Struct, gc=False, omit_defaults=True):
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]
    properties: dict[str, str] | None = None


def model_metadata(model: ServedModel, versions: list[str]) -> ModelMetadata:
    """`model`'s metadata (name, versions, platform, tensors, properties), served in `versions`."""
    declared = model.model
    return ModelMetadata(
        name=model.name,
        versions=versions,
        platform=declared.platform,
        inputs=_tensors(declared.inputs),
        outputs=_tensors(declared.outputs),
        properties=declared.properties,
    )


def _tensors(specs: tuple[TensorSpec, ...] | None) -> list[TensorMetadata]:
    return [TensorMetadata(spec.name, spec.datatype, list(spec.shape)) for spec in specs or ()]
