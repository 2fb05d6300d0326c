"""The bad-input catalogue: hostile requests, the status each gets and what its error message says.

One table drives both tests/rest/test_hostile.py and docs/bad-input.md; ``python -m tests.rest.hostile_cases``
prints that document from the cases and the messages the server actually returns.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from starlette.applications import Starlette

from examples.streaming import models as streaming_models
from oip_asgi import Model, TensorSpec, mount
from oip_asgi._declarations.datatypes import DATATYPES
from tests.support import parity_cases
from tests.support.client import client

MAX_BODY_SIZE = 64 * 1024
MAX_JSON_SIZE = 16 * 1024
IHCL = "inference-header-content-length"
INFER = "/v2/models/echo/infer"
LABELS = ["cat", "dog", "fish", "bird"]


MODELS: dict[str, Any] = {
    "echo": lambda **inputs: inputs,  # declares nothing: any inputs, any shapes
    **{f"identity_{datatype.lower()}": parity_cases.identity(datatype) for datatype in DATATYPES if datatype != "BF16"},
    "two": Model(
        lambda a, b: a + b,
        inputs=[TensorSpec("a", "INT32", [-1]), TensorSpec("b", "INT32", [-1])],
        outputs=[TensorSpec("sum", "INT32", [-1])],
    ),
    "scores": Model(
        lambda x: x,
        inputs=[TensorSpec("x", "FP32", [-1, 4])],
        outputs=[TensorSpec("scores", "FP32", [-1, 4])],
        labels=LABELS,
    ),
    "mock_llm": streaming_models["mock_llm"],  # Triton's generate-test model: a generator
}

# Small limits so the size cases need small bodies; `uvicorn tests.rest.hostile_cases:app` serves the same app.
# The cases both wires answer alike (tests/support/parity_cases.py) are sent to their own models, at /parity/v2.
PARITY = "/parity"
app = Starlette()
mount(app, MODELS, path="/v2", max_body_size=MAX_BODY_SIZE, max_json_size=MAX_JSON_SIZE)
mount(app, parity_cases.MODELS, path=f"{PARITY}/v2", model_repository=parity_cases.REPOSITORY)
# The restricted-API cases (docs/security.md) are sent to an app whose control and statistics ask for a key.
RESTRICTED = "/restricted"
mount(app, MODELS, path=f"{RESTRICTED}/v2", restricted_apis=["model-repository,statistics:admin-key=s3cret"])

GENERATE = "/v2/models/mock_llm/generate"
GENERATE_STREAM = "/v2/models/mock_llm/generate_stream"
VALID_PATH = "/v2/models/two/infer"
VALID_REQUEST = {
    "inputs": [
        {"name": "a", "shape": [2], "datatype": "INT32", "data": [1, 2]},
        {"name": "b", "shape": [2], "datatype": "INT32", "data": [3, 4]},
    ]
}
VALID_SUM = [4, 6]
_SHM = {"shared_memory_region": "nowhere", "shared_memory_byte_size": 8}


@dataclass(frozen=True)
class Case:
    id: str
    description: str
    status: int | None  # None: the server closes the connection without an answer
    message: str  # a fragment the error message must contain
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    method: str = "POST"
    path: str = INFER
    chunked: bool = False  # no Content-Length: the body streams in pieces
    content_length: int | None = None  # a Content-Length that lies; only a raw socket can send one
    sketch: str | None = None  # how the document shows a body too long or too odd to print
    group: str = ""

    @property
    def over_socket(self) -> bool:
        return self.content_length is not None


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _tensor(name: str, datatype: str, shape: Any, data: Any = None, size: Any = None) -> dict[str, Any]:
    tensor: dict[str, Any] = {"name": name, "shape": shape, "datatype": datatype}
    if data is not None:
        tensor["data"] = data
    if size is not None:
        tensor["parameters"] = {"binary_data_size": size}
    return tensor


def _request(*inputs: dict[str, Any], **extra: Any) -> bytes:
    return _json({"inputs": list(inputs), **extra})


def _json_case(id: str, description: str, status: int, message: str, *inputs: dict[str, Any], **options: Any) -> Case:
    extra = options.pop("extra", {})
    return Case(id, description, status, message, body=_request(*inputs, **extra), **options)


def _binary_case(
    id: str, description: str, status: int, message: str, header: Any, *parts: bytes, **options: Any
) -> Case:
    """A binary-extension request: JSON header, then raw tensor bytes; the header's true length unless given."""
    head = header if isinstance(header, bytes) else _json(header)
    headers = {IHCL: str(len(head)), **options.pop("headers", {})}
    return Case(id, description, status, message, body=head + b"".join(parts), headers=headers, **options)


def _bytes_elements(*items: bytes) -> bytes:
    return b"".join(len(item).to_bytes(4, "little") + item for item in items)


def _section(title: str, *cases: Case) -> list[Case]:
    return [replace(case, group=title) for case in cases]


def _over_both_wires() -> list[Case]:
    """The refusals of tests/support/parity_cases.py as REST sends them: JSON data, then binary tensors ("-binary")."""
    cases = []
    for case in parity_cases.CASES:
        for pair in case.pairs if case.rpc == "infer" else ("typed",):
            if case.status == 200 or pair in case.differs or case.rpc == "load":
                continue  # (a load's refusal names the repository's folder, a temporary one: not documented)
            sent = parity_cases.rest_request(case, pair)
            binary = pair == "raw" and case.rpc == "infer"
            sketch = None
            if len(sent.body) > 300:  # the 20 kB names
                sketch = sent.body[:100].decode(errors="replace") + f"… ({len(sent.body)} bytes)"
            cases.append(
                Case(
                    f"{case.id}-binary" if binary else case.id,
                    case.description + (" (binary tensors)" if binary else ""),
                    case.status,
                    case.message,
                    body=sent.body,
                    headers={name: value for name, value in sent.headers.items() if name != "content-type"},
                    method=sent.method,
                    path=PARITY + sent.path,
                    sketch=sketch,
                    group="Over both wires (tests/support/parity_cases.py: gRPC answers the same)",
                )
            )
    return cases


