"""A REST inference request read from its streaming body: the JSON header, then each binary tensor.

Every check that can fail runs before the large reads, and each binary tensor is copied once,
straight from the body into its own array.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._core.checks import check_against, check_binary_size, check_inputs, check_outputs, raw_input_shape
from .._core.request import DecodedRequest, RequestedOutput
from .._core.reserved import rest_parameters
from .._core.serving import ServedModel
from .._core.shared_memory import Place, SharedMemory, hold_regions, placement
from .._core.tensors import array_from_binary
from .._declarations.errors import BadRequest, PayloadTooLarge, quoted
from .body import BodyReader
from .json_request import decode_request, input_parameters
from .json_tensors import array_from_json
from .schemas import InferenceRequest, InputParameters, OutputParameters, RequestInput, RequestOutput


async def read_request(
    reader: BodyReader,
    header_length: int | None,
    model: ServedModel,
    memory: SharedMemory,
    *,
    max_header_size: int,
    watch: Callable[[DecodedRequest], None] | None = None,
) -> DecodedRequest:
    """The request in the body; `header_length` is Inference-Header-Content-Length (None without it); `memory`
    the shared-memory regions its tensors may name; `watch` its `DecodedRequest.watch`."""
    if header_length == 0:
        raw = await _read_raw_binary(reader, model)
        raw.watch = watch
        return raw
    if header_length is None:
        if reader.content_length is not None and reader.content_length > max_header_size:
            raise PayloadTooLarge(
                f"JSON request body of {reader.content_length} bytes exceeds the {max_header_size}-byte limit "
                "for JSON; send large tensors as binary data"
            )
        header = await reader.read_rest()
        if reader.received > max_header_size:
            raise PayloadTooLarge(f"JSON request body exceeds the {max_header_size}-byte limit for JSON")
        request = decode_request(header, None)
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
        header = await reader.read(header_length, "the JSON inference header")
        request = decode_request(header, header_length)
        declared = header_length

    check_inputs(model, request.inputs)
    outputs, places_outputs = _requested(request) if request.outputs is not None else (None, False)
    if request.parameters:  # what Triton's frontend takes, taken
        parameters, controls, binary = rest_parameters(request.parameters)
    else:
        parameters, controls, binary = {}, None, False
    decoded = DecodedRequest({}, request.id, parameters, outputs, binary, controls=controls, watch=watch)
    if model.model.takes_input_parameters:
        decoded.input_parameters = input_parameters(header)
    if decoded.outputs is not None:
        check_outputs(model, decoded.outputs)

    sizes: list[tuple[RequestInput, int]] = []
    placed: list[tuple[RequestInput, Place]] = []
    for tensor in request.inputs:
        if tensor.parameters is None:  # the usual input: its data in the JSON (`binary_data_size` is None)
            if tensor.data is None:
                raise BadRequest(f"input {quoted(tensor.name)} has neither data nor binary_data_size")
            continue
        size = tensor.parameters.binary_data_size
        if tensor.parameters.shared_memory_region is not None:
            placed.append((tensor, _place(tensor, size)))
            continue
        if size is None:
            if tensor.data is None:
                raise BadRequest(f"input {quoted(tensor.name)} has neither data nor binary_data_size")
            continue
        if tensor.data is not None:
            raise BadRequest(f"input {quoted(tensor.name)} has both data and binary_data_size")
        if header_length is None:
            raise BadRequest(
                f"input {quoted(tensor.name)} declares binary_data_size, "
                "but the request has no Inference-Header-Content-Length header"
            )
        check_binary_size(tensor.name, tensor.datatype, tensor.shape, size)
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

    if placed or places_outputs:  # the regions held from here until the request is responded to
        hold_regions(
            memory, decoded, model.name, [(tensor.name, tensor.datatype, tensor.shape, at) for tensor, at in placed]
        )
    try:
        # Binary tensors follow the header in input order; each is copied once, into its own array.
        for tensor, size in sizes:
            buffer = _unbacked_buffer(size)
            await reader.readinto(buffer.data, f"input {quoted(tensor.name)}")
            decoded.inputs[tensor.name] = array_from_binary(tensor.name, tensor.datatype, tensor.shape, buffer)
        if not reader.ended:  # (a JSON body that came whole in one message was read to its end)
            await reader.expect_end(declared)
        for tensor in request.inputs:
            if tensor.data is not None:
                decoded.inputs[tensor.name] = array_from_json(tensor.name, tensor.datatype, tensor.shape, tensor.data)
    except BaseException:
        if decoded.held is not None:
            decoded.held.release()
        raise
    if sizes or placed:  # keep the request's input order, whichever way each input came
        decoded.inputs = {tensor.name: decoded.inputs[tensor.name] for tensor in request.inputs}
    return decoded


def _place(tensor: RequestInput, size: int | None) -> Place:
    parameters = tensor.parameters
    assert parameters is not None
    if size is not None or tensor.data is not None:  # Triton's words
        given = " 'data'" * (tensor.data is not None) + " 'binary_data_size'" * (size is not None)
        raise BadRequest(
            f"Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
            f"'shared_memory_region' in 'parameters'. But set{given} 'shared_memory_region' "
            f"(input {quoted(tensor.name)})"
        )
    return _placed(tensor.name, parameters)


def _placed(name: str, parameters: InputParameters | OutputParameters) -> Place:
    """The place a tensor's parameters name (they name a region)."""
    region, offset, size = (
        parameters.shared_memory_region,
        parameters.shared_memory_offset,
        parameters.shared_memory_byte_size,
    )
    found = placement(name, region, offset, size)
    assert found is not None
    return found


