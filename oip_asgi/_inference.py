"""One inference: read the request as it streams in, run the model, build the response parts."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from ._body import BodyReader
from ._classification import classify
from ._datatypes import DATATYPES, element_size
from ._errors import BadRequest, ModelError, PayloadTooLarge
from ._models import Model, TensorSpec
from ._schemas import (
    InferenceRequest,
    InferenceResponse,
    OutputParameters,
    RequestInput,
    ResponseOutput,
    encoder,
    nested_request_decoder,
    request_decoder,
)
from ._tensors import (
    array_from_binary,
    array_from_json,
    binary_chunks,
    binary_size,
    json_data,
    output_array,
    shape_text,
)

DEFAULT_OUTPUT = "OUTPUT0"  # the name a single unnamed result gets when a model declares no outputs


@dataclass(slots=True)
class Inputs:
    """A decoded request: its tensors as arrays, and what the response should look like."""

    arrays: dict[str, np.ndarray]
    request_id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    requested: list[tuple[str, OutputParameters | None]] | None = None
    all_binary: bool = False


@dataclass(slots=True)
class InferenceResult:
    header: bytes
    binary: list[bytes | memoryview]

    @property
    def size(self) -> int:
        return len(self.header) + sum(len(part) for part in self.binary)


# msgspec's error when flat data meets a row: the request holds nested data.
_NESTED_ROW = re.compile(r"got `array` - at `\$\.inputs\[\d+\]\.data\[\d+\]`$")


# From about this size simdjson's fixed ~10 us (a parser, the envelope rebuilt for msgspec) is paid back.
BULK_SIZE = 8192


def _parse(data: bytes | bytearray | memoryview) -> InferenceRequest:
    """One typed pass for flat data; nested data, rarer, is parsed again keeping its rows as lists."""
    try:
        request: InferenceRequest = request_decoder.decode(data)
        return request
    except msgspec.ValidationError as exc:
        if _NESTED_ROW.search(str(exc)) is None:
            raise
    nested: InferenceRequest = nested_request_decoder.decode(data)
    return nested


def _decode_header(data: bytes | bytearray | memoryview, header_length: int | None) -> InferenceRequest:
    if len(data) >= BULK_SIZE:  # simdjson takes what it can parse straight into arrays; msgspec the rest
        # Imported here: simdjson's import (~7 ms) is for the processes that meet a large body, not every cold start.
        from ._bulk_json import bulk_request

        bulk = bulk_request(data)
        if bulk is not None:
            return bulk
    try:
        return _parse(data)
    except msgspec.ValidationError as exc:
        raise BadRequest(_validation_message(data, str(exc))) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # msgspec raises the latter for invalid UTF-8
        hint = _json_hint(data, str(exc), header_length)
        raise BadRequest(f"malformed inference request JSON: {exc}{hint}") from None
    except RecursionError:
        raise BadRequest("malformed inference request JSON: nested too deeply") from None


class _Named(msgspec.Struct):
    name: Any = None
    datatype: Any = None


class _InputNames(msgspec.Struct):
    inputs: Any = None


_INPUT_PATH = re.compile(r"`\$\.inputs\[(\d+)\]")


def _validation_message(data: bytes | bytearray | memoryview, error: str) -> str:
    """msgspec's error, naming the input it is in when there is one (`$.inputs[2].data[7]`)."""
    match = _INPUT_PATH.search(error)
    if match is not None:
        try:
            inputs = msgspec.json.decode(data, type=_InputNames).inputs
            named = msgspec.convert(inputs[int(match[1])], _Named)
        except (msgspec.MsgspecError, UnicodeDecodeError, LookupError, TypeError):
            named = _Named()
        if isinstance(named.name, str):
            # The datatype explains a bound (`float` < 65520.0 is FP16's range).
            of = f" ({named.datatype})" if named.datatype in DATATYPES else ""
            # Each element may also be a nested row (`int | array`); the element type is what was meant.
            message = f"input '{named.name}'{of}: {error.replace(' | array`', '`')}"
            if error.endswith(".datatype`"):
                message += f"; the datatypes are {', '.join(DATATYPES)}"
            return message
    return f"invalid inference request: {error}"


# A bare NaN or Infinity where a JSON value starts: what clients write for non-finite floats.
_NON_FINITE = re.compile(rb"[\[,:]\s*[+-]?(?:nan|inf)", re.IGNORECASE)


