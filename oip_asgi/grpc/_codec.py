"""gRPC's ModelInferRequest into the core's `DecodedRequest`, and the core's `Reply` into a ModelInferResponse.

Every check that can fail runs before any tensor is built: the request's tensors through the same
checks as REST's (`check_inputs`, `check_outputs`), then each one's data against its claimed shape,
so that no shape allocates before its data is known to fill it. Raw inputs are viewed, not copied:
the arrays a model gets are read-only views of the request message's bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from math import prod
from typing import Any, NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from .._core.checks import bad_classification, check_binary_size, check_inputs, check_outputs
from .._core.request import DecodedRequest, RequestedOutput
from .._core.responding import Reply
from .._core.serving import ServedModel
from .._core.shared_memory import (
    BYTE_SIZE,
    OFFSET,
    PARAMETERS,
    REGION,
    Place,
    SharedMemory,
    Written,
    hold_regions,
    output_to_write,
    placement,
)
from .._core.tensors import array_from_binary, binary_chunks, miscount, out_of_range
from .._declarations.datatypes import native_dtype, numpy_dtype
from .._declarations.errors import BadRequest, ModelError, quoted
from .._protobuf import inference_pb2 as pb
from ._response import varint

# The request parameter that asks for outputs in typed contents rather than raw_output_contents.
TYPED_OUTPUTS = "typed_output_contents"

# The InferTensorContents field of each datatype; FP16 and BF16 have none (raw contents only).
CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
# The narrower integer datatypes whose field holds wider values: each value must fit.
_NARROW = {name: np.iinfo(native_dtype(name)) for name in ("UINT8", "UINT16", "INT8", "INT16")}
# The datatypes whose raw contents are any bytes of their size (not BOOL, BYTES, or BF16 and its optional dtype).
_FIXED = {name: numpy_dtype(name) for name in CONTENTS_FIELD if name not in ("BOOL", "BYTES")}
_RAW_OUTPUT_TAG = bytes([6 << 3 | 2])  # ModelInferResponse.raw_output_contents, length-delimited
_INT64 = (-(2**63), 2**63 - 1)
_RAW_INPUT_FIELD = 7  # ModelInferRequest.raw_input_contents
# Requests at least this large have their raw contents split off before parsing (see `parse_request`).
SPLIT_ABOVE = 1 << 16
_UINT64_TOP = 2**64 - 1


def request_parameters(parameters: Mapping[str, pb.InferParameter], where: str) -> dict[str, Any]:
    """InferParameter values as REST's parameters reach a model: a plain dict of Python values."""
    plain: dict[str, Any] = {}
    for name, parameter in parameters.items():
        choice = parameter.WhichOneof("parameter_choice")
        if choice is None:
            raise BadRequest(f"{where}parameter {quoted(name)} has no value")
        plain[name] = getattr(parameter, choice)
    return plain


def parse_request(body: bytes) -> tuple[pb.ModelInferRequest, Sequence[bytes | memoryview]]:
    """The request without its raw contents, and the raw contents as views of `body`.

    Parsing a message copies every bytes field into protobuf's memory, and reading one copies it again
    into a Python bytes: for a large tensor, two copies of the payload before the model sees it. So the
    top level of a large message is walked here, field by field, and raw_input_contents become views of
    the received bytes; the rest (a few hundred bytes of names, shapes and parameters) is parsed by
    protobuf as usual. Unknown fields, groups among them, are skipped as protobuf skips them; a message that ends
    early, or holds a wire type protobuf refuses, is refused.
    """
    if len(body) < SPLIT_ABOVE:
        return _parse_message(body), ()
    view = memoryview(body)
    header: list[memoryview] = []
    raw: list[memoryview] = []
    position, end = 0, len(body)
    while position < end:
        start = position
        key, position = _read_varint(body, position)
        if key & 7 == 2 and key >> 3 == _RAW_INPUT_FIELD:
            length, position = _read_varint(body, position)
            position += length
            if position > end:
                raise _truncated(start)
            raw.append(view[position - length : position])
            continue
        # Every other field, unknown ones and groups too, goes to protobuf as it came.
        position = _field_end(body, position, key, start)
        header.append(view[start:position])
    return _parse_message(b"".join(header)), raw


# protobuf's own limit on nested messages and groups.
_MAX_GROUP_DEPTH = 100


