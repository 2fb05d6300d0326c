"""A coverage-guided (atheris) fuzz target for the inference request path.

Each input is one POST to ``/models/<name>/infer`` of a real `oip_asgi.oip_app`, driven straight through
ASGI: the fuzzer picks the model, the ``Inference-Header-Content-Length`` (absent, a number, or any
text), the ``Content-Encoding`` (none, gzip or deflate applied by the harness, or any label on the raw
bytes), ``Content-Length`` (absent, true or a lie), ``Accept-Encoding``, how the body is split into
``http.request`` messages, a client that disconnects after the body, and the body itself. Whatever
the bytes, the app must answer exactly once, with a status other than 5xx, a ``{"error": str}`` body
on 4xx, a well-formed inference response on 200 and a Content-Length that matches the body; no
exception may escape and it must not wait for a body message that will never come. A violation
raises, which atheris reports as a crash with the input saved.

Run it from the repository root for a bounded time (only ``oip_asgi`` is instrumented; the words of a
request in ``request.dict`` are passed as ``-dict`` unless one is given):

    python tests/rest/fuzz/fuzz_request.py tests/rest/fuzz/corpus -max_total_time=60

libFuzzer adds every input that finds new coverage to the first corpus directory it is given, so for
longer campaigns fuzz a copy and keep crash files out of the tree:

    cp -r tests/rest/fuzz/corpus /tmp/corpus
    python tests/rest/fuzz/fuzz_request.py /tmp/corpus -max_total_time=600 -artifact_prefix=/tmp/

Replay one input (prints what the app answered): ``python tests/rest/fuzz/fuzz_request.py --show FILE``.
Regenerate the seed corpus: ``python tests/rest/fuzz/fuzz_request.py --write-seeds tests/rest/fuzz/corpus``.

Input layout: a 13-byte prefix (`PREFIX`, fields below), three text fields whose lengths the prefix
gives, then the request body. Inputs too short for the prefix are skipped.
"""

from __future__ import annotations

import gzip
import json
import logging
import struct
import sys
import traceback
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[3]

# model, flags, options, header number, Content-Length delta, chunk size, and the three text lengths.
PREFIX = struct.Struct("<BBBIbBBBB")

# flags
HEADER_MODES = 0b11  # Inference-Header-Content-Length: 0 absent, 1 the number, 2 the text, 3 minus the number
ENCODING_SHIFT = 2  # 3 bits, see ENCODINGS
CONTENT_LENGTH = 1 << 5  # send Content-Length
CONTENT_LENGTH_LIE = 1 << 6  # ... off by the delta
VERSIONED = 1 << 7  # /models/<name>/versions/1/infer
# options
ACCEPT_MODES = 0b11  # Accept-Encoding: 0 absent, 1 gzip, 2 deflate, 3 the text
DISCONNECT = 1 << 2  # the client goes away after the body instead of ending it
TRAILING_EMPTY = 1 << 3  # end the body with an empty message

# Content-Encoding modes: the harness compresses the fuzzed body ("gzip", "zlib", "raw-deflate"), or
# labels the body as it is (the fuzzer then writes compressed bytes, valid or not).
ENCODINGS = ("none", "gzip", "zlib", "raw-deflate", "text", "as-gzip", "as-deflate", "identity")

MAX_BODY_SIZE = 2048
MAX_JSON_SIZE = 1024
# Statuses a request to an existing model's infer URL may get; anything else (5xx above all) is a bug.
EXPECTED_STATUSES = {200, 400, 413, 415}
DATATYPES = [
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
    "FP16", "FP32", "FP64", "BYTES", "BF16",
]  # fmt: skip


async def _identity(INPUT0: np.ndarray) -> np.ndarray:
    return INPUT0


async def _pair(A: np.ndarray, B: np.ndarray | None = None) -> dict[str, np.ndarray]:
    return {"A": A, "B": np.zeros((0, 4), np.float32) if B is None else B}


async def _echo(**inputs: np.ndarray) -> dict[str, np.ndarray]:
    return inputs


def models() -> dict[str, Any]:
    """Async models only: the app then never waits on the event loop, which keeps the harness fast."""
    from oip_asgi import Model, TensorSpec

    def identity(datatype: str, shape: list[int], **options: Any) -> Model:
        return Model(
            _identity,
            inputs=[TensorSpec("INPUT0", datatype, shape)],
            outputs=[TensorSpec("OUTPUT0", datatype, shape)],
            **options,
        )

    table: dict[str, Any] = {datatype.lower(): identity(datatype, [-1]) for datatype in DATATYPES}
    table["pair"] = Model(
        _pair,
        inputs=[TensorSpec("A", "INT32", [-1, 4]), TensorSpec("B", "FP32", [-1, 4], optional=True)],
        outputs=[TensorSpec("A", "INT32", [-1, 4]), TensorSpec("B", "FP32", [-1, 4])],
    )
    table["classes"] = identity("FP32", [-1, 4], labels=["cat", "dog", "bird", "fish"])
    table["fixed"] = identity("INT16", [2, 3])
    table["image"] = identity("UINT8", [-1, -1, 3])
    table["echo"] = _echo
    return table