def _json_hint(data: bytes | bytearray | memoryview, error: str, header_length: int | None) -> str:
    """The likely cause of malformed JSON, for the mistakes clients make."""
    hint = ""
    position = re.search(r"\(byte (\d+)\)", error)
    if position is not None:
        at = int(position[1])
        if _NON_FINITE.search(bytes(data[max(at - 12, 0) : at + 4])):
            hint = "; JSON has no NaN or Infinity, send such tensors as binary data"
    if header_length is not None:
        hint += f" (in the {header_length}-byte header that Inference-Header-Content-Length declares)"
    elif "trailing characters" in error:
        hint += "; binary data after the JSON needs an Inference-Header-Content-Length header"
    return hint


_MAX_DIMS = 64  # numpy's limit on array dimensions
_MAX_BYTES = 2**63 - 1


def _check_shape(tensor: RequestInput) -> None:
    """Refuse shapes no array can take, before any data is decoded or allocated."""
    shape = tensor.shape
    if len(shape) > _MAX_DIMS:
        raise BadRequest(f"input '{tensor.name}' has {len(shape)} dimensions; at most {_MAX_DIMS} are supported")
    # numpy counts an array's bytes in int64, zero dimensions aside: [0, 2**62] is too large even empty.
    count = math.prod(shape) or math.prod(dim for dim in shape if dim)
    if count * (element_size(tensor.datatype) or 8) > _MAX_BYTES:
        raise BadRequest(f"input '{tensor.name}': shape {shape_text(shape)} holds more bytes than int64 can count")


def _check_inputs(name: str, model: Model, inputs: list[RequestInput]) -> None:
    seen: set[str] = set()
    for tensor in inputs:
        if tensor.name in seen:
            raise BadRequest(f"input '{tensor.name}' appears more than once")
        seen.add(tensor.name)
        _check_shape(tensor)
    if model.inputs is None:
        return
    for tensor in inputs:
        spec = model.input_spec(tensor.name)
        if spec is None:
            takes = ", ".join(spec.name for spec in model.inputs) or "no inputs"
            raise BadRequest(f"unexpected input '{tensor.name}'; model '{name}' takes {takes}")
        if tensor.datatype != spec.datatype:
            raise BadRequest(
                f"input '{tensor.name}' has datatype {tensor.datatype}, model '{name}' expects {spec.datatype}"
            )
        if not spec.accepts_shape(tensor.shape):
            raise BadRequest(
                f"input '{tensor.name}' has shape {shape_text(tensor.shape)}, "
                f"model '{name}' expects {shape_text(list(spec.shape))}"
            )
    for spec in model.inputs:
        if spec.name not in seen and not spec.optional:
            raise BadRequest(f"missing input '{spec.name}' for model '{name}'")


def _check_outputs(
    name: str, model: Model, request: InferenceRequest
) -> list[tuple[str, OutputParameters | None]] | None:
    if request.outputs is None:
        return None
    requested: list[tuple[str, OutputParameters | None]] = []
    seen: set[str] = set()
    for output in request.outputs:
        if output.name in seen:
            raise BadRequest(f"output '{output.name}' is requested more than once")
        seen.add(output.name)
        if model.outputs is not None:
            spec = model.output_spec(output.name)
            if spec is None:
                names = ", ".join(spec.name for spec in model.outputs)
                raise BadRequest(f"unknown output '{output.name}'; model '{name}' produces {names or 'no outputs'}")
            if output.parameters and output.parameters.classification and spec.datatype in ("BOOL", "BYTES"):
                raise BadRequest(f"output '{output.name}' is {spec.datatype}; classification needs a numeric output")
        requested.append((output.name, output.parameters))
    return requested


def _binary_data_output(request: InferenceRequest) -> bool:
    value = (request.parameters or {}).get("binary_data_output", False)
    if not isinstance(value, bool):
        raise BadRequest(f"parameter binary_data_output must be a boolean, got {value!r}")
    return value