def _unbacked_buffer(size: int) -> np.ndarray:
    """A uint8 buffer of `size` declared bytes that costs memory only as the received bytes are written in.

    `np.empty` touches none of it: its pages are backed as the tensor is written, so a client that declares a
    large tensor and sends little costs little, while the tensor still lands in its final buffer in one copy.
    Freed, it goes back to the allocator, which hands the same memory to the next request: no fresh mapping
    to fault in page by page and unmap on every request, as an anonymous mapping of its own did (about 5 ms
    of CPU a 4 MiB tensor, against 0.2 ms).
    """
    return np.empty(size, dtype=np.uint8)


def _requested(request: InferenceRequest) -> tuple[list[RequestedOutput] | None, bool]:
    """The outputs the request asks for (None: every output), and whether it places one in shared memory."""
    if request.outputs is None:
        return None, False
    requested, places = [], False
    for output in request.outputs:
        parameters = output.parameters
        if parameters is None:
            requested.append(RequestedOutput(output.name))
            continue
        place = None
        if parameters.shared_memory_region is not None:
            place, places = _output_place(output), True
        requested.append(RequestedOutput(output.name, parameters.classification, parameters.binary_data, place))
    return requested, places


def _output_place(output: RequestOutput) -> Place:
    """Where the output goes, to be looked up once every check has passed; Triton's words for what cannot be."""
    parameters = output.parameters
    assert parameters is not None
    if parameters.classification is not None:
        raise BadRequest("Output can't set both 'shared_memory_region' and 'classification'")
    if parameters.binary_data:
        raise BadRequest("Output can't set both 'shared_memory_region' and 'binary_data'")
    return _placed(output.name, parameters)


async def _read_raw_binary(reader: BodyReader, model: ServedModel) -> DecodedRequest:
    """Inference-Header-Content-Length: 0: the whole body is the single input's tensor bytes."""
    if model.inputs is None or len(model.inputs) != 1:
        count = "no declared inputs" if model.inputs is None else f"{len(model.inputs)} inputs"
        raise BadRequest(
            "a raw binary request (Inference-Header-Content-Length: 0) needs a model with one input; "
            f"'{model.name}' has {count}"
        )
    spec = model.inputs[0]
    if spec.datatype == "BYTES":
        shape = raw_input_shape(spec, 0)  # one element, whatever its size: refused before the body is read
        element = np.empty(1, dtype=object)
        element[0] = bytes(await reader.read_rest())
        array = element.reshape(shape)
    else:
        if reader.content_length is not None:
            buffer = _unbacked_buffer(reader.content_length)
            await reader.readinto(buffer.data, f"input '{spec.name}'")
            await reader.expect_end(reader.content_length)
        else:
            buffer = np.frombuffer(bytearray(await reader.read_rest()), dtype=np.uint8)
        shape = raw_input_shape(spec, buffer.size)
        array = array_from_binary(spec.name, spec.datatype, shape, buffer)
    check_against(spec, spec.datatype, array.shape, model.name)
    return DecodedRequest({spec.name: array}, binary_outputs=True)