_VALID_JSON = _request(_tensor("x", "INT8", [2], [1, 2]))
_DEEP = b"[" * 5000 + b"]" * 5000
_INT8_2 = _tensor("x", "INT8", [2], size=2)

CASES: list[Case] = [
    *_section(
        "Malformed JSON",
        Case("json-unclosed", "an array that never closes", 400, "malformed inference request JSON",
             body=b'{"inputs": [}'),
        Case("json-truncated", "a valid request cut in half", 400, "Input data was truncated",
             body=_VALID_JSON[: len(_VALID_JSON) // 2]),
        Case("json-empty", "an empty body", 400, "Input data was truncated", body=b""),
        Case("json-garbage", "bytes that are not JSON at all", 400, "invalid character", body=b"\xff\xfe\x00junk"),
        Case("json-not-utf8", "a string that is not valid UTF-8", 400, "can't decode byte 0xff",
             body=b'{"inputs": [{"name": "\xff", "shape": [1], "datatype": "INT8", "data": [1]}]}'),
        Case("json-trailing", "a second JSON value after the request", 400, "trailing characters",
             body=_VALID_JSON + b"{}"),
        Case("json-single-quotes", "single-quoted strings", 400, "malformed inference request JSON",
             body=b"{'inputs': []}"),
        Case("json-inputs-missing", "an object without `inputs`", 400, "missing required field `inputs`", body=b"{}"),
        Case("json-inputs-not-array", "`inputs` is an object", 400, "Expected `array`, got `object` - at `$.inputs`",
             body=_json({"inputs": _tensor("x", "INT8", [1], [1])})),
        Case("json-input-not-object", "an input that is a number", 400,
             "Expected `object`, got `int` - at `$.inputs[0]`", body=b'{"inputs": [5]}'),
        Case("json-parameters-not-object", "request `parameters` is a number", 400, "at `$.parameters`",
             body=_request(_tensor("x", "INT8", [1], [1]), parameters=5)),
        Case("json-binary-data-output-not-bool", "`binary_data_output` is 1", 400,
             "Unable to parse 'binary_data_output'", body=_request(_tensor("x", "INT8", [1], [1]),
                                                                   parameters={"binary_data_output": 1})),
        Case("json-timeout-not-uint", "`timeout` (Triton's, not the model's) is -1", 400,
             "Unable to parse 'timeout'", body=_request(_tensor("x", "INT8", [1], [1]), parameters={"timeout": -1})),
        Case("json-triton-parameter", "a parameter named `triton_...`, a prefix Triton keeps for itself", 400,
             "parameter keys starting with 'triton_' are reserved for Triton usage",
             body=_request(_tensor("x", "INT8", [1], [1]), parameters={"triton_mine": 1})),
    ),
    *_section(
        "JSON nested thousands deep",
        Case("deep-parameters", "5000 nested arrays in `parameters`", 400, "nested too deeply",
             body=b'{"inputs": [], "parameters": {"p": ' + _DEEP + b"}}",
             sketch='{"inputs": [], "parameters": {"p": [×5000 ]×5000}}'),
        Case("deep-data", "5000 nested arrays as a tensor's `data`", 400, "nested too deeply",
             body=b'{"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": ' + _DEEP + b"}]}",
             sketch='{"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [×5000 ]×5000}]}'),
        Case("deep-unknown-field", "5000 nested arrays in a field the server ignores", 400, "nested too deeply",
             body=b'{"inputs": [], "future": ' + _DEEP + b"}", sketch='{"inputs": [], "future": [×5000 ]×5000}'),
        _binary_case("deep-binary-header", "5000 nested arrays in a binary request's JSON header", 400,
                     "nested too deeply", b'{"inputs": [], "p": ' + _DEEP + b"}",
                     sketch='{"inputs": [], "p": [×5000 ]×5000}'),
        Case("deep-data-shallow-shape", "data nested 40 deep for a 1-D shape", 400, "nested 40 deep",
             body=b'{"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": '
             + b"[" * 40 + b"1" + b"]" * 40 + b"}]}",
             sketch='{"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [×40 1 ]×40}]}'),
    ),
    *_section(
        "Binary header that is not an object",
        _binary_case("header-array", "the JSON header is an array", 400, "Expected `object`, got `array`", b"[1, 2]",
                     b"\x01\x02"),
        _binary_case("header-null", "the JSON header is null", 400, "Expected `object`, got `null`", b"null"),
        _binary_case("header-number", "the JSON header is a number", 400, "Expected `object`, got `int`", b"42",
                     b"\x00"),
        _binary_case("header-string", "the JSON header is a string", 400, "Expected `object`, got `str`", b'"hi"'),
    ),
    *_section(
        "Inference-Header-Content-Length",
        Case("ihcl-missing-binary-follows", "binary bytes after the JSON, no Inference-Header-Content-Length",
             400, "needs an Inference-Header-Content-Length header",
             body=_request(_INT8_2) + b"\x01\x02"),
        Case("ihcl-missing-json-data", "all-JSON request with stray binary bytes after it", 400,
             "needs an Inference-Header-Content-Length header", body=_VALID_JSON + b"\x00\x01\x02\x03"),
        Case("ihcl-missing-whitespace-binary", "binary_data_size declared, bytes that happen to be JSON whitespace",
             400, "but the request has no Inference-Header-Content-Length header", body=_request(_INT8_2) + b"  "),
        _binary_case("ihcl-negative", "Inference-Header-Content-Length: -5", 400, "must be a non-negative integer",
                     {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: "-5"}),
        _binary_case("ihcl-non-numeric", "Inference-Header-Content-Length: abc", 400, "must be a non-negative integer",
                     {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: "abc"}),
        _binary_case("ihcl-float", "Inference-Header-Content-Length: 12.5", 400, "must be a non-negative integer",
                     {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: "12.5"}),
        _binary_case("ihcl-empty", "an empty Inference-Header-Content-Length", 400, "must be a non-negative integer",
                     {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: ""}),
        _binary_case("ihcl-unicode-digit", "Inference-Header-Content-Length: ² (a digit only to Unicode)", 400,
                     "must be a non-negative integer", {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: "\xb2"}),
        _binary_case("ihcl-past-body", "larger than the whole body", 400, "exceeds the body's Content-Length",
                     {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: "9999"}),
        _binary_case("ihcl-past-body-streamed", "larger than the whole body, streamed without Content-Length", 400,
                     "ended 9906 bytes short, in the middle of the JSON inference header", {"inputs": [_INT8_2]},
                     b"\x01\x02", headers={IHCL: "9999"}, chunked=True),
        _binary_case("ihcl-over-limit", "larger than the JSON limit", 413, "exceeds the 16384-byte limit",
                     {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: "1000000"}),
        _binary_case("ihcl-huge", "a 30-digit Inference-Header-Content-Length", 413, "exceeds the 16384-byte limit",
                     {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: "9" * 30}),
        _binary_case("ihcl-inside-json", "shorter than the JSON header", 400,
                     "in the 20-byte header that Inference-Header-Content-Length declares",
                     {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: "20"}),
        _binary_case("ihcl-into-binary", "reaching into the binary data", 400,
                     "in the 69-byte header that Inference-Header-Content-Length declares",
                     {"inputs": [_INT8_2]}, b"\x01\x02", headers={IHCL: "69"}),
    ),
    *_section(
        "Body length against Content-Length (a real server, over a raw socket)",
        Case("content-length-short", "a body 10 bytes shorter than Content-Length, then the client half-closes",
             None, "no response: the server waits for the promised bytes (uvicorn has no body timeout), "
             "then closes cleanly at the client's EOF",
             body=_VALID_JSON, content_length=len(_VALID_JSON) + 10),
        Case("content-length-long", "a valid request with 7 bytes more than Content-Length", 400,
             "Invalid HTTP request received.", body=_VALID_JSON + b"garbage", content_length=len(_VALID_JSON)),
        Case("content-length-cuts-json", "Content-Length ends 5 bytes inside the JSON", 400,
             "Invalid HTTP request received.", body=_VALID_JSON, content_length=len(_VALID_JSON) - 5),
    ),
    *_section(
        "binary_data_size",
        _binary_case("bds-missing", "a binary input with neither data nor binary_data_size", 400,
                     "neither data nor binary_data_size", {"inputs": [_tensor("x", "INT8", [2])]}, b"\x01\x02"),
        _binary_case("bds-missing-bytes-follow", "all inputs JSON, yet binary bytes follow the header", 400,
                     "Content-Length is 70, but the header (68 bytes) and binary_data_size values declare 68 bytes",
                     {"inputs": [_tensor("x", "INT8", [2], [1, 2])]}, b"\x01\x02"),
        _binary_case("bds-missing-bytes-follow-streamed", "the same, streamed without Content-Length", 400,
                     "request body is longer than the 68 bytes", {"inputs": [_tensor("x", "INT8", [2], [1, 2])]},
                     b"\x01\x02", chunked=True),
        _binary_case("bds-negative", "binary_data_size: -2", 400,
                     "Expected `int` >= 0 - at `$.inputs[0].parameters.binary_data_size`",
                     {"inputs": [_tensor("x", "INT8", [2], size=-2)]}, b"\x01\x02"),
        _binary_case("bds-string", "binary_data_size: \"2\"", 400,
                     "Expected `int | null`, got `str` - at `$.inputs[0].parameters.binary_data_size`",
                     {"inputs": [_tensor("x", "INT8", [2], size="2")]}, b"\x01\x02"),
        _binary_case("bds-float", "binary_data_size: 2.5", 400, "got `float` - at `$.inputs[0].parameters",
                     {"inputs": [_tensor("x", "INT8", [2], size=2.5)]}, b"\x01\x02"),
        _binary_case("bds-sum-past-body", "two inputs whose sizes sum past the body", 400,
                     "Content-Length is 172, but the header (170 bytes) and binary_data_size values declare 174 bytes",
                     {"inputs": [_INT8_2, _tensor("y", "INT8", [2], size=2)]}, b"\x01\x02"),
        _binary_case("bds-sum-past-body-streamed", "the same, streamed without Content-Length", 400,
                     "request body ended 2 bytes short, in the middle of input 'y'",
                     {"inputs": [_INT8_2, _tensor("y", "INT8", [2], size=2)]}, b"\x01\x02", chunked=True),
        _binary_case("bds-sum-short-of-body", "sizes that leave bytes over at the end", 400,
                     "Content-Length is 94, but the header (91 bytes) and binary_data_size values declare 93 bytes",
                     {"inputs": [_INT8_2]}, b"\x01\x02\x03"),
        _binary_case("bds-over-limit", "a size (and shape) past the body limit", 413,
                     "request declares 1099511627890 bytes, over the limit of 65536 bytes",
                     {"inputs": [_tensor("x", "FP32", [2**38], size=2**40)]}, b"\x00" * 16),
        _binary_case("bds-and-data", "both data and binary_data_size", 400, "has both data and binary_data_size",
                     {"inputs": [_tensor("x", "INT8", [2], [1, 2], size=2)]}, b"\x01\x02"),
        Case("bds-without-ihcl", "binary_data_size in a plain JSON request", 400,
             "declares binary_data_size, but the request has no Inference-Header-Content-Length header",
             body=_request(_INT8_2)),
    ),
    *_section(
        "Binary tensor contents",
        _binary_case("bytes-length-past-second", "the second element's length runs past the tensor", 400,
                     "element 1 claims 3 bytes, only 2 remain",
                     {"inputs": [_tensor("x", "BYTES", [2], size=12)]}, _bytes_elements(b"ab") + b"\x03\x00\x00\x00hi"),
        _binary_case("bytes-length-huge", "an element length of 2**32 - 1", 400, "claims 4294967295 bytes",
                     {"inputs": [_tensor("x", "BYTES", [1], size=6)]}, b"\xff\xff\xff\xffhi"),
    ),
    *_section(
        "Shapes",
        _json_case("shape-negative", "a dimension of -1", 400,
                   "input 'x' has shape [-1]; dimensions cannot be negative",
                   _tensor("x", "INT8", [-1], [1])),
        _json_case("shape-float", "a dimension of 1.5", 400, "Expected `int`, got `float` - at `$.inputs[0].shape[0]`",
                   _tensor("x", "INT8", [1.5], [1])),
        _json_case("shape-string", 'a dimension of "2"', 400, "Expected `int`, got `str` - at `$.inputs[0].shape[0]`",
                   _tensor("x", "INT8", ["2"], [1, 2])),
        _json_case("shape-not-array", "shape is a number", 400, "Expected `array`, got `int` - at `$.inputs[0].shape`",
                   _tensor("x", "INT8", 2, [1, 2])),
        _json_case("shape-null-dim", "a dimension of null", 400, "Expected `int`, got `null`",
                   _tensor("x", "INT8", [None], [1])),
        _json_case("shape-past-int64", "a dimension of 2**64", 400, "Expected `int` <= 9223372036854775807",
                   _tensor("x", "INT8", [2**64], [1])),
        _json_case("shape-over-limit-json", "a JSON tensor of 2**40 elements with one element of data", 400,
                   "data has 1 elements, shape [1099511627776] needs 1099511627776",
                   _tensor("x", "FP32", [2**40], [1.0])),
        _binary_case("shape-over-limit-binary", "a binary tensor of 4 MiB against a 64 KiB limit", 413,
                     "over the limit of 65536 bytes",
                     {"inputs": [_tensor("x", "FP32", [2**20], size=2**22)]}, b"\x00" * 16),
    ),
    *_section(
        "Datatypes",
        _json_case("datatype-unknown", "datatype INT9", 400,
                   "input 'x' has datatype 'INT9'; the datatypes are BOOL, ",
                   _tensor("x", "INT9", [1], [1])),
        _json_case("datatype-lowercase", "datatype int32", 400, "input 'x' has datatype 'int32'",
                   _tensor("x", "int32", [1], [1])),
        _json_case("datatype-number", "datatype 5", 400, "Expected `str` - at `$.inputs[0].datatype`",
                   _tensor("x", 5, [1], [1])),
    ),
    *_section(
        "Duplicate, missing and unexpected tensors",
        _json_case("input-duplicate-declared", "a declared input twice", 400, "input 'a' appears more than once",
                   _tensor("a", "INT32", [1], [1]), _tensor("a", "INT32", [1], [1]), _tensor("b", "INT32", [1], [1]),
                   path="/v2/models/two/infer"),
    ),
    *_section(
        "Data and shape counts",
        _json_case("data-empty", "no elements for shape [2, 2]", 400, "data has 0 elements, shape [2, 2] needs 4",
                   _tensor("x", "INT32", [2, 2], [])),
        _json_case("data-for-scalar", "2 elements for shape []", 400, "data has 2 elements, shape [] needs 1",
                   _tensor("x", "INT32", [], [1, 2])),
        _json_case("data-ragged", "nested rows of different lengths", 400, "data has a row of 1 at dimension 1",
                   _tensor("x", "INT32", [2, 2], [[1, 2], [3]])),
        _json_case("data-rows", "3 nested rows for shape [2, 2]", 400, "data has 3 rows at dimension 0",
                   _tensor("x", "INT32", [2, 2], [[1, 2], [3, 4], [5, 6]])),
        _json_case("data-nested-too-deep", "nested 2 deep for a 1-D shape", 400,
                   "data is nested 2 deep, but shape [2] has 1 dimensions", _tensor("x", "INT32", [2], [[1], [2]])),
        _json_case("data-not-array", "data is a number", 400, "Expected `array | null`",
                   _tensor("x", "INT32", [1], 5)),
        _json_case("data-object", "data is an object", 400, "Expected `array | null`",
                   _tensor("x", "INT32", [1], {"0": 1})),
        _json_case("data-binary-model-declared", "2 elements for a declared [-1, 4] input", 400,
                   "input 'x' has shape [2], model 'scores' expects [-1, 4]", _tensor("x", "FP32", [2], [1.0, 2.0]),
                   path="/v2/models/scores/infer"),
    ),
    *_section(
        "JSON element types",
        _json_case("int32-string", 'a string in INT32', 400, "Expected `int`, got `str` - at `$.inputs[0].data[1]`",
                   _tensor("x", "INT32", [2], [1, "2"])),
        _json_case("int32-float", "1.5 in INT32", 400, "Expected `int`, got `float` - at `$.inputs[0].data[0]`",
                   _tensor("x", "INT32", [1], [1.5])),
        _json_case("int32-past-range", "2**31 in INT32", 400,
                   "input 'x': INT32 element 0 is 2147483648, out of range [-2147483648, 2147483647]",
                   _tensor("x", "INT32", [1], [2**31])),
        _json_case("int8-past-max", "128 in INT8", 400, "input 'x': INT8 element 0 is 128, out of range [-128, 127]",
                   _tensor("x", "INT8", [1], [128])),
        _json_case("uint8-negative", "-1 in UINT8", 400, "input 'x': UINT8 element 0 is -1, out of range [0, 255]",
                   _tensor("x", "UINT8", [1], [-1])),
        _json_case("uint8-past-max", "256 in UINT8", 400, "input 'x': UINT8 element 0 is 256, out of range [0, 255]",
                   _tensor("x", "UINT8", [1], [256])),
        Case("uint64-past-max", "2**64 in UINT64", 400, "a value is out of range for UINT64",
             body=b'{"inputs": [{"name": "x", "shape": [1], "datatype": "UINT64", "data": [18446744073709551616]}]}'),
        _json_case("fp16-past-max", "70000 in FP16", 400, "(FP16): Expected `float` < 65520.0",
                   _tensor("x", "FP16", [1], [70000])),
        _json_case("fp32-past-max", "1e39 in FP32", 400, "(FP32): Expected `float` < 3.4028235677973366e+38",
                   _tensor("x", "FP32", [1], [1e39])),
        Case("fp64-past-max", "1e400 in FP64", 400, "Number out of range - at `$.inputs[0].data[0]`",
             body=b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP64", "data": [1e400]}]}'),
        Case("nan-literal", "a bare NaN, which JSON has no word for", 400, "JSON has no NaN or Infinity",
             body=b'{"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1.0, NaN]}]}'),
        Case("infinity-literal", "a bare -Infinity", 400, "JSON has no NaN or Infinity",
             body=b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP64", "data": [-Infinity]}]}'),
        _json_case("nan-string", '"NaN" as a string in FP32', 400,
                   "Expected `float`, got `str` - at `$.inputs[0].data[0]`",
                   _tensor("x", "FP32", [1], ["NaN"])),
        _json_case("int-bool", "true in INT32", 400, "Expected `int`, got `bool` - at `$.inputs[0].data[0]`",
                   _tensor("x", "INT32", [1], [True])),
        _json_case("float-bool", "false in FP32", 400, "Expected `float`, got `bool` - at `$.inputs[0].data[0]`",
                   _tensor("x", "FP32", [1], [False])),
        _json_case("bool-int", "1 in BOOL", 400, "Expected `bool`, got `int` - at `$.inputs[0].data[0]`",
                   _tensor("x", "BOOL", [1], [1])),
        _json_case("bool-string", '"true" in BOOL', 400, "Expected `bool`, got `str` - at `$.inputs[0].data[0]`",
                   _tensor("x", "BOOL", [1], ["true"])),
        _json_case("bytes-number", "a number in BYTES", 400, "Expected `str`, got `int` - at `$.inputs[0].data[0]`",
                   _tensor("x", "BYTES", [1], [1])),
        Case("bytes-not-utf8", "a BYTES string that is not valid UTF-8", 400,
             "malformed inference request JSON: 'utf-8' codec can't decode",
             body=b'{"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": ["\xff"]}]}'),
        _json_case("int-null", "null in INT8", 400, "Expected `int`, got `null` - at `$.inputs[0].data[0]`",
                   _tensor("x", "INT8", [1], [None])),
        _json_case("nested-string", "a string deep in nested INT16 data", 400,
                   "Expected `int`, got `str` - at `$.data[1][0]`",
                   _tensor("x", "INT16", [2, 1], [[1], ["2"]])),
        _json_case("nested-element-for-row", "a number where nested INT32 data holds its rows", 400,
                   "input 'x': invalid INT32 data: Expected `array`, got `float` - at `$.data[1]`",
                   _tensor("x", "INT32", [2, 1], [[1], 2.5])),
        _json_case("bf16-json", "BF16 as JSON", 400, "BF16 has no JSON form", _tensor("x", "BF16", [1], [1.0])),
    ),
    *_section(
        "Raw binary requests",
        Case("raw-two-inputs", "a raw binary body for a model with two inputs", 400,
             "needs a model with one input; 'two' has 2 inputs", body=b"\x00" * 8, headers={IHCL: "0"},
             path="/v2/models/two/infer"),
        Case("raw-undeclared", "a raw binary body for a model that declares no inputs", 400,
             "'echo' has no declared inputs", body=b"\x00" * 8, headers={IHCL: "0"}),
        Case("raw-partial-element", "6 bytes for INT32 elements", 400, "not a whole number of INT32 elements",
             body=b"\x00" * 6, headers={IHCL: "0"}, path="/v2/models/identity_int32/infer"),
        Case("raw-wrong-count", "3 FP32 elements for shape [-1, 4]", 400, "does not fit shape [-1, 4]",
             body=b"\x00" * 12, headers={IHCL: "0"}, path="/v2/models/scores/infer"),
        Case("raw-json-body", "a JSON request sent with Inference-Header-Content-Length: 0", 400,
             "not a whole number of INT32 elements", body=_request(_tensor("x", "INT32", [1], [1])),
             headers={IHCL: "0"}, path="/v2/models/identity_int32/infer"),
    ),
    *_section(
        "Classification",
        _json_case("class-negative", "classification -2", 400,
                   "output 'scores': parameter classification must be a positive integer, got -2",
                   _tensor("x", "FP32", [1, 4], [1, 2, 3, 4]), path="/v2/models/scores/infer",
                   extra={"outputs": [{"name": "scores", "parameters": {"classification": -2}}]}),
        _json_case("class-float", "classification 1.5", 400,
                   "output 'scores': parameter classification must be a positive integer, got 1.5",
                   _tensor("x", "FP32", [1, 4], [1, 2, 3, 4]), path="/v2/models/scores/infer",
                   extra={"outputs": [{"name": "scores", "parameters": {"classification": 1.5}}]}),
        _json_case("class-string", 'classification "2"', 400,
                   "output 'scores': parameter classification must be a positive integer, got '2'",
                   _tensor("x", "FP32", [1, 4], [1, 2, 3, 4]), path="/v2/models/scores/infer",
                   extra={"outputs": [{"name": "scores", "parameters": {"classification": "2"}}]}),
        _json_case("class-bool", "classification true", 400,
                   "output 'scores': parameter classification must be a positive integer, got true",
                   _tensor("x", "FP32", [1, 4], [1, 2, 3, 4]), path="/v2/models/scores/infer",
                   extra={"outputs": [{"name": "scores", "parameters": {"classification": True}}]}),
        _json_case("class-bool-output", "classification of a BOOL output", 400,
                   "output 'y' is BOOL; classification needs a numeric output", _tensor("x", "BOOL", [1], [True]),
                   path="/v2/models/identity_bool/infer",
                   extra={"outputs": [{"name": "y", "parameters": {"classification": 1}}]}),
    ),
    *_section(
        "Models, versions, methods and paths",
        Case("model-unknown-ready", "readiness of a model that does not exist", 404,
             "Request for unknown model: 'nope' is not found",
             method="GET", path="/v2/models/nope/ready"),
        Case("version-unknown-metadata", "metadata of a version that is not an integer, of a model whose versions are",
             400, "failed to get model version from specified version string 'latest'; model 'two' has versions 1",
             method="GET", path="/v2/models/two/versions/latest"),
        Case("method-get-infer", "GET on an inference URL", 405, "method GET is not allowed here; use POST",
             method="GET", path="/v2/models/two/infer"),
        Case("method-put-infer", "PUT on an inference URL", 405, "method PUT is not allowed here; use POST",
             body=_VALID_JSON, method="PUT", path="/v2/models/two/infer"),
        Case("method-post-metadata", "POST on model metadata", 405, "method POST is not allowed here; use GET",
             body=b"{}", path="/v2/models/two"),
        Case("method-delete-health", "DELETE on a health URL", 405, "method DELETE is not allowed here; use GET",
             method="DELETE", path="/v2/health/live"),
        Case("path-unknown", "an endpoint the protocol does not have", 404, "no such path '/v2/nowhere'",
             method="GET", path="/v2/nowhere"),
        Case("path-models-list", "/v2/models, which the REST protocol does not define", 404,
             "no such path '/v2/models'",
             method="GET", path="/v2/models"),
        Case("path-after-infer", "a path segment after /infer", 404, "no such path '/v2/models/two/infer/now'",
             body=_VALID_JSON, path="/v2/models/two/infer/now"),
        Case("path-empty-version", "an empty version segment", 404, "no such path '/v2/models/two/versions//infer'",
             body=_VALID_JSON, path="/v2/models/two/versions//infer"),
    ),
    *_section(
        "Size limits and encodings",
        Case("json-over-limit", "a 20 KiB JSON body against the 16 KiB JSON limit", 413,
             "exceeds the 16384-byte limit for JSON",
             body=_request(_tensor("x", "INT8", [10240], [0] * 10240)),
             sketch='{"inputs": [{"name": "x", "shape": [10240], "datatype": "INT8", "data": [0, 0, …]}]} (20 KiB)'),
        Case("json-over-limit-streamed", "the same, streamed without Content-Length", 413,
             "exceeds the 16384-byte limit for JSON", body=_request(_tensor("x", "INT8", [10240], [0] * 10240)),
             chunked=True,
             sketch='{"inputs": [{"name": "x", "shape": [10240], "datatype": "INT8", "data": [0, 0, …]}]} (20 KiB)'),
        _binary_case("body-over-limit", "a 100 KiB binary body against the 64 KiB limit", 413,
                     "request body exceeds the limit of 65536 bytes",
                     {"inputs": [_tensor("x", "UINT8", [102400], size=102400)]}, b"\x00" * 102400,
                     sketch='{"inputs": [{"name": "x", "shape": [102400], "datatype": "UINT8", …}]} + 100 KiB'),
        Case("encoding-unknown", "Content-Encoding: br", 415, "unsupported Content-Encoding 'br'",
             body=_VALID_JSON, headers={"content-encoding": "br"}),
        Case("encoding-not-gzip", "Content-Encoding: gzip on plain bytes", 400,
             "request body is not valid compressed data", body=_VALID_JSON, headers={"content-encoding": "gzip"}),
    ),
    *_section(
        "Lengths declared, not sent (memory follows the bytes received: tests/rest/test_hostile_memory.py)",
        Case("header-length-declared-gzip", "a gzip body inflating to 4,001 bytes, declaring a 15,000-byte header", 400,
             "request body ended 10999 bytes short, in the middle of the JSON inference header",
             body=gzip.compress(b"{" + b" " * 4000, mtime=0), sketch="gzip of `{` and 4,000 spaces (40 bytes)",
             headers={"content-encoding": "gzip", IHCL: "15000"}),
        Case("header-length-declared-chunked", "a streamed body declaring a 15,000-byte header, 20 bytes sent", 400,
             "request body ended 14980 bytes short, in the middle of the JSON inference header",
             body=b" " * 20, headers={IHCL: "15000"}, chunked=True),
        _binary_case("tensor-declared-not-sent", "a streamed body declaring a 60,000-byte tensor, 2 bytes sent", 400,
                     "request body ended 59998 bytes short, in the middle of input 'x'",
                     {"inputs": [_tensor("x", "UINT8", [60000], size=60000)]}, b"\x00\x00", chunked=True),
    ),
    *_section(
        "Restricted APIs (docs/security.md: --http-restricted-api model-repository,statistics:admin-key=…)",
        Case("restricted-no-header", "a repository load without the key", 403,
             "This API is restricted, expecting header 'admin-key'", body=b"{}",
             path=f"{RESTRICTED}/v2/repository/models/two/load"),
        Case("restricted-wrong-value", "statistics with another value", 403,
             "This API is restricted, expecting header 'admin-key'", method="GET",
             path=f"{RESTRICTED}/v2/models/stats", headers={"admin-key": "guess"}),
        Case("restricted-other-method", "a restricted path with the wrong method, without the key", 403,
             "This API is restricted, expecting header 'admin-key'", method="GET",
             path=f"{RESTRICTED}/v2/repository/index"),
    ),
    *_section(
        "The generate extension (docs/streaming.md: /generate and /generate_stream, on Triton's mock_llm)",
        Case("generate-inputs-missing", "no input at all", 400,
             "expected number of inputs between 2 and 3 but got 0 inputs for model 'mock_llm'", body=b"{}",
             path=GENERATE),
        Case("generate-input-missing", "one required input of two", 400,
             "expected number of inputs between 2 and 3 but got 1 inputs for model 'mock_llm'; missing 'STREAM'",
             body=b'{"PROMPT": "hi"}', path=GENERATE_STREAM),
        Case("generate-not-a-string", "a number for a BYTES input", 400,
             "attempt to access JSON non-string as string: input 'PROMPT' is BYTES, got a number",
             body=b'{"PROMPT": 123, "STREAM": false}', path=GENERATE),
        Case("generate-not-a-boolean", "a string for a BOOL input", 400,
             "attempt to access JSON non-boolean as boolean: input 'STREAM' is BOOL, got a string",
             body=b'{"STREAM": "false", "PROMPT": "hi"}', path=GENERATE_STREAM),
        Case("generate-not-an-integer", "a fraction for an INT32 input", 400,
             "attempt to access JSON non-signed-integer as signed integer: input 'input_ids' is INT32, got a number",
             body=b'{"PROMPT": "hi", "STREAM": false, "input_ids": [1.5]}', path=GENERATE),
        Case("generate-nested-input", "an object for an input", 400,
             "attempt to access JSON non-string as string: input 'PROMPT' is BYTES, got a JSON object",
             body=b'{"PROMPT": {"USER": "hi"}, "STREAM": true}', path=GENERATE),
        Case("generate-shape", "two elements for a [1, 1] input", 400,
             "The schema can not convert input 'PROMPT' to tensor with proper shape: 2 elements for shape [1, 1]",
             body=b'{"PROMPT": ["a", "b"], "STREAM": true}', path=GENERATE),
        Case("generate-duplicate-input", "an input given twice", 400, "input 'STREAM' already exists in request",
             body=b'{"PROMPT": "hi", "STREAM": false, "STREAM": true}', path=GENERATE_STREAM),
        Case("generate-duplicate-key", "another key given twice", 400, "key 'id' already exists in request",
             body=b'{"id": "a", "id": "b", "PROMPT": "hi", "STREAM": true}', path=GENERATE),
        Case("generate-parameter-object", "an object where a parameter goes", 400,
             "parameter 'PARAMS' has invalid type. It should be either 'int', 'bool', or 'string'.",
             body=b'{"PROMPT": "hi", "STREAM": true, "PARAMS": {"A": 0}}', path=GENERATE),
        Case("generate-input-twice-in-parameters", "an input given, and given again among the parameters", 400,
             "Converting keyword: 'parameters': input 'STREAM' already exists in request",
             body=b'{"PROMPT": "hi", "STREAM": true, "parameters": {"STREAM": false}}', path=GENERATE),
        Case("generate-parameters-not-object", "parameters that are not an object", 400,
             "Expected JSON object for keyword: 'parameters'",
             body=b'{"PROMPT": "hi", "STREAM": true, "parameters": 1}', path=GENERATE),
        Case("generate-parameters-nested", "a nested object among the parameters", 400,
             "Converting keyword: 'parameters': parameter 'nested' has invalid type.",
             body=b'{"PROMPT": "hi", "STREAM": true, "parameters": {"nested": {"twice": 1}}}', path=GENERATE),
        Case("generate-id-not-string", "a number for the id", 400, "the generate request's id must be a string",
             body=b'{"id": 7, "PROMPT": "hi", "STREAM": true}', path=GENERATE),
        Case("generate-not-json", "a body that is not JSON", 400, "malformed generate request JSON: Expecting value",
             body=b"PROMPT=hi", path=GENERATE_STREAM),
        Case("generate-not-object", "a JSON array", 400, "a generate request is a JSON object, got a JSON array",
             body=b'["hi"]', path=GENERATE),
        Case("generate-many-responses", "/generate on a model that answers twice", 500,
             "generate expects model to produce exactly 1 response, use generate stream for model that generates "
             "various number of responses", body=b'{"PROMPT": "hi", "STREAM": true, "REPETITION": 2}', path=GENERATE),
        Case("infer-decoupled", "/infer on a decoupled model", 501,
             "HTTP end point doesn't support models with decoupled transaction policy", body=_VALID_JSON,
             path="/v2/models/mock_llm/infer"),
    ),
    *_section(
        "System shared memory (docs/shared-memory.md): tensors in regions, and their register, in Triton's words",
        _json_case("shm-unknown-region", "an input in a region never registered", 404,
                   "Unable to find shared memory region: 'nowhere'",
                   {**_tensor("a", "INT32", [2]), "parameters": _SHM}, _tensor("b", "INT32", [2], [3, 4]),
                   path=VALID_PATH),
        _json_case("shm-data-and-region", "an input with data and a region", 400,
                   "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
                   "'shared_memory_region' in 'parameters'. But set 'data' 'shared_memory_region'",
                   {**_tensor("a", "INT32", [2], [1, 2]), "parameters": _SHM}, _tensor("b", "INT32", [2], [3, 4]),
                   path=VALID_PATH),
        _json_case("shm-no-byte-size", "a region without its byte size", 400,
                   "'shared_memory_byte_size' must be specified with 'shared_memory_region' parameter for tensor 'a'",
                   {**_tensor("a", "INT32", [2]), "parameters": {"shared_memory_region": "nowhere"}},
                   _tensor("b", "INT32", [2], [3, 4]), path=VALID_PATH),
        _json_case("shm-region-not-a-string", "a number for the region", 400,
                   "Expected `str | null`, got `int` - at `$.inputs[0].parameters.shared_memory_region`",
                   {**_tensor("a", "INT32", [2]), "parameters": {**_SHM, "shared_memory_region": 7}},
                   _tensor("b", "INT32", [2], [3, 4]), path=VALID_PATH),
        _json_case("shm-output-classification", "an output in a region, as classes", 400,
                   "Output can't set both 'shared_memory_region' and 'classification'",
                   _tensor("a", "INT32", [2], [1, 2]), _tensor("b", "INT32", [2], [3, 4]), path=VALID_PATH,
                   extra={"outputs": [{"name": "sum", "parameters": {**_SHM, "classification": 1}}]}),
        Case("shm-key-with-a-path", "a register whose key is a path", 400,
             "failed to register shared memory region 'r': invalid args: key '/../../etc/passwd' names no POSIX "
             "shared-memory object", body=_json({"key": "/../../etc/passwd", "byte_size": 8}),
             path="/v2/systemsharedmemory/region/r/register"),
        Case("shm-no-such-object", "a register of a key no object has", 400,
             "Unable to open shared memory region: '/oip_never_made'",
             body=_json({"key": "/oip_never_made", "byte_size": 8}), path="/v2/systemsharedmemory/region/r/register"),
        Case("shm-register-no-key", "a register without its key", 400,
             "Shared memory register request has no 'key' field", body=_json({"byte_size": 8}),
             path="/v2/systemsharedmemory/region/r/register"),
        Case("shm-register-no-name", "a register without a region name", 400,
             "'region name' is necessary to register system shared memory region",
             body=_json({"key": "/k", "byte_size": 8}), path="/v2/systemsharedmemory/register"),
        Case("shm-status-unknown", "the status of a region never registered", 404,
             "Unable to find system shared memory region: 'nowhere'", method="GET",
             path="/v2/systemsharedmemory/region/nowhere/status"),
        Case("shm-cuda-register", "a CUDA region's register", 501,
             "this server does not offer Triton's CUDA shared memory extension",
             body=_json({"raw_handle": {"b64": ""}, "device_id": 0, "byte_size": 8}),
             path="/v2/cudasharedmemory/region/r/register"),
    ),
    *_over_both_wires(),
]  # fmt: skip


def _chunks(body: bytes, size: int = 7) -> AsyncIterator[bytes]:
    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(body), size):
            yield body[start : start + size]

    return pieces()


async def send(http: httpx.AsyncClient, case: Case) -> httpx.Response:
    """Send an in-process case; non-ASCII header values go out as their latin-1 bytes."""
    headers = {name: value.encode("latin-1") for name, value in case.headers.items()}
    content: bytes | AsyncIterator[bytes] = _chunks(case.body) if case.chunked else case.body
    return await http.request(case.method, case.path, content=content, headers=headers)


async def valid_inference(http: httpx.AsyncClient) -> list[int]:
    response = await http.post(VALID_PATH, json=VALID_REQUEST)
    assert response.status_code == 200, response.text
    data: list[int] = response.json()["outputs"][0]["data"]
    return data


# ---- the document -------------------------------------------------------------------------------------------------

_HEADER_NAMES = {IHCL: "Inference-Header-Content-Length", "content-encoding": "Content-Encoding"}


def _printable(data: bytes, limit: int = 120) -> str:
    text = "".join(chr(byte) if 32 <= byte < 127 else f"\\x{byte:02x}" for byte in data[:limit])
    return text + (f"… ({len(data)} bytes)" if len(data) > limit else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def sketch(case: Case) -> str:
    parts = [f"`{case.method} {_printable(case.path.encode())}`"]
    for name, value in case.headers.items():
        parts.append(f"`{_HEADER_NAMES.get(name, name)}: {_printable(value.encode('latin-1'))}`")
    if case.content_length is not None:
        parts.append(f"`Content-Length: {case.content_length}` ({len(case.body)} sent)")
    if case.chunked:
        parts.append("chunked")
    if case.sketch is not None:
        parts.append(f"`{case.sketch}`")
    elif case.body:
        parts.append(f"`{_printable(case.body)}`")
    return " ".join(parts)


async def outcomes() -> dict[str, tuple[int | None, str]]:
    """What the server answers to each in-process case; socket cases keep their documented outcome."""
    results: dict[str, tuple[int | None, str]] = {}
    async with client(app) as http:
        for case in CASES:
            if case.over_socket:
                results[case.id] = (case.status, case.message)
                continue
            response = await send(http, case)
            results[case.id] = (response.status_code, response.json()["error"])
    return results


INTRO = """\
# Bad input: what each hostile request gets

Every request below is a test in `tests/rest/test_hostile.py`: it gets exactly this status and an
`{{"error": "..."}}` body with this message, and a valid inference on the same server succeeds right
after it. Generated from `tests/rest/hostile_cases.py` by `python -m tests.rest.hostile_cases > docs/bad-input.md`
(a test fails if this file drifts). The app under test serves `echo` (no declared tensors),
`identity_<datatype>` (input `x`, output `y`, shape `[-1]`), `two` (INT32 inputs `a` and `b`, output `sum`)
`scores` (FP32 `[-1, 4]`, labelled) and Triton's `mock_llm` (a generator: examples/streaming.py), with
`max_body_size={body}` and `max_json_size={json}` bytes.
Requests are sent with an honest `Content-Length` unless marked chunked (streamed without one).

The last section is the refusals both wires share: `tests/support/parity_cases.py` holds them as data, its
models are served at `/parity/v2` here (beside a model repository in the explicit mode: a model whose
load fails, one not loaded, and a folder named as a model from code, refused), and
`tests/e2e/test_parity.py` sends each case over REST and over gRPC to one server and checks that both
answer with this message (and the gRPC status code of this HTTP status).

The Content-Length cases need a real server, since an in-process transport cannot lie about the body:
they run against uvicorn (with httptools, as `uvicorn[standard]` installs it) over a raw socket, and
the answer there is uvicorn's own, given before or instead of the app's. After each, the same server
still answers a valid inference.

{count} cases.
"""


async def document() -> str:
    results = await outcomes()
    lines = [INTRO.format(body=MAX_BODY_SIZE, json=MAX_JSON_SIZE, count=len(CASES))]
    group = None
    for case in CASES:
        if case.group != group:
            group = case.group
            lines += [f"## {group}", "", "| Case | Request | Status | Message |", "| --- | --- | --- | --- |"]
        status, message = results[case.id]
        title = f"`{case.id}`: {case.description}"
        lines.append(
            f"| {_cell(title)} | {_cell(sketch(case))} | {status if status is not None else '—'} | {_cell(message)} |"
        )
        if case is CASES[-1] or CASES[CASES.index(case) + 1].group != group:
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    # The models that fail on purpose log their tracebacks; the document needs only their answers.
    logging.getLogger("oip_asgi").addHandler(logging.NullHandler())
    print(asyncio.run(document()), end="")