def _field_end(body: bytes, position: int, key: int, start: int) -> int:
    """Where the field whose `key` ends at `position` ends: any wire type protobuf skips, groups to their end tag."""
    groups: list[int] = []
    while True:
        wire = key & 7
        if wire == 0:
            _, position = _read_varint(body, position)
        elif wire == 1:
            position += 8
        elif wire == 5:
            position += 4
        elif wire == 2:
            length, position = _read_varint(body, position)
            position += length
        elif wire == 3:
            groups.append(key >> 3)
            if len(groups) > _MAX_GROUP_DEPTH:
                raise BadRequest(
                    f"the request is not a valid ModelInferRequest: groups nested too deeply at byte {start}"
                )
        elif wire == 4 and groups and groups[-1] == key >> 3:
            groups.pop()
        else:
            what = "an end-group tag that closes no open group" if wire == 4 else f"wire type {wire}"
            raise BadRequest(f"the request is not a valid ModelInferRequest: {what} at byte {start}")
        if position > len(body):
            raise _truncated(start)
        if not groups:
            return position
        if position == len(body):
            raise _truncated(start)
        key, position = _read_varint(body, position)


def _truncated(start: int) -> BadRequest:
    return BadRequest(f"the request is not a valid ModelInferRequest: its field at byte {start} is truncated")


from_string = pb.ModelInferRequest.FromString


def _parse_message(body: bytes) -> pb.ModelInferRequest:
    try:
        return from_string(body)
    except DecodeError as exc:
        raise not_valid(exc) from None


def not_valid(exc: DecodeError) -> BadRequest:
    return BadRequest(f"the request is not a valid ModelInferRequest: {exc}")