async def read_inputs(
    reader: BodyReader, header_length: int | None, name: str, model: Model, *, max_header_size: int
) -> Inputs:
    """Decode the request as it arrives; every check that can fail runs before the big reads."""
    if header_length == 0:
        return await _read_raw_binary(reader, name, model)
    if header_length is None:
        if reader.content_length is not None and reader.content_length > max_header_size:
            raise PayloadTooLarge(
                f"JSON request body of {reader.content_length} bytes exceeds the {max_header_size}-byte limit "
                "for JSON; send large tensors as binary data"
            )
        body = await reader.read_rest()
        if reader.received > max_header_size:
            raise PayloadTooLarge(f"JSON request body exceeds the {max_header_size}-byte limit for JSON")
        request = _decode_header(body, None)
        declared = reader.received
    else:
        if header_length > max_header_size:
            raise PayloadTooLarge(
                f"Inference-Header-Content-Length {header_length} exceeds the {max_header_size}-byte limit"
            )
        if reader.content_length is not None and header_length > reader.content_length:
            raise BadRequest(
                f"Inference-Header-Content-Length {header_length} exceeds "
                f"the body's Content-Length {reader.content_length}"
            )
        request = _decode_header(await reader.read(header_length, "the JSON inference header"), header_length)
        declared = header_length

    _check_inputs(name, model, request.inputs)
    requested = _check_outputs(name, model, request)
    inputs = Inputs({}, request.id, request.parameters or {}, requested, _binary_data_output(request))

    sizes: list[tuple[RequestInput, int]] = []
    for tensor in request.inputs:
        size = tensor.binary_data_size
        if size is None:
            if tensor.data is None:
                raise BadRequest(f"input '{tensor.name}' has neither data nor binary_data_size")
            continue
        if tensor.data is not None:
            raise BadRequest(f"input '{tensor.name}' has both data and binary_data_size")
        if header_length is None:
            raise BadRequest(
                f"input '{tensor.name}' declares binary_data_size, "
                "but the request has no Inference-Header-Content-Length header"
            )
        expected = binary_size(tensor.datatype, tensor.shape)
        if expected is not None and size != expected:
            raise BadRequest(
                f"input '{tensor.name}': binary_data_size is {size}, but {tensor.datatype} of shape "
                f"{shape_text(tensor.shape)} takes {expected} bytes"
            )
        sizes.append((tensor, size))
        declared += size
    if header_length is not None:
        if declared > reader.limit:
            raise PayloadTooLarge(f"request declares {declared} bytes, over the limit of {reader.limit} bytes")
        if reader.content_length is not None and declared != reader.content_length:
            raise BadRequest(
                f"Content-Length is {reader.content_length}, but the header ({header_length} bytes) "
                f"and binary_data_size values declare {declared} bytes"
            )

    # Binary tensors follow the header in input order; each is copied once, into its own array.
    for tensor, size in sizes:
        buffer = np.empty(size, dtype=np.uint8)
        await reader.readinto(buffer.data, f"input '{tensor.name}'")
        inputs.arrays[tensor.name] = array_from_binary(tensor.name, tensor.datatype, tensor.shape, buffer)
    await reader.expect_end(declared)
    for tensor in request.inputs:
        if tensor.data is not None:
            inputs.arrays[tensor.name] = array_from_json(tensor.name, tensor.datatype, tensor.shape, tensor.data)
    if sizes:  # keep the request's input order, whichever encoding each input came in
        inputs.arrays = {tensor.name: inputs.arrays[tensor.name] for tensor in request.inputs}
    return inputs


async def _read_raw_binary(reader: BodyReader, name: str, model: Model) -> Inputs:
    """Inference-Header-Content-Length: 0: the whole body is the single input's tensor bytes."""
    if model.inputs is None or len(model.inputs) != 1:
        count = "no declared inputs" if model.inputs is None else f"{len(model.inputs)} inputs"
        raise BadRequest(
            "a raw binary request (Inference-Header-Content-Length: 0) needs a model with one input; "
            f"'{name}' has {count}"
        )
    spec = model.inputs[0]
    if spec.datatype == "BYTES":
        element = np.empty(1, dtype=object)
        element[0] = bytes(await reader.read_rest())
        return Inputs({spec.name: element}, all_binary=True)
    if reader.content_length is not None:
        buffer = np.empty(reader.content_length, dtype=np.uint8)
        await reader.readinto(buffer.data, f"input '{spec.name}'")
        await reader.expect_end(reader.content_length)
    else:
        buffer = np.frombuffer(bytearray(await reader.read_rest()), dtype=np.uint8)
    shape = _raw_shape(spec, buffer.size)
    return Inputs({spec.name: array_from_binary(spec.name, spec.datatype, shape, buffer)}, all_binary=True)


