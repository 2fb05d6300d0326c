"""The server's and a model's metadata, as every wire tells them (REST encodes these structs as they are)."""

from __future__ import annotations

import msgspec


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