def _read_varint(body: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    for index in range(position, min(position + 10, len(body))):
        byte = body[index]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, index + 1
        shift += 7
    raise BadRequest(f"the request is not a valid ModelInferRequest: a varint at byte {position} is truncated")


class _Input(NamedTuple):
    """An input's header read out of its message once: upb makes a new container at every `.shape`."""

    name: str
    datatype: str
    shape: list[int]
    tensor: pb.ModelInferRequest.InferInputTensor


_new = tuple.__new__  # a NamedTuple made without its __new__ in Python: one call fewer per input


def decode_request(
    request: pb.ModelInferRequest,
    model: ServedModel,
    raw: Sequence[bytes | memoryview] = (),
    memory: SharedMemory | None = None,
) -> tuple[DecodedRequest, bool]:
    """The request as the core takes it, and whether its outputs go back in typed contents.

    `raw` holds the raw contents `parse_request` split off, if it did; else they are the request's own.
    `memory` holds the shared-memory regions its tensors may name (none without it).
    """
    # Slices, not iteration: iterating a upb container ends on an IndexError it formats, each time. A loop,
    # not a comprehension: no call of its own.
    inputs: list[_Input] = []
    for tensor in request.inputs[:]:
        inputs.append(_new(_Input, (tensor.name, tensor.datatype, tensor.shape[:], tensor)))
    check_inputs(model, inputs)
    placed: list[tuple[_Input, Place]] = []
    for item in inputs:
        if item.tensor.parameters:
            place = _place(item.tensor, item.name)
            if place is not None:
                if item.tensor.HasField("contents"):  # Triton's words
                    raise BadRequest(
                        f"unexpected 'content' provided when using shared memory for input tensor "
                        f"{quoted(item.name)} for model {quoted(model.name)}"
                    )
                placed.append((item, place))
    parameters = request_parameters(request.parameters, "") if request.parameters else {}
    typed = parameters.get(TYPED_OUTPUTS, False)
    if not isinstance(typed, bool):
        raise BadRequest(f"parameter {TYPED_OUTPUTS} must be a boolean, got {_value_text(typed)}")
    outputs = request.outputs[:]
    requested: list[RequestedOutput] | None = None
    places_outputs = False
    if outputs:
        requested = []
        for output in outputs:  # by name alone, the usual request; else each one's parameters read
            if output.parameters:
                requested, places_outputs = _requested(outputs)
                break
            requested.append(RequestedOutput(output.name))
    if requested is not None:
        check_outputs(model, requested)
    decoded = DecodedRequest({}, request.id or None, parameters, requested)
    if model.model.takes_input_parameters:
        own = ((item.name, _own_parameters(item)) for item in inputs if item.tensor.parameters)
        decoded.input_parameters = {name: parameters for name, parameters in own if parameters}

    if not raw:
        raw = request.raw_input_contents[:]
    items = inputs  # those whose data the message carries
    if placed or places_outputs:
        if memory is None:
            raise BadRequest("this server holds no shared memory regions")
        hold_regions(memory, decoded, model.name, [(item.name, item.datatype, item.shape, at) for item, at in placed])
        names = {item.name for item, _ in placed}
        items = [item for item in inputs if item.name not in names]
    try:
        if len(raw):
            for item in items:
                if item.tensor.HasField("contents"):
                    # Triton's words first: clients match on them (its own examples read the error text).
                    raise BadRequest(
                        f"contents field must not be specified when using raw_input_contents for {quoted(item.name)} "
                        f"for model {quoted(model.name)}; send every input one way"
                    )
            if len(raw) != len(items):
                some = "" if items is inputs else " not in shared memory"
                raise BadRequest(
                    f"the request has {len(raw)} raw_input_contents for {len(items)} inputs{some}; "
                    f"raw_input_contents[i] holds inputs[i]{_without_contents(items[len(raw) :])}"
                )
            arrays = decoded.inputs
            for item, content in zip(items, raw, strict=True):
                dtype = _FIXED.get(item.datatype)  # a small message's (bytes) viewed in one call
                if (
                    dtype is not None
                    and content.__class__ is bytes
                    and len(content) == dtype.itemsize * prod(item.shape)
                ):
                    arrays[item.name] = np.ndarray(item.shape, dtype, content)
                else:
                    arrays[item.name] = _raw_input(item, content)
        else:
            for item in items:
                decoded.inputs[item.name] = _typed_input(item)
    except BaseException:
        if decoded.held is not None:
            decoded.held.release()
        raise
    if placed:  # the request's input order, whichever way each came
        decoded.inputs = {item.name: decoded.inputs[item.name] for item in inputs}
    return decoded, typed


def _place(tensor: Any, name: str) -> Place | None:
    """A tensor's shared-memory parameters (None where it names no region), in Triton's words when wrong."""
    parameters = tensor.parameters
    values: dict[str, Any] = {}
    for parameter, expected in ((REGION, "string_param"), (OFFSET, "int64_param"), (BYTE_SIZE, "int64_param")):
        given = parameters.get(parameter)
        if given is None:
            values[parameter] = None
            continue
        if given.WhichOneof("parameter_choice") != expected:
            raise BadRequest(
                f"invalid value type for '{parameter}' parameter for tensor {quoted(name)}, expected {expected}."
            )
        values[parameter] = getattr(given, expected)
    return placement(name, values[REGION], values[OFFSET], values[BYTE_SIZE])


def _own_parameters(item: _Input) -> dict[str, Any]:
    """An input's parameters for a model that asks for them: without the protocol's shared memory parameters."""
    found = request_parameters(item.tensor.parameters, f"input {quoted(item.name)}: ")
    return {key: value for key, value in found.items() if key not in PARAMETERS}


# Inputs named in a message at most: a request can hold any number, and grpcio sends no status over 16 KiB.
_MAX_NAMED = 8


def _without_contents(inputs: Sequence[_Input]) -> str:
    if not inputs:
        return ""
    names = ", ".join(quoted(item.name) for item in inputs[:_MAX_NAMED])
    more = f" and {len(inputs) - _MAX_NAMED} more" if len(inputs) > _MAX_NAMED else ""
    return f"; no raw_input_contents for input{'s' if len(inputs) > 1 else ''} {names}{more}"


def _requested(outputs: list[Any]) -> tuple[list[RequestedOutput], bool]:
    """The outputs asked for (a request's InferRequestedOutputTensors), and whether one is placed in shared memory."""
    requested, places = [], False
    for output in outputs:
        classification = place = None
        parameters = output.parameters
        if not parameters:
            requested.append(RequestedOutput(output.name))
            continue
        place = _place(output, output.name)
        parameter = parameters.get("classification")
        if place is not None:
            if parameter is not None:  # Triton's words
                raise BadRequest("output can't set both 'shared_memory_region' and 'classification'")
            places = True
        if parameter is not None:
            choice = parameter.WhichOneof("parameter_choice")
            value = parameter.int64_param if choice == "int64_param" else parameter.uint64_param
            integer = choice in ("int64_param", "uint64_param")
            if not integer or value < 1:
                # An integer as REST would show it; any other choice named, so the client sees its mistake.
                got = str(value) if integer else _parameter_text(parameter)
                raise BadRequest(bad_classification(output.name, got))
            classification = value
        requested.append(RequestedOutput(output.name, classification, placed=place))
    return requested, places


def _parameter_text(parameter: pb.InferParameter) -> str:
    choice = parameter.WhichOneof("parameter_choice")
    return "no value" if choice is None else f"{choice} {_value_text(getattr(parameter, choice))}"


def _value_text(value: Any) -> str:
    # A client's string, quoted and cut as its names are: an error must stay small enough to send.
    return quoted(value) if isinstance(value, str) else repr(value)


def _raw_input(tensor: _Input, content: bytes | memoryview) -> np.ndarray:
    check_binary_size(tensor.name, tensor.datatype, tensor.shape, len(content))
    return array_from_binary(tensor.name, tensor.datatype, tensor.shape, np.frombuffer(content, dtype=np.uint8))


def _typed_input(item: _Input) -> np.ndarray:
    tensor, shape, datatype = item.tensor, item.shape, item.datatype
    count = math.prod(shape)
    field = CONTENTS_FIELD.get(datatype)
    if not tensor.HasField("contents"):
        if count == 0 and field is not None:
            return np.empty(shape, dtype=native_dtype(datatype))
        raise BadRequest(f"input {quoted(item.name)} has no data: send raw_input_contents or typed contents")
    contents = tensor.contents
    if field is None:
        raise BadRequest(
            f"input {quoted(item.name)} is {datatype}, which has no typed contents; send raw_input_contents"
        )
    others = [descriptor.name for descriptor, _ in contents.ListFields() if descriptor.name != field]
    if others:
        raise BadRequest(f"input {quoted(item.name)} is {datatype}, whose typed contents are {field}, not {others[0]}")
    values: Sequence[Any] = getattr(contents, field)[:]  # a list: iterating upb's container costs an IndexError
    if len(values) != count:
        raise miscount(item.name, len(values), shape)
    if datatype == "BYTES":
        array = np.empty(count, dtype=object)
        array[:] = list(values)
        return array.reshape(shape)
    dtype = native_dtype(datatype)
    if datatype in _NARROW:
        wide = np.fromiter(values, np.int64 if datatype.startswith("INT") else np.uint64, count)
        info = _NARROW[datatype]
        outside = np.flatnonzero((wide < info.min) | (wide > info.max))
        if outside.size:
            index = int(outside[0])
            raise BadRequest(out_of_range(item.name, datatype, index, int(wide[index]), info.min, info.max))
        return wide.astype(dtype).reshape(shape)
    return np.fromiter(values, dtype, count).reshape(shape)


def _parameter(target: pb.InferParameter, value: Any, where: str) -> None:
    if isinstance(value, bool):
        target.bool_param = value
    elif isinstance(value, int):
        if _INT64[0] <= value <= _INT64[1]:
            target.int64_param = value
        elif 0 <= value <= _UINT64_TOP:
            target.uint64_param = value
        else:
            raise ModelError(f"{where} is {value}, which neither int64 nor uint64 holds")
    elif isinstance(value, float):
        target.double_param = value
    else:
        target.string_param = value


def _set_parameters(target: Any, parameters: Mapping[str, Any] | None, where: str) -> None:
    for name, value in (parameters or {}).items():
        _parameter(target[name], value, f"{where}parameter '{name}'")


def encode_response(
    reply: Reply, parameters: dict[str, Any] | None, typed: bool
) -> tuple[pb.ModelInferResponse, list[Any]]:
    """`reply` as a response with `parameters` (its own, or more), without its raw contents; and the raw
    contents, one per output in order.

    The raw contents are appended to the serialized message by `serialize`, straight from the
    arrays: a large tensor is copied once, into the bytes gRPC sends, not first into the message.
    """
    model = reply.model
    response = pb.ModelInferResponse(model_name=model.name, model_version=model.version, id=reply.request.id or "")
    model_name = f"model '{model.name}' returned "
    _set_parameters(response.parameters, parameters, f"{model_name}response ")
    raw: list[Any] = []
    placed: list[Written] = []
    for output in reply.outputs:
        tensor = response.outputs.add(name=output.name, datatype=output.datatype, shape=output.array.shape)
        _set_parameters(tensor.parameters, output.parameters, f"{model_name}output '{output.name}' ")
        if output.requested is not None and output.requested.placed is not None:
            # Written into its region; answered without data, as Triton answers it (an empty raw content).
            placed.append(output_to_write(output.requested.placed, output.name, output.array, output.datatype))
            if not typed:
                raw.append(b"")
        elif typed:
            field = CONTENTS_FIELD.get(output.datatype)
            if field is None:
                raise BadRequest(
                    f"output {quoted(output.name)} is {output.datatype}, which has no typed contents; "
                    f"leave {TYPED_OUTPUTS} unset to receive raw_output_contents"
                )
            getattr(tensor.contents, field).extend(output.array.ravel().tolist())
        else:
            _, chunks = binary_chunks(output.array, output.datatype)
            raw.append(chunks[0])
    for written in placed:  # once every output fits its place
        written.write()
    return response, raw


def serialize(response: pb.ModelInferResponse, raw: list[Any], field: int | None = None) -> bytes:
    """The response's wire bytes, its raw_output_contents appended in order; with `field`, the bytes of
    a message holding the response as that field (ModelStreamInferResponse's infer_response)."""
    parts: list[Any] = [response.SerializeToString()]
    size = len(parts[0])
    for content in raw:
        length = memoryview(content).nbytes
        head = _RAW_OUTPUT_TAG + varint(length)
        parts += (head, content)
        size += len(head) + length
    if field is not None:
        parts.insert(0, bytes([field << 3 | 2]) + varint(size))
    return parts[0] if len(parts) == 1 else b"".join(parts)
