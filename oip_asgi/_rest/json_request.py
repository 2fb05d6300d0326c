"""The inference request's JSON: decoded and validated in one pass, errors worded for the client.

Every decision here is taken from the request's structure, never from the wording of msgspec's
errors, which are only passed through: whether data holds nested rows, which input an error is in,
and the hints for the mistakes clients make.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .._core.checks import bad_classification, negative_dimensions, unknown_datatype
from .._core.shared_memory import PARAMETERS as SHARED_MEMORY
from .._core.tensors import INTEGERS, integer_out_of_range
from .._declarations.datatypes import DATATYPES
from .._declarations.errors import BadRequest, quoted
from .json_tensors import nested_data_error
from .schemas import (
    InferenceRequest,
    flat_input_decoder,
    nested_input_decoder,
    nested_request_decoder,
    request_decoder,
)

# From about this size simdjson's fixed ~10 us (a parser, the envelope rebuilt for msgspec) is paid back.
BULK_SIZE = 8192

JSONText = bytes | bytearray | memoryview


def decode_request(data: JSONText, header_length: int | None) -> InferenceRequest:
    """The request in `data` (the JSON header when `header_length` is given, else the whole body)."""
    if len(data) >= BULK_SIZE:  # simdjson takes what it can parse straight into arrays; msgspec the rest
        # Imported here: simdjson's import (~7 ms) is for the processes that meet a large body, not every cold start.
        from .bulk_json import bulk_request

        bulk = bulk_request(data)
        if bulk is not None:
            return bulk
    try:
        try:
            request: InferenceRequest = request_decoder.decode(data)  # flat data, the common form: no call between
            return request
        except msgspec.ValidationError:
            return parse_request(data)
    except msgspec.ValidationError as exc:
        raise BadRequest(_validation_message(exc, data)) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(
            f"malformed inference request JSON: {json_reason(exc, data)}{_json_hint(data, header_length)}"
        ) from None
    except RecursionError:
        raise BadRequest("malformed inference request JSON: nested too deeply") from None


def json_reason(exc: msgspec.DecodeError | UnicodeDecodeError, data: JSONText) -> str:
    """Why `data` is not JSON, in msgspec's words, but invalid UTF-8 in Python codec's, which name the byte and
    its place in the body: msgspec raised those (a UnicodeDecodeError) until 0.22 and words them itself since
    0.23 ("Invalid UTF-8 encoded string"), and the message a client reads must not change with its version."""
    if isinstance(exc, UnicodeDecodeError) or "UTF-8" in str(exc):
        try:
            bytes(data).decode()
        except UnicodeDecodeError as invalid:
            return str(invalid)
    return str(exc)


def parse_request(data: JSONText) -> InferenceRequest:
    """msgspec's path, raising msgspec's errors. Flat data, the common form, is decoded without the
    element-or-row union (~10 ns per element); a request whose data holds rows is decoded again, keeping them."""
    try:
        request: InferenceRequest = request_decoder.decode(data)
        return request
    except msgspec.ValidationError:
        if not any(_has_rows(outline.data) for _, outline in _outline(data)):
            raise
    nested: InferenceRequest = nested_request_decoder().decode(data)
    return nested


class _InputOutline(msgspec.Struct):
    """An input as it came, whatever it holds: enough to name it and to see its data's structure."""

    name: Any = None
    datatype: Any = None
    shape: Any = None
    data: msgspec.Raw = msgspec.Raw(b"")  # msgspec.Raw takes any JSON value, null included


class _Inputs(msgspec.Struct):
    inputs: list[msgspec.Raw]


_outline_decoder = msgspec.json.Decoder(_InputOutline)


def _outline(data: JSONText) -> list[tuple[msgspec.Raw, _InputOutline]]:
    """Each input of a request that decodes as JSON, unchecked; none when `inputs` is no list of objects.

    Raises RecursionError for JSON nested too deeply, as the decoders do.
    """
    try:
        return [(raw, _outline_decoder.decode(raw)) for raw in msgspec.json.decode(data, type=_Inputs).inputs]
    except (msgspec.MsgspecError, UnicodeDecodeError):
        return []


_ROW = re.compile(rb"\A\s*\[\s*\[")


def _has_rows(data: msgspec.Raw) -> bool:
    return _ROW.match(memoryview(data)) is not None


def _rows_error(datatype: str, data: msgspec.Raw) -> str | None:
    try:
        rows = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return None
    return nested_data_error(datatype, rows) if isinstance(rows, list) else None