def _raw_shape(spec: TensorSpec, size: int) -> list[int]:
    itemsize = element_size(spec.datatype)
    if size % itemsize:
        raise BadRequest(f"raw binary body of {size} bytes is not a whole number of {spec.datatype} elements")
    count = size // itemsize
    dims = list(spec.shape)
    variable = [axis for axis, dim in enumerate(dims) if dim == -1]
    if len(variable) > 1 and variable[0] == 0:
        dims[0] = 1  # a raw request is a batch of one
        variable = variable[1:]
    if len(variable) > 1:
        raise BadRequest(
            f"input '{spec.name}' has shape {shape_text(dims)}: a raw binary request allows one variable dimension"
        )
    fixed = math.prod(dim for dim in dims if dim != -1)
    if variable and fixed and count % fixed == 0:
        dims[variable[0]] = count // fixed
    elif variable or count != fixed:
        raise BadRequest(
            f"raw binary body of {count} {spec.datatype} elements does not fit shape {shape_text(list(spec.shape))}"
        )
    return dims


def _produced_outputs(name: str, model: Model, result: Any) -> Mapping[str, Any]:
    if isinstance(result, Mapping):
        return result
    if model.outputs is None:
        return {DEFAULT_OUTPUT: result}
    if len(model.outputs) == 1:
        return {model.outputs[0].name: result}
    raise ModelError(
        f"model '{name}' returned a single {type(result).__name__} "
        f"but declares {len(model.outputs)} outputs; return a mapping"
    )


def build_response(name: str, model: Model, inputs: Inputs, result: Any) -> InferenceResult:
    produced = _produced_outputs(name, model, result)
    if inputs.requested is not None:
        wanted = inputs.requested
    elif model.outputs is not None:
        wanted = [(spec.name, None) for spec in model.outputs]
    else:
        wanted = [(output, None) for output in produced]
    if model.outputs is not None:
        undeclared = [output for output in produced if model.output_spec(output) is None]
        if undeclared:
            raise ModelError(f"model '{name}' returned undeclared outputs: {', '.join(map(repr, undeclared))}")

    outputs: list[ResponseOutput] = []
    binary: list[bytes | memoryview] = []
    for output, parameters in wanted:
        if not isinstance(output, str):  # it would go out as a number or base64 text: a name nobody asked for
            raise ModelError(f"model '{name}' returned an output keyed {output!r}; output names are strings")
        if output not in produced:
            if model.outputs is None:
                raise BadRequest(
                    f"model '{name}' did not produce output '{output}' (it produced {', '.join(produced)})"
                )
            raise ModelError(f"model '{name}' did not return its declared output '{output}'")
        spec = model.output_spec(output)
        try:
            array, datatype = output_array(output, produced[output], spec.datatype if spec else None)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"model '{name}': {exc}") from None
        except Exception as exc:  # an array-like that fails to convert, e.g. a torch tensor that requires grad
            raise ModelError(f"model '{name}': output '{output}' is not an array: {type(exc).__name__}: {exc}") from exc
        if spec is not None and not spec.accepts_shape(array.shape):
            raise ModelError(
                f"model '{name}' returned output '{output}' with shape {shape_text(list(array.shape))}, "
                f"declared {shape_text(list(spec.shape))}"
            )
        if parameters is not None and parameters.classification is not None:
            array = classify(output, array, datatype, parameters.classification, model.labels_for(output))
            datatype = "BYTES"
        as_binary = inputs.all_binary
        if parameters is not None and parameters.binary_data is not None:
            as_binary = parameters.binary_data
        if as_binary:
            size, chunks = binary_chunks(array, datatype)
            binary.extend(chunks)
            outputs.append(
                ResponseOutput(
                    name=output, datatype=datatype, shape=list(array.shape), parameters={"binary_data_size": size}
                )
            )
        else:
            outputs.append(
                ResponseOutput(
                    name=output, datatype=datatype, shape=list(array.shape), data=json_data(output, array, datatype)
                )
            )
    response = InferenceResponse(model_name=name, model_version=model.version, id=inputs.request_id, outputs=outputs)
    return InferenceResult(encoder.encode(response), binary)
