"""Soak: N concurrent clients for M seconds against a real uvicorn server, valid and hostile requests mixed.

    python3 bench/soak.py --clients 32 --seconds 60

The server is examples.app:app under uvicorn (uvloop + httptools, one worker, as the benchmark runs
ours), pinned to core 0; the clients share one asyncio loop pinned to core 1 and speak HTTP/1.1 over
raw sockets from pre-built requests, so the server stays the bottleneck. Every valid response is
checked in full; every invalid request must get its own 4xx with a JSON error; hostile clients hang
up mid-body or mid-response. Server RSS is read after a warm-up and at the end (both with the server
idle) and sampled in between. Exits 1 on any 5xx to a valid request, any unexplained result, an
error in the server log, or RSS drift past --max-drift-mib.

Standard library only: the server runs in bench/.peers/ours (set up as the benchmark does) unless
--python names an interpreter with oip-asgi[examples], uvloop and httptools installed.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import socket
import struct
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import envs, procs, report, servers

HOST = "127.0.0.1"
SERVER_CORE, CLIENT_CORE = procs.SERVER_CORE, procs.LOAD_CORE
VARIANTS = 16  # pre-built requests per kind, each with its expected answer
TIMEOUT = 30.0
ANIMALS = ["cat", "dog", "bird"]
WEIGHTS = [[2.0, -1.0, 0.5], [-1.0, 2.0, 0.5], [0.5, 0.5, -2.0], [0.1, 0.2, 3.0]]  # examples/models.py
STRUCT = {"FP16": "e", "FP32": "f", "FP64": "d", "INT8": "b", "UINT16": "H", "INT32": "i", "INT64": "q", "BOOL": "?"}
INT_RANGE = {"INT8": (-(2**7), 2**7 - 1), "UINT16": (0, 2**16 - 1), "INT32": (-(2**31), 2**31 - 1)}
INT_RANGE["INT64"] = (-(2**63), 2**63 - 1)

Check = Callable[["Response"], "str | None"]  # None when the answer is right, else what is wrong


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def split(self) -> tuple[dict[str, Any], dict[str, bytes]]:
        """The JSON header and each binary output's bytes, by name."""
        length = int(self.headers.get("inference-header-content-length", len(self.body)))
        header = json.loads(self.body[:length])
        parts, position = {}, length
        for output in header.get("outputs", []):
            size = (output.get("parameters") or {}).get("binary_data_size")
            if size is not None:
                parts[output["name"]] = self.body[position : position + size]
                position += size
        if position != len(self.body):
            raise ValueError(f"binary parts end at {position}, the body at {len(self.body)}")
        return header, parts


@dataclass(frozen=True)
class Request:
    data: bytes
    check: Check
    hostile: str = ""  # how a hostile client misbehaves: "mid-body", "mid-body-rst", "mid-response"
    cut: int = 0  # bytes sent before a mid-body hang-up
    close: bool = False  # the connection cannot be reused after this exchange


@dataclass(frozen=True)
class Kind:
    name: str
    category: str  # valid, invalid or hostile
    weight: float
    variants: list[Request]