def _validation_message(error: msgspec.ValidationError, data: JSONText) -> str:
    """msgspec's error, naming the input it is in: the first input that fails alone is the one."""
    for raw, outline in _outline(data):
        decoder = nested_input_decoder() if _has_rows(outline.data) else flat_input_decoder()
        try:
            decoder.decode(raw)
        except msgspec.ValidationError:
            if not isinstance(outline.name, str):
                break
            datatype = outline.datatype
            # These two as the wire-neutral checks word them, so that gRPC's clients read the same
            # (and msgspec's echo of a 20 kB datatype is not sent uncut).
            if isinstance(datatype, str) and datatype not in DATATYPES:
                return unknown_datatype(outline.name, datatype)
            if _has_negative_dimension(outline.shape):
                return negative_dimensions(outline.name, outline.shape)
            outside = _integer_out_of_range(outline)
            if outside is not None:
                return outside
            # The datatype explains a bound (`float` < 65520.0 is FP16's range).
            of = f" ({datatype})" if datatype in DATATYPES else ""
            message = f"input {quoted(outline.name)}{of}: {error}"
            if datatype in DATATYPES and _has_rows(outline.data):
                # The request's decoder takes an element or a row at every depth (`int | array`): the
                # rows checked at their own depth say which was meant.
                rows = _rows_error(datatype, outline.data)
                if rows is not None:
                    message = f"input {quoted(outline.name)}: invalid {datatype} data: {rows}"
            if datatype not in DATATYPES:  # the tag is checked first: the error is the datatype's
                message += f"; the datatypes are {', '.join(DATATYPES)}"
            return message
    return _classification_message(data) or f"invalid inference request: {error}"


class _Outputs(msgspec.Struct):
    outputs: Any = None


def _classification_message(data: JSONText) -> str | None:
    """A classification that is no positive integer, worded as gRPC's is: the first such output's."""
    try:
        outputs = msgspec.json.decode(data, type=_Outputs).outputs
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
        return None
    for output in outputs if isinstance(outputs, list) else ():
        parameters = output.get("parameters") if isinstance(output, dict) else None
        name = output.get("name") if isinstance(output, dict) else None
        if not isinstance(parameters, dict) or not isinstance(name, str):
            continue
        value = parameters.get("classification")
        if value is None or (type(value) is int and value >= 1):
            continue
        if isinstance(value, str):
            got = quoted(value)
        elif isinstance(value, bool | int | float):
            import json  # a bad request's words only: not imported by every start

            got = json.dumps(value)
        else:
            got = "an array" if isinstance(value, list) else "an object"
        return bad_classification(name, got)
    return None


def _integer_out_of_range(outline: _InputOutline) -> str | None:
    if not isinstance(outline.datatype, str) or outline.datatype not in INTEGERS:
        return None
    try:
        data = msgspec.json.decode(outline.data)
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
        return None
    return integer_out_of_range(outline.name, outline.datatype, data)


def _has_negative_dimension(shape: Any) -> bool:
    return isinstance(shape, list) and all(type(dim) is int for dim in shape) and any(dim < 0 for dim in shape)


# A bare NaN or Infinity where a JSON value starts: what clients write for non-finite floats.
_NON_FINITE = re.compile(rb"[\[,:]\s*[+-]?(?:nan|inf)", re.IGNORECASE)
# A JSON object followed somewhere by bytes JSON text never holds (control characters are invalid
# outside strings and escaped inside them): binary tensor data after the JSON.
_BINARY_AFTER_JSON = re.compile(rb"\A\s*\{.*?[\x00-\x08\x0b\x0c\x0e-\x1f]", re.DOTALL)


def _json_hint(data: JSONText, header_length: int | None) -> str:
    """The likely cause of malformed JSON, for the mistakes clients make."""
    hint = ""
    if _NON_FINITE.search(data):
        hint = "; JSON has no NaN or Infinity, send such tensors as binary data"
    if header_length is not None:
        hint += f" (in the {header_length}-byte header that Inference-Header-Content-Length declares)"
    elif _BINARY_AFTER_JSON.match(data):
        hint += "; binary data after the JSON needs an Inference-Header-Content-Length header"
    return hint


class _ParametersOfInput(msgspec.Struct):
    name: str
    parameters: dict[str, Any] | None = None


class _ParametersOfInputs(msgspec.Struct):
    inputs: list[_ParametersOfInput]


_parameters_decoder = msgspec.json.Decoder(_ParametersOfInputs)


def input_parameters(data: JSONText) -> dict[str, dict[str, Any]]:
    """Each input's own parameters, for a model that asks for them, without the protocol's binary_data_size
    and shared memory parameters.

    A second, small decode of a request the full decoder has already validated: only the models that
    ask pay for it, and the request's structs stay typed for the protocol's own parameters.
    """
    found: dict[str, dict[str, Any]] = {}
    for tensor in _parameters_decoder.decode(data).inputs:
        if tensor.parameters:
            own = {
                key: value
                for key, value in tensor.parameters.items()
                if key != "binary_data_size" and key not in SHARED_MEMORY
            }
            if own:
                found[tensor.name] = own
    return found
