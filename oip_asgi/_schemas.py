"""Wire schemas: msgspec Structs for every JSON object the protocol exchanges.

Decoders and encoders are built once at import. Unknown request fields are tolerated so that
clients speaking a newer protocol revision still work; msgspec's errors carry a JSON path
(``$.inputs[0].shape[1]``), which is passed through to the client as the error message.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ._datatypes import Datatype

# A dimension is "representable as an unsigned 64-bit integer"; numpy indexes with int64, so that is our ceiling.
Dim = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
ByteCount = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
ClassCount = Annotated[int, msgspec.Meta(ge=1)]


class InputParameters(msgspec.Struct, gc=False):
    binary_data_size: ByteCount | None = None


class RequestInput(msgspec.Struct, gc=False):
    name: str
    shape: list[Dim]
    datatype: Datatype
    parameters: InputParameters | None = None
    # Kept raw: its element type depends on `datatype`, so it is decoded later with a typed decoder.
    # An empty Raw means the field was absent. A factory, not a default: msgspec cannot write a Raw
    # default into a JSON Schema (the OpenAPI document).
    data: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)

    @property
    def binary_data_size(self) -> int | None:
        return None if self.parameters is None else self.parameters.binary_data_size


class OutputParameters(msgspec.Struct, gc=False):
    binary_data: bool | None = None
    classification: ClassCount | None = None


class RequestOutput(msgspec.Struct, gc=False):
    name: str
    parameters: OutputParameters | None = None


class InferenceRequest(msgspec.Struct, gc=False):
    inputs: list[RequestInput]
    id: str | None = None
    parameters: dict[str, Any] | None = None
    outputs: list[RequestOutput] | None = None


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


class ResponseOutput(msgspec.Struct, gc=False, omit_defaults=True, kw_only=True):
    name: str
    datatype: str
    shape: list[int]
    parameters: dict[str, Any] | None = None
    data: Any = msgspec.UNSET


class InferenceResponse(msgspec.Struct, gc=False, omit_defaults=True, kw_only=True):
    model_name: str
    model_version: str
    id: str | None = None
    parameters: dict[str, Any] | None = None
    outputs: list[ResponseOutput]


request_decoder = msgspec.json.Decoder(InferenceRequest)
encoder = msgspec.json.Encoder()