# Static, so that importing this module does not import oip_asgi before atheris can instrument it.
MODEL_NAMES = [*(datatype.lower() for datatype in DATATYPES), "pair", "classes", "fixed", "image", "echo"]


class Captured(logging.Handler):
    """The app logs the exception behind a 500: keep it so the crash report shows the real traceback."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


@cache
def app() -> tuple[Any, Captured]:
    import oip_asgi

    table = models()
    assert list(table) == MODEL_NAMES, "MODEL_NAMES must list models() in order: inputs select models by index"
    captured = Captured()
    logging.getLogger("oip_asgi").addHandler(captured)
    return oip_asgi.oip_app(table, max_body_size=MAX_BODY_SIZE, max_json_size=MAX_JSON_SIZE), captured


@dataclass
class Request:
    model: str
    path: str
    headers: list[tuple[bytes, bytes]]
    messages: list[dict[str, Any]]
    disconnect: bool


def _compress(body: bytes, mode: str) -> bytes:
    if mode == "gzip":
        return gzip.compress(body, compresslevel=1, mtime=0)
    if mode == "zlib":
        return zlib.compress(body, 1)
    compressor = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(body) + compressor.flush()


def decode(data: bytes) -> Request | None:
    """The request an input describes, or None when it is too short to say."""
    if len(data) < PREFIX.size:
        return None
    model_index, flags, options, number, delta, chunk, *text_lengths = PREFIX.unpack_from(data)
    position = PREFIX.size
    texts: list[bytes] = []
    for length in text_lengths:
        texts.append(data[position : position + length])
        position += length
    header_text, encoding_text, accept_text = texts
    body = data[position:]

    model = MODEL_NAMES[model_index % len(MODEL_NAMES)]
    path = f"/models/{model}/versions/1/infer" if flags & VERSIONED else f"/models/{model}/infer"
    headers: list[tuple[bytes, bytes]] = []
    header_mode = flags & HEADER_MODES
    if header_mode:
        value = {1: str(number).encode(), 2: header_text, 3: f"-{number}".encode()}[header_mode]
        headers.append((b"inference-header-content-length", value))
    encoding = ENCODINGS[flags >> ENCODING_SHIFT & 0b111]
    if encoding in ("gzip", "zlib", "raw-deflate"):
        body = _compress(body, encoding)
    label = {"gzip": b"gzip", "zlib": b"deflate", "raw-deflate": b"deflate", "text": encoding_text}.get(encoding)
    label = {"as-gzip": b"gzip", "as-deflate": b"deflate", "identity": b"identity"}.get(encoding, label)
    if label is not None:
        headers.append((b"content-encoding", label))
    if flags & CONTENT_LENGTH:
        length = len(body) + (delta if flags & CONTENT_LENGTH_LIE else 0)
        headers.append((b"content-length", str(length).encode()))
    accept = {1: b"gzip", 2: b"deflate", 3: accept_text}.get(options & ACCEPT_MODES)
    if accept is not None:
        headers.append((b"accept-encoding", accept))

    pieces = [body[start : start + chunk] for start in range(0, len(body), chunk)] if chunk else [body]
    if options & TRAILING_EMPTY or not pieces:
        pieces.append(b"")
    disconnect = bool(options & DISCONNECT)
    messages = [
        {"type": "http.request", "body": piece, "more_body": disconnect or index < len(pieces) - 1}
        for index, piece in enumerate(pieces)
    ]
    return Request(model, path, headers, messages, disconnect)


def encode(
    model: str,
    body: bytes,
    *,
    header_length: int | None = None,
    encoding: str = "none",
    content_length: bool = True,
    accept: int = 0,
    chunk: int = 0,
    versioned: bool = False,
) -> bytes:
    """The input for a request, to write seeds: the inverse of `decode` for the options it takes."""
    flags = ENCODINGS.index(encoding) << ENCODING_SHIFT
    flags |= 0 if header_length is None else 1
    flags |= CONTENT_LENGTH if content_length else 0
    flags |= VERSIONED if versioned else 0
    number = header_length or 0
    return PREFIX.pack(MODEL_NAMES.index(model), flags, accept, number, 0, chunk, 0, 0, 0) + body


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    received_disconnect: bool


def run(request: Request) -> Response | None:
    """Serve one request; None when the client disconnected and the app (rightly) answered nothing."""
    application, captured = app()
    captured.errors.clear()
    pending = deque(request.messages)
    sent: list[dict[str, Any]] = []
    received_disconnect = False

    async def receive() -> dict[str, Any]:
        nonlocal received_disconnect
        if pending:
            return pending.popleft()
        if not request.disconnect:
            # A server would block here until the client goes away: the app hangs on a complete body.
            raise AssertionError("the app called receive() after the last body message")
        received_disconnect = True
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": request.headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    coroutine = application(scope, receive, send)
    try:
        coroutine.send(None)
    except StopIteration:
        pass
    else:
        coroutine.close()
        raise AssertionError("the app waited on the event loop, though every model is async and no receive blocks")

    if not sent and received_disconnect:
        return None
    assert sent, "the app answered nothing"
    start, *bodies = sent
    assert start["type"] == "http.response.start", f"the first message is {start['type']}"
    assert all(message["type"] == "http.response.body" for message in bodies), [m["type"] for m in sent]
    assert bodies and not bodies[-1].get("more_body", False), "the response body never ends"
    assert all(message.get("more_body", False) for message in bodies[:-1]), "a body message follows the last one"
    names = [name.decode("latin-1").lower() for name, _ in start["headers"]]
    assert len(names) == len(set(names)), f"repeated response headers: {names}"
    headers = {name: value.decode("latin-1") for name, (_, value) in zip(names, start["headers"], strict=True)}
    body = b"".join(message.get("body", b"") for message in bodies)
    status = start["status"]
    if status >= 500:
        # atheris prints only the outer traceback: put the logged one in the message.
        cause = "".join(traceback.format_exception(captured.errors[-1])) if captured.errors else "(nothing logged)"
        raise AssertionError(f"{status} {body!r}\n{cause}")
    return Response(status, headers, body, received_disconnect)


def check(request: Request, response: Response) -> None:
    """The invariants of a served answer (beyond "not 5xx", which `run` checks)."""
    assert response.status in EXPECTED_STATUSES, f"unexpected status {response.status}: {response.body!r}"
    if "content-length" in response.headers:
        assert int(response.headers["content-length"]) == len(response.body), "Content-Length does not match"
    body = response.body
    if response.status != 200:
        assert response.headers.get("content-type") == "application/json", response.headers
        assert "content-length" in response.headers, "an error without Content-Length"
        error = json.loads(body)
        assert isinstance(error, dict) and list(error) == ["error"] and isinstance(error["error"], str), error
        return
    encoding = response.headers.get("content-encoding")
    if encoding is None:
        assert "content-length" in response.headers, "an uncompressed response without Content-Length"
    else:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
        body = inflater.decompress(body) + inflater.flush()
        assert encoding in ("gzip", "deflate") and inflater.eof, f"a truncated {encoding} response"
    header_length = response.headers.get("inference-header-content-length")
    if header_length is None:
        assert response.headers.get("content-type") == "application/json", response.headers
        header, binary = json.loads(body), b""
    else:
        assert response.headers.get("content-type") == "application/octet-stream", response.headers
        header, binary = json.loads(body[: int(header_length)]), body[int(header_length) :]
    assert header["model_name"] == request.model and header["model_version"] == "1", header
    sizes = [(output.get("parameters") or {}).get("binary_data_size", 0) for output in header["outputs"]]
    assert sum(sizes) == len(binary), f"binary_data_size values {sizes} for {len(binary)} bytes"
    for output in header["outputs"]:
        assert ("data" in output) != ("binary_data_size" in (output.get("parameters") or {})), output


def one_input(data: bytes) -> None:
    request = decode(data)
    if request is None:
        return
    response = run(request)
    if response is not None:
        check(request, response)


def seeds() -> Iterator[tuple[str, bytes]]:
    """Valid requests covering each encoding the parser knows; every one must be served 200."""

    def js(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()

    def tensor(name: str, datatype: str, shape: list[int], data: Any = None, size: int | None = None) -> Any:
        entry: dict[str, Any] = {"name": name, "datatype": datatype, "shape": shape}
        if data is not None:
            entry["data"] = data
        if size is not None:
            entry["parameters"] = {"binary_data_size": size}
        return entry

    def binary(model: str, header: Any, *tensors: bytes, **options: Any) -> bytes:
        head = js(header)
        return encode(model, head + b"".join(tensors), header_length=len(head), **options)

    def strings(*items: bytes) -> bytes:
        return b"".join(struct.pack("<I", len(item)) + item for item in items)

    fp32 = np.array([0.1, -3.5, 1e3], "<f4").tobytes()
    yield "json-fp32", encode("fp32", js({"inputs": [tensor("INPUT0", "FP32", [3], [0.1, -3.5, 1e3])]}))
    yield (
        "json-pair-nested",
        encode(
            "pair",
            js(
                {
                    "id": "seed",
                    "inputs": [
                        tensor("A", "INT32", [1, 4], [[1, 2, 3, 4]]),
                        tensor("B", "FP32", [1, 4], [0.5, 1, 2, 3]),
                    ],
                    "outputs": [{"name": "A"}, {"name": "B", "parameters": {"binary_data": True}}],
                }
            ),
            versioned=True,
        ),
    )
    yield (
        "json-echo-mixed",
        encode(
            "echo",
            js(
                {
                    "parameters": {"note": "x"},
                    "inputs": [
                        tensor("flags", "BOOL", [2], [True, False]),
                        tensor("big", "UINT64", [1], [2**64 - 1]),
                        tensor("half", "FP16", [2], [0.5, -2]),
                        tensor("small", "INT8", [2], [-128, 127]),
                    ],
                }
            ),
            content_length=False,
        ),
    )
    yield "json-bytes", encode("bytes", js({"inputs": [tensor("INPUT0", "BYTES", [2], ["hi", "wörld"])]}))
    yield (
        "binary-pair",
        binary(
            "pair",
            {"inputs": [tensor("A", "INT32", [1, 4], size=16), tensor("B", "FP32", [1, 4], [1, 2, 3, 4])]},
            np.arange(4, dtype="<i4").tobytes(),
        ),
    )
    yield (
        "binary-bytes",
        binary(
            "bytes",
            {"inputs": [tensor("INPUT0", "BYTES", [2], size=13)], "parameters": {"binary_data_output": True}},
            strings(b"abc", b"\xff\x00"),
            chunk=7,
        ),
    )
    as_binary = {"name": "x", "parameters": {"binary_data": True}}
    bf16 = {"inputs": [tensor("x", "BF16", [2], size=4)], "outputs": [as_binary]}
    yield "binary-bf16", binary("echo", bf16, b"\x80\x3f\x00\x40")
    yield "raw-fp32", encode("fp32", fp32, header_length=0)
    yield "raw-bytes", encode("bytes", b"hello\x00world", header_length=0, content_length=False)
    yield "raw-fixed-int16", encode("fixed", np.arange(6, dtype="<i2").tobytes(), header_length=0, chunk=5)
    yield "raw-image", encode("image", bytes(range(6)), header_length=0)
    yield (
        "classification",
        encode(
            "classes",
            js(
                {
                    "inputs": [tensor("INPUT0", "FP32", [2, 4], [[0.1, 0.7, 0.2, 0], [3, 1, 2, 4]])],
                    "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 2}}],
                }
            ),
        ),
    )
    # A NaN score, ranked last.
    scores = np.array([[0.5, np.nan, 2, 1]], "<f4").tobytes()
    classify = {"name": "OUTPUT0", "parameters": {"classification": 4, "binary_data": True}}
    classify_request = {"inputs": [tensor("INPUT0", "FP32", [1, 4], size=16)], "outputs": [classify]}
    yield "classification-binary-nan", binary("classes", classify_request, scores)
    # Infinity goes out only as binary: flipping binary_data_output reaches the JSON refusal.
    infinite = {"inputs": [tensor("INPUT0", "FP16", [2], size=4)], "parameters": {"binary_data_output": True}}
    yield "binary-fp16-inf", binary("fp16", infinite, np.array([np.inf, -1], "<f2").tobytes())
    optional_missing = {"inputs": [tensor("A", "INT32", [2, 4], list(range(8)))], "outputs": [{"name": "B"}]}
    yield "json-pair-optional-missing", encode("pair", js(optional_missing))
    yield (
        "gzip-json-int64",
        encode(
            "int64", js({"inputs": [tensor("INPUT0", "INT64", [2], [-(2**63), 2**63 - 1])]}), encoding="gzip", accept=1
        ),
    )
    yield (
        "deflate-binary-uint8",
        binary(
            "uint8", {"inputs": [tensor("INPUT0", "UINT8", [4], size=4)]}, b"\x00\x01\xfe\xff", encoding="zlib", chunk=9
        ),
    )


def show(path: str) -> None:
    request = decode(Path(path).read_bytes())
    if request is None:
        print("too short to be a request")
        return
    print(request.path, request.headers, [len(message["body"]) for message in request.messages])
    response = run(request)
    print(response)
    if response is not None:
        check(request, response)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:2] == ["--write-seeds"]:
        directory = Path(sys.argv[2])
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in seeds():
            (directory / name).write_bytes(data)
        return
    if sys.argv[1:2] == ["--show"]:
        show(sys.argv[2])
        return

    import atheris

    # Only the package under test: instrumenting numpy, msgspec and the rest costs speed, not coverage we want.
    with atheris.instrument_imports(include=["oip_asgi"]):
        import oip_asgi  # noqa: F401
    arguments = sys.argv
    if not any(argument.startswith("-dict=") for argument in arguments):
        arguments = [*arguments, f"-dict={Path(__file__).with_name('request.dict')}"]
    atheris.Setup(arguments, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