def http(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"host: {HOST}", f"content-length: {len(body)}"]
    lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def infer(model: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    return http("POST", f"/v2/models/{model}/infer", body, headers)


def binary_body(header: dict[str, Any], *tensors: bytes) -> tuple[bytes, dict[str, str]]:
    head = json.dumps(header, separators=(",", ":")).encode()
    return head + b"".join(tensors), {"inference-header-content-length": str(len(head))}


def bytes_tensor(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


def packed(datatype: str, values: list[Any]) -> bytes:
    return struct.pack(f"<{len(values)}{STRUCT[datatype]}", *values)


def expect(condition: bool, problem: str) -> str | None:
    return None if condition else problem


# --- Valid requests, each with the exact answer it must get ---------------------------------------


def random_values(rng: random.Random, datatype: str, count: int) -> list[Any]:
    if datatype == "BOOL":
        return [rng.random() < 0.5 for _ in range(count)]
    if datatype == "BYTES":
        return ["".join(rng.choice("abcdé €xyz") for _ in range(rng.randint(0, 12))) for _ in range(count)]
    if datatype in INT_RANGE:
        low, high = INT_RANGE[datatype]
        return [rng.choice((low, high, 0)) if rng.random() < 0.1 else rng.randint(low, high) for _ in range(count)]
    # Floats the datatype holds exactly (rounded through struct), so the echo must match bit for bit.
    scale = 6e4 if datatype == "FP16" else 1e30
    values = [rng.uniform(-1, 1) * scale ** rng.random() for _ in range(count)]
    return list(struct.unpack(f"<{count}{STRUCT[datatype]}", packed(datatype, values)))


def same_values(datatype: str, got: list[Any], want: list[Any]) -> bool:
    if datatype in ("FP16", "FP32"):  # shortest text of the narrow float: compare after rounding to it
        return len(got) == len(want) and packed(datatype, got) == packed(datatype, want)
    return got == want


def identity_json(rng: random.Random, datatype: str) -> Request:
    values = random_values(rng, datatype, rng.randint(1, 64))
    tensor = {"name": "INPUT0", "shape": [len(values)], "datatype": datatype, "data": values}
    body = json.dumps({"id": f"r{rng.randrange(10**6)}", "inputs": [tensor]}).encode()

    def check(response: Response) -> str | None:
        answer = response.json()
        output = answer["outputs"][0]
        return (
            expect(answer["id"] == json.loads(body)["id"], "id not echoed")
            or expect(output["shape"] == [len(values)] and output["datatype"] == datatype, f"output {output}")
            or expect(same_values(datatype, output["data"], values), f"{datatype} data differs")
        )

    return Request(infer(f"identity_{datatype.lower()}", body), check)


def identity_binary(rng: random.Random, count: int, raw_request: bool = False) -> Request:
    values = random_values(rng, "FP32", 256)
    payload = packed("FP32", values) * (count // 256)
    if raw_request:  # the whole body is the tensor (Inference-Header-Content-Length: 0)
        data = infer("identity_fp32", payload, {"inference-header-content-length": "0"})
    else:
        tensor = {"name": "INPUT0", "shape": [count], "datatype": "FP32", "parameters": {"binary_data_size": count * 4}}
        body, headers = binary_body({"inputs": [tensor], "parameters": {"binary_data_output": True}}, payload)
        data = infer("identity_fp32", body, headers)

    def check(response: Response) -> str | None:
        header, parts = response.split()
        shape = header["outputs"][0]["shape"]
        return expect(shape in ([count], [1, count]) and parts.get("OUTPUT0") == payload, "binary echo differs")

    return Request(data, check)


def simple(rng: random.Random, binary: bool, compressed: bool = False, versioned: bool = False) -> Request:
    batch = rng.randint(1, 4)
    a, b = (random_values(rng, "INT32", 16 * batch) for _ in range(2))
    a, b = [value // 4 for value in a], [value // 4 for value in b]  # sums and differences stay in INT32
    plus, minus = [x + y for x, y in zip(a, b, strict=True)], [x - y for x, y in zip(a, b, strict=True)]
    headers: dict[str, str] = {}
    if binary:
        tensors = [
            {"name": name, "shape": [batch, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64 * batch}}
            for name in ("INPUT0", "INPUT1")
        ]
        outputs = [{"name": "OUTPUT1", "parameters": {"binary_data": True}}, {"name": "OUTPUT0"}]
        body, headers = binary_body({"inputs": tensors, "outputs": outputs}, packed("INT32", a), packed("INT32", b))
    else:
        tensors = [
            {"name": name, "shape": [batch, 16], "datatype": "INT32", "data": values}
            for name, values in (("INPUT0", a), ("INPUT1", b))
        ]
        body = json.dumps({"inputs": tensors}).encode()
    if compressed:
        body = gzip.compress(body, 1)
        headers.update({"content-encoding": "gzip", "accept-encoding": "gzip"})
    path = "simple/versions/1" if versioned else "simple"

    def check(response: Response) -> str | None:
        if compressed and response.headers.get("content-encoding") != "gzip":
            return "response not gzip-encoded"
        header, parts = response.split()
        outputs = {output["name"]: output for output in header["outputs"]}
        if binary:
            # OUTPUT1 was asked for first, as binary; OUTPUT0 follows as JSON.
            order = [output["name"] for output in header["outputs"]]
            return expect(order == ["OUTPUT1", "OUTPUT0"], f"outputs in order {order}") or expect(
                parts.get("OUTPUT1") == packed("INT32", minus) and outputs["OUTPUT0"]["data"] == plus, "sums differ"
            )
        return expect(outputs["OUTPUT0"]["data"] == plus and outputs["OUTPUT1"]["data"] == minus, "sums differ")

    return Request(infer(path, body, headers), check)


def text(rng: random.Random) -> Request:
    words = [value.encode() for value in random_values(rng, "BYTES", rng.randint(1, 8))]
    tensor = {"name": "TEXT", "shape": [len(words)], "datatype": "BYTES"}
    tensor["parameters"] = {"binary_data_size": len(bytes_tensor(words))}
    body, headers = binary_body({"inputs": [tensor], "parameters": {"binary_data_output": True}}, bytes_tensor(words))

    def check(response: Response) -> str | None:
        _, parts = response.split()
        upper = bytes_tensor([word.upper() for word in words])  # bytes.upper(): ASCII letters only, as the model
        return expect(parts.get("UPPER") == upper, "UPPER differs") or expect(
            parts.get("LENGTH") == packed("INT64", [len(word) for word in words]), "LENGTH differs"
        )

    return Request(infer("text", body, headers), check)


def classification(rng: random.Random) -> Request:
    while True:
        features = [float(rng.randint(-4, 4)) for _ in range(4)]
        scores = [sum(features[i] * WEIGHTS[i][j] for i in range(4)) for j in range(3)]
        ranked = sorted(range(3), key=lambda j: -scores[j])
        if all(abs(scores[x] - scores[y]) > 0.05 for x in range(3) for y in range(x)):
            break  # clear margins: the float32 model must rank them the same
    k = rng.randint(1, 3)
    body = {
        "inputs": [{"name": "FEATURES", "shape": [1, 4], "datatype": "FP32", "data": features}],
        "outputs": [{"name": "SCORES", "parameters": {"classification": k}}],
    }

    def check(response: Response) -> str | None:
        output = response.json()["outputs"][0]
        if output["shape"] != [1, k] or output["datatype"] != "BYTES":
            return f"classification output {output}"
        for entry, index in zip(output["data"], ranked, strict=False):
            value, position, label = entry.split(":")
            if int(position) != index or label != ANIMALS[index] or abs(float(value) - scores[index]) > 1e-4:
                return f"classification {output['data']}, want {[(scores[j], j) for j in ranked[:k]]}"
        return None

    return Request(infer("animals", json.dumps(body).encode()), check)


def metadata(rng: random.Random) -> Request:
    if rng.random() < 0.5:
        return Request(http("GET", "/v2/health/ready"), lambda r: expect(r.json() == {"ready": True}, "not ready"))

    def check(response: Response) -> str | None:
        answer = response.json()
        return expect(answer["name"] == "simple" and answer["inputs"][0]["shape"] == [-1, 16], "metadata differs")

    return Request(http("GET", "/v2/models/simple"), check)


# --- Invalid requests: each must get its own status and a JSON error -------------------------------


def error_check(status: int, text: str) -> Check:
    def check(response: Response) -> str | None:
        if response.status != status:
            return f"status {response.status}, want {status}"
        if response.headers.get("content-type") != "application/json":
            return "error without a JSON body"
        message = response.json().get("error")
        return expect(isinstance(message, str) and text in message, f"error {message!r} lacks {text!r}")

    return check


def tensor_json(datatype: str, shape: list[Any], data: Any, name: str = "INPUT0") -> dict[str, Any]:
    return {"name": name, "shape": shape, "datatype": datatype, "data": data}


def invalid_requests() -> dict[str, Request]:
    def bad_json(model: str, body: Any, status: int, text: str) -> Request:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return Request(infer(model, raw), error_check(status, text))

    fp32 = {"name": "INPUT0", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 12}}
    mismatch, mismatch_headers = binary_body({"inputs": [fp32]}, b"\0" * 12)
    long_bytes = {"name": "INPUT0", "shape": [1], "datatype": "BYTES", "parameters": {"binary_data_size": 8}}
    past_end, past_end_headers = binary_body({"inputs": [long_bytes]}, struct.pack("<I", 100) + b"abcd")
    valid = json.dumps({"inputs": [tensor_json("INT32", [2], [1, 2])]}).encode()
    scores = {"inputs": [tensor_json("FP32", [1, 4], [1, 0, 0, 0], "FEATURES")]}
    return {
        "malformed-json": bad_json("identity_int32", b'{"inputs": [', 400, "malformed"),
        "truncated-json": bad_json("identity_int32", valid[: len(valid) // 2], 400, "malformed"),
        "deep-json": bad_json("echo", b"[" * 10000 + b"]" * 10000, 400, "invalid inference request"),
        "header-not-object": bad_json("echo", [1, 2], 400, "Expected `object`"),
        "string-in-int32": bad_json("identity_int32", {"inputs": [tensor_json("INT32", [1], ["1"])]}, 400, "INPUT0"),
        "int8-out-of-range": bad_json("identity_int8", {"inputs": [tensor_json("INT8", [1], [200])]}, 400, "INPUT0"),
        "nan-in-json": bad_json(
            "identity_fp32",
            b'{"inputs":[{"name":"INPUT0","shape":[1],"datatype":"FP32","data":[NaN]}]}',
            400,
            "malformed",
        ),  # fmt: skip
        "negative-dim": bad_json("echo", {"inputs": [tensor_json("INT32", [-2], [1])]}, 400, "$.inputs[0].shape[0]"),
        "shape-overflow": bad_json("echo", {"inputs": [tensor_json("INT8", [2**40, 2**40], [1])]}, 400, "INPUT0"),
        "unknown-datatype": bad_json("echo", {"inputs": [tensor_json("INT3", [1], [1])]}, 400, "$.inputs[0].datatype"),
        "duplicate-input": bad_json(
            "echo", {"inputs": [tensor_json("INT32", [1], [1])] * 2}, 400, "appears more than once"
        ),
        "missing-input": bad_json(
            "simple", {"inputs": [tensor_json("INT32", [1, 16], [0] * 16)]}, 400, "missing input 'INPUT1'"
        ),
        "count-mismatch": bad_json("identity_int32", {"inputs": [tensor_json("INT32", [3], [1, 2])]}, 400, "INPUT0"),
        "classification-zero": bad_json(
            "animals",
            {**scores, "outputs": [{"name": "SCORES", "parameters": {"classification": 0}}]},
            400,
            "$.outputs[0].parameters.classification",
        ),
        "classification-on-bytes": bad_json(
            "text",
            {
                "inputs": [tensor_json("BYTES", [1], ["a"], "TEXT")],
                "outputs": [{"name": "UPPER", "parameters": {"classification": 1}}],
            },
            400,
            "classification needs a numeric output",
        ),  # fmt: skip
        "binary-size-mismatch": Request(infer("identity_fp32", mismatch, mismatch_headers), error_check(400, "INPUT0")),
        "bytes-length-past-end": Request(
            infer("identity_bytes", past_end, past_end_headers), error_check(400, "INPUT0")
        ),
        "header-length-not-a-number": Request(
            infer("echo", valid, {"inference-header-content-length": "ten"}), error_check(400, "non-negative integer")
        ),
        "header-length-past-body": Request(
            infer("echo", valid, {"inference-header-content-length": str(len(valid) + 5)}),
            error_check(400, "exceeds the body's Content-Length"),
        ),
        "raw-binary-two-inputs": Request(
            infer("simple", b"\0" * 64, {"inference-header-content-length": "0"}), error_check(400, "one input")
        ),
        "unknown-encoding": Request(infer("echo", valid, {"content-encoding": "br"}), error_check(415, "br")),
        "unknown-model": bad_json("nope", valid, 404, "unknown model 'nope'"),
        "unknown-version": bad_json("simple/versions/9", valid, 404, "has no version '9'"),
        "unknown-path": Request(http("GET", "/v2/models/simple/config"), error_check(404, "no such path")),
        "wrong-method": Request(http("GET", "/v2/models/simple/infer"), error_check(405, "use POST")),
        # The app answers before the body it will never read; the connection cannot go on after that.
        "body-over-limit": Request(
            f"POST /v2/models/echo/infer HTTP/1.1\r\nhost: {HOST}\r\ncontent-length: {2**30}\r\n\r\n{{}}".encode(),
            error_check(413, "exceeds the limit"),
            close=True,
        ),
    }


# --- Hostile clients: hang up mid-body or mid-response ----------------------------------------------


def hostile_requests(rng: random.Random) -> dict[str, Request]:
    big = 4 * 2**20 // 4  # FP32 elements: a 4 MiB echo, more than the socket buffers hold
    tensor = {"name": "INPUT0", "shape": [big], "datatype": "FP32", "parameters": {"binary_data_size": big * 4}}
    body, headers = binary_body({"inputs": [tensor], "parameters": {"binary_data_output": True}}, b"\1" * big * 4)
    large = infer("identity_fp32", body, headers)
    small = identity_json(rng, "INT32").data
    head = large.index(b"\r\n\r\n") + 4
    return {
        "hangup-mid-json-body": Request(small, none, "mid-body", cut=len(small) - 10),
        "hangup-mid-binary-body": Request(large, none, "mid-body", cut=head + len(body) // 3),
        "reset-mid-binary-body": Request(large, none, "mid-body-rst", cut=head + 100),
        "hangup-after-headers": Request(large, none, "mid-body", cut=head),
        "hangup-mid-response": Request(large, none, "mid-response"),
        "reset-mid-response": Request(large, none, "mid-response-rst"),
    }


def none(response: Response) -> str | None:
    return None


def build_kinds(seed: int) -> list[Kind]:
    rng = random.Random(seed)
    valid: dict[str, tuple[float, Callable[[random.Random], Request]]] = {
        "simple-json": (10, lambda r: simple(r, binary=False)),
        "simple-binary": (10, lambda r: simple(r, binary=True)),
        "simple-gzip": (3, lambda r: simple(r, binary=r.random() < 0.5, compressed=True)),
        "simple-versioned": (2, lambda r: simple(r, binary=False, versioned=True)),
        "text-binary": (6, text),
        "classification": (6, classification),
        "identity-binary-256k": (4, lambda r: identity_binary(r, 64 * 2**10)),
        "identity-raw-binary": (3, lambda r: identity_binary(r, 4096, raw_request=True)),
        "metadata-health": (4, metadata),
        **{
            f"identity-json-{datatype.lower()}": (3, lambda r, d=datatype: identity_json(r, d))
            for datatype in ("BOOL", "INT8", "UINT16", "INT64", "FP16", "FP32", "FP64", "BYTES")
        },
    }
    kinds = [
        Kind(name, "valid", weight, [make(rng) for _ in range(VARIANTS)]) for name, (weight, make) in valid.items()
    ]
    kinds += [Kind(name, "invalid", 0.8, [request]) for name, request in invalid_requests().items()]
    kinds += [Kind(name, "hostile", 0.4, [request]) for name, request in hostile_requests(rng).items()]
    return kinds


# --- The client side: HTTP/1.1 over asyncio streams -------------------------------------------------


class Closed(Exception):
    """The server closed the connection without an answer."""


async def read_response(reader: asyncio.StreamReader) -> Response:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise Closed(f"connection closed after {len(exc.partial)} bytes of headers") from None
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        chunks = []
        while size := int((await reader.readline()).split(b";")[0], 16):
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readexactly(2)
        body = b"".join(chunks)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    encoding = headers.get("content-encoding")
    if encoding in ("gzip", "deflate"):
        body = zlib.decompress(body, 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
    return Response(status, headers, body)


@dataclass
class Tally:
    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (category, kind, outcome)
    unexplained: Counter[str] = field(default_factory=Counter)
    seconds: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # summed latency, same keys
    examples: list[str] = field(default_factory=list)
    valid_5xx: int = 0

    def add(self, kind: Kind, outcome: str, problem: str | None, seconds: float = 0.0) -> None:
        self.counts[(kind.category, kind.name, outcome)] += 1
        self.seconds[(kind.category, kind.name, outcome)] += seconds
        if kind.category == "valid" and outcome.startswith("5"):
            self.valid_5xx += 1
        if problem is not None:
            self.unexplained[f"{kind.name}: {outcome}"] += 1
            if len(self.examples) < 20:
                self.examples.append(f"{kind.name} -> {outcome}: {problem[:300]}")

    @property
    def requests(self) -> int:
        return sum(self.counts.values())


def judge(kind: Kind, request: Request, response: Response) -> str | None:
    """None when the response is what this request must get, else what is wrong with it."""
    if kind.category == "valid" and response.status != 200:
        return f"status {response.status}: {response.body[:300]!r}"
    try:
        return request.check(response)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        return f"unreadable answer ({type(exc).__name__}: {exc}): {response.body[:200]!r}"


async def hostile(port: int, request: Request) -> str:
    """Misbehave as told; the outcome is what the client saw before it left."""
    sock = socket.socket()
    sock.setblocking(False)
    if request.hostile.startswith("mid-response"):  # before connecting, so the window stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    if request.hostile.endswith("-rst"):  # linger 0: close with RST instead of FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    try:
        await asyncio.get_running_loop().sock_connect(sock, (HOST, port))
    except OSError:
        sock.close()
        raise
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        if request.hostile.startswith("mid-body"):
            writer.write(request.data[: request.cut])
            await writer.drain()
            return "left"
        writer.write(request.data)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(64 * 2**10)
        return "left-" + head.split(b" ", 2)[1].decode()
    finally:
        writer.close()


async def client(port: int, kinds: list[Kind], seed: int, until: float, tally: Tally) -> None:
    rng = random.Random(seed)
    weights = [kind.weight for kind in kinds]
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    while time.monotonic() < until:
        kind = rng.choices(kinds, weights)[0]
        request = rng.choice(kind.variants)
        started = time.monotonic()
        try:
            if kind.category == "hostile":
                outcome = await asyncio.wait_for(hostile(port, request), TIMEOUT)
                problem = None if outcome in ("left", "left-200") else "unexpected"
                tally.add(kind, outcome, problem, time.monotonic() - started)
                continue
            if connection is None:
                connection = await asyncio.open_connection(HOST, port)
            reader, writer = connection
            writer.write(request.data)
            response = await asyncio.wait_for(read_response(reader), TIMEOUT)
            if request.close or response.headers.get("connection") == "close":
                writer.close()
                connection = None
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, Closed, ValueError) as exc:
            tally.add(kind, type(exc).__name__, str(exc) or type(exc).__name__, time.monotonic() - started)
            if connection is not None:
                connection[1].close()
                connection = None
            continue
        tally.add(kind, str(response.status), judge(kind, request, response), time.monotonic() - started)
    if connection is not None:
        connection[1].close()


async def run_clients(port: int, kinds: list[Kind], count: int, seconds: float, seed: int, tally: Tally) -> None:
    until = time.monotonic() + seconds
    await asyncio.gather(*(client(port, kinds, seed * 1000 + index, until, tally) for index in range(count)))


async def sample_rss(
    pid: int, every: float, samples: list[tuple[float, int]], stop: asyncio.Event, tally: Tally, offset: float
) -> None:
    start = last_report = time.monotonic() - offset
    while True:
        # Sample after each interval, not at 0 s: the idle server before the load would skew the trend.
        try:
            await asyncio.wait_for(stop.wait(), every)
            if not samples:  # a run shorter than one interval
                samples.append((time.monotonic() - start, procs.status_kib(pid, "VmRSS")))
            return
        except asyncio.TimeoutError:
            pass
        samples.append((time.monotonic() - start, procs.status_kib(pid, "VmRSS")))
        if time.monotonic() - last_report >= 10:
            last_report = time.monotonic()
            print(f"  {last_report - start:5.0f} s: {tally.requests} requests, RSS {samples[-1][1] / 1024:.1f} MiB")


async def self_check(port: int, kinds: list[Kind]) -> list[str]:
    """Every pre-built request once, one at a time: a wrong expectation shows here, not as noise later."""
    tally = Tally()
    for kind in kinds:
        for request in kind.variants:
            if kind.category == "hostile":
                continue
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(request.data)
            response = await asyncio.wait_for(read_response(reader), TIMEOUT)
            writer.close()
            tally.add(kind, str(response.status), judge(kind, request, response))
    return tally.examples


# --- The run ------------------------------------------------------------------------------------


def server_python(requested: str | None) -> str:
    if requested:
        return requested
    reason = envs.ensure_env("ours", envs.OURS_REQUIREMENTS)
    if reason:
        raise SystemExit(f"cannot set up bench/.peers/ours: {reason}")
    return str(envs.venv_python("ours"))


def rss_trend(samples: list[tuple[float, int]]) -> tuple[float, float, float]:
    """Least-squares slope in MiB per minute, and the mean RSS of each half of the run, in MiB."""
    times, mib = [t for t, _ in samples], [rss / 1024 for _, rss in samples]
    mean_t, mean_m = sum(times) / len(times), sum(mib) / len(mib)
    spread = sum((t - mean_t) ** 2 for t in times) or 1.0
    slope = sum((t - mean_t) * (m - mean_m) for t, m in zip(times, mib, strict=True)) / spread * 60
    half = len(mib) // 2 or 1
    return slope, sum(mib[:half]) / half, sum(mib[half:]) / max(len(mib) - half, 1)


def log_errors(path: Path, offset: int) -> list[str]:
    with path.open("rb") as log:
        log.seek(offset)
        lines = log.read().decode(errors="replace").splitlines()
    return [line for line in lines if "ERROR" in line or "Traceback" in line or "Exception" in line]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=10, help="seconds of load before RSS is first read")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--max-drift-mib", type=float, default=16, help="fail past this RSS growth, start to end")
    parser.add_argument("--checkpoints", type=int, default=4, help="pauses to read idle RSS during the run")
    parser.add_argument("--sample-every", type=float, default=1.0, help="seconds between RSS samples")
    parser.add_argument("--python", help="the server's interpreter (default: bench/.peers/ours, set up on demand)")
    parser.add_argument("--output", type=Path, help="also write the report here (and a .json next to it)")
    args = parser.parse_args()

    python = server_python(args.python)
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {CLIENT_CORE})
    kinds = build_kinds(args.seed)
    port = procs.free_port()
    command = [python, "-m", "uvicorn", "examples.app:app", "--app-dir", str(envs.ROOT), "--host", HOST]
    command += ["--port", str(port), "--loop", "uvloop", "--http", "httptools", "--workers", "1"]
    command += ["--log-level", "warning", "--no-access-log"]
    log_path = envs.BENCH / "results" / "raw" / "logs" / "soak.log"
    server = procs.Server("soak", command, port, log_path)
    lines = [f"$ {' '.join(['python3', 'bench/soak.py', *sys.argv[1:]])}"]

    def say(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    log_offset = log_path.stat().st_size if log_path.exists() else 0
    samples: list[tuple[float, int]] = []
    with servers.running(server, 120):
        problems = asyncio.run(self_check(port, kinds))
        if problems:
            print("self-check failed: the expectations or the server are wrong", *problems, sep="\n  ")
            return 1
        say(f"server: uvicorn examples.app:app (uvloop, httptools, 1 worker) on core {SERVER_CORE}, pid {server.pid}")
        say(f"clients: {args.clients} on core {CLIENT_CORE}, seed {args.seed}, {len(kinds)} request kinds")
        load = f"load average before the run {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        say(f"commit {report.git_commit()}; {load}")
        warmup = Tally()
        asyncio.run(run_clients(port, kinds, args.clients, args.warmup, args.seed + 1000, warmup))
        procs.wait_idle(server.tree())
        rss_start = procs.status_kib(server.pid, "VmRSS")
        say(f"warm-up: {warmup.requests} requests in {args.warmup:g} s; RSS after warm-up {rss_start / 1024:.1f} MiB")

        tally = Tally()
        checkpoints = [(0.0, rss_start)]  # idle RSS after each stretch of load: a leak grows with requests
        wall = server_cpu = client_cpu = 0.0

        async def measured(seconds: float, seed: int, offset: float) -> None:
            stop = asyncio.Event()
            sampler = asyncio.create_task(sample_rss(server.pid, args.sample_every, samples, stop, tally, offset))
            await run_clients(port, kinds, args.clients, seconds, seed, tally)
            stop.set()
            await sampler

        for segment in range(args.checkpoints):
            cpu, own_cpu, started = procs.cpu_seconds(server.tree()), time.process_time(), time.monotonic()
            asyncio.run(measured(args.seconds / args.checkpoints, args.seed + segment, wall))
            wall += time.monotonic() - started
            server_cpu += procs.cpu_seconds(server.tree()) - cpu
            client_cpu += time.process_time() - own_cpu
            procs.wait_idle(server.tree())
            checkpoints.append((wall, procs.status_kib(server.pid, "VmRSS")))
        rss_end = checkpoints[-1][1]
        alive = server.alive()
        final = asyncio.run(self_check(port, kinds[:3])) if alive else ["server died"]
    logged = log_errors(log_path, log_offset)

    drift = (rss_end - rss_start) / 1024
    by_category = Counter()
    for (category, _, _), count in tally.counts.items():
        by_category[category] += count
    say(
        f"measured: {tally.requests} requests in {wall:.1f} s ({tally.requests / wall:.0f}/s): "
        + ", ".join(f"{category} {count}" for category, count in sorted(by_category.items()))
    )
    say(f"server CPU {server_cpu / wall:.2f} cores, client CPU {client_cpu / wall:.2f} cores (each pinned to one)")
    say("results by (category, kind, status or outcome), with the mean latency:")
    for key, count in sorted(tally.counts.items()):
        category, name, outcome = key
        say(f"  {category:8} {name:28} {outcome:>10} {count:8} {tally.seconds[key] * 1000 / count:8.1f} ms")
    say(f"5xx to valid requests: {tally.valid_5xx}")
    say(f"unexplained results: {sum(tally.unexplained.values())}")
    for example in tally.examples:
        say(f"  {example}")
    say(f"server log lines with ERROR/Traceback/Exception: {len(logged)}")
    for line in logged[:10]:
        say(f"  {line}")
    say(f"server alive and answering correctly at the end: {alive and not final}")
    trace = " ".join(f"{rss / 1024:.0f}" for _, rss in samples[:: max(1, len(samples) // 12)])
    say(f"RSS samples under load (MiB, every {len(samples) // 12 or 1} of {len(samples)}): {trace}")
    say(
        "idle RSS after each stretch of load: " + ", ".join(f"{t:.0f} s {rss / 1024:.1f} MiB" for t, rss in checkpoints)
    )
    slope, first, second = rss_trend(samples)
    say(
        f"RSS under load: trend {slope:+.2f} MiB/min (least squares), "
        f"mean {first:.1f} MiB in the first half, {second:.1f} MiB in the second"
    )
    say(
        f"RSS start {rss_start / 1024:.1f} MiB, end {rss_end / 1024:.1f} MiB, drift {drift:+.1f} MiB "
        f"(limit {args.max_drift_mib:g}); max under load {max(rss for _, rss in samples) / 1024:.1f} MiB"
    )
    failures = [
        reason
        for reason, failed in (
            ("5xx to valid requests", tally.valid_5xx > 0),
            ("unexplained results", bool(tally.unexplained)),
            ("errors in the server log", bool(logged)),
            ("server not answering at the end", not alive or bool(final)),
            (f"RSS drift over {args.max_drift_mib:g} MiB", drift > args.max_drift_mib),
        )
        if failed
    ]
    say("FAIL: " + "; ".join(failures) if failures else "PASS")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text("\n".join(lines) + "\n")
        summary = {
            "command": lines[0][2:],
            "clients": args.clients,
            "seconds": args.seconds,
            "wall_seconds": round(wall, 2),
            "requests": tally.requests,
            "by_category": dict(by_category),
            "counts": [[*key, count] for key, count in sorted(tally.counts.items())],
            "valid_5xx": tally.valid_5xx,
            "unexplained": dict(tally.unexplained),
            "server_log_errors": len(logged),
            "server_cpu_cores": round(server_cpu / wall, 3),
            "client_cpu_cores": round(client_cpu / wall, 3),
            "rss_kib": {
                "start": rss_start,
                "end": rss_end,
                "idle_checkpoints": [[round(t, 1), rss] for t, rss in checkpoints],
                "samples": [[round(t, 1), rss] for t, rss in samples],
            },
            "passed": not failures,
        }
        args.output.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
