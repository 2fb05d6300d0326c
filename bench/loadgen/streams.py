"""The streaming load generator (W10, W11): streams of one-token responses over HTTP (SSE or NDJSON) or gRPC
ModelStreamInfer, and OpenAI's chat completions and completions, streamed or whole.

Runs in an environment with grpcio and oip-asgi's generated messages, on uvloop, pinned to the load core by the
caller. HTTP is a raw asyncio client (HTTP/1.1, keep-alive, chunked decoding, frames counted by their delimiter
without parsing them); gRPC sends one pre-serialized request per call and counts the messages without parsing
them: what the client costs per frame is as little as it can be.

    python streams.py check TARGET -n 10000          # one stream, every frame parsed and checked
    python streams.py ttft TARGET -n 16 --repeat 50  # sequential short streams: time to first frame
    python streams.py load TARGET -c 16 -s 3 --warmup 1 --pids 12,13  # frames/s and server CPU/frame

TARGET is a JSON object with "address": "127.0.0.1:PORT" and:

- W10: "wire": "rest"|"grpc", with, for REST, "path": "/v2/...", "body": "generate"|"v2"|"litserve" and
  "frames": "sse"|"ndjson", and for gRPC "message": "stream"|"infer";
- W11: "kind": "chat"|"completion", "stream": true|false. A streamed answer's chunks are counted by the text
  each content chunk carries (`"content":"token"`, `"text":"token"`), without parsing them; a whole answer
  (Content-Length) counts as its `max_tokens` chunks when it has all arrived.

Every result is one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import uvloop

from oip_asgi.grpc import inference_pb2 as pb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: the harness
from harness import procs

MODEL, TOKEN = "tokens", "token"
STREAM_INFER = "/inference.GRPCInferenceService/ModelStreamInfer"
DELIMITERS = {"sse": b"\n\n", "ndjson": b"\n"}
OPENAI_PATHS = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}


def http_body(kind: str, count: int) -> bytes:
    if kind == "generate":  # Triton's generate extension: keys name the inputs, one element each
        return json.dumps({"text_input": "hi", "max_tokens": count}).encode()
    if kind == "v2":  # an Open Inference Protocol request (MLServer's infer_stream/generate_stream)
        inputs = [
            {"name": "text_input", "datatype": "BYTES", "shape": [1], "data": ["hi"]},
            {"name": "max_tokens", "datatype": "INT32", "shape": [1], "data": [count]},
        ]
        return json.dumps({"inputs": inputs}).encode()
    if kind == "litserve":
        return json.dumps({"text_input": "hi", "max_tokens": count}).encode()
    raise ValueError(f"unknown body {kind!r}")


def grpc_body(count: int) -> bytes:
    request = pb.ModelInferRequest(model_name=MODEL)
    text = request.inputs.add(name="text_input", datatype="BYTES", shape=[1])
    text.contents.bytes_contents.append(b"hi")
    tokens = request.inputs.add(name="max_tokens", datatype="INT32", shape=[1])
    tokens.contents.int_contents.append(count)
    return request.SerializeToString()


def frame_token(kind: str, frame: bytes) -> str:
    """The token one HTTP frame carries; raises ValueError naming what is wrong with it."""
    text = frame.strip()
    if kind != "litserve":
        if not text.startswith(b"data:"):
            raise ValueError(f"an SSE event without `data:`: {frame[:120]!r}")
        text = text[5:]
    document = json.loads(text)
    if kind == "v2":
        outputs = document.get("outputs") or []
        if len(outputs) != 1 or outputs[0].get("name") != "text_output" or outputs[0].get("datatype") != "BYTES":
            raise ValueError(f"expected one BYTES output text_output: {document}")
        data = outputs[0].get("data")
        return str(data[0]) if isinstance(data, list) and len(data) == 1 else f"<data {data!r}>"
    if kind == "generate" and (document.get("model_name") != MODEL or "model_version" not in document):
        raise ValueError(f"expected model_name {MODEL!r} and a model_version: {document}")
    return str(document.get("text_output"))


def message_token(message: bytes, form: str) -> str | None:
    """The token one streamed message carries; None for an empty (final-flag) response.

    `form` "stream": a ModelStreamInferResponse (KServe's and Triton's proto); "infer": a bare ModelInferResponse,
    which is what MLServer 1.7 writes on ModelStreamInfer.
    """
    if form == "infer":
        response = pb.ModelInferResponse.FromString(message)
    else:
        wrapper = pb.ModelStreamInferResponse.FromString(message)
        if wrapper.error_message:
            raise ValueError(f"error_message: {wrapper.error_message}")
        response = wrapper.infer_response
    if not response.outputs:
        return None
    output = response.outputs[0]
    if (output.name, output.datatype, list(output.shape)) != ("text_output", "BYTES", [1]):
        raise ValueError(f"expected text_output BYTES [1], got {output.name} {output.datatype} {list(output.shape)}")
    if response.raw_output_contents:
        raw = response.raw_output_contents[0]
        return raw[4 : 4 + int.from_bytes(raw[:4], "little")].decode()
    return output.contents.bytes_contents[0].decode() if output.contents.bytes_contents else "<no contents>"


class HTTPError(Exception):
    pass


class Connection:
    """One keep-alive HTTP/1.1 connection; `stream` posts a body and hands each piece of the decoded body on."""

    def __init__(self, address: str) -> None:
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None

    async def stream(self, path: str, body: bytes, on_data: Callable[[bytes], None]) -> dict[str, str]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        assert self.reader is not None
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        status_line, *lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines if line)}
        status = int(status_line.split()[1])
        if status != 200:
            data = await self._read_all(headers)
            raise HTTPError(f"HTTP {status}: {data[:300]!r}")
        if headers.get("transfer-encoding", "").lower() == "chunked":
            await self._chunked(on_data)
        else:
            on_data(await self._read_all(headers))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return headers

    async def _read_all(self, headers: dict[str, str]) -> bytes:
        assert self.reader is not None
        if "content-length" in headers:
            return await self.reader.readexactly(int(headers["content-length"]))
        pieces = bytearray()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            await self._chunked(pieces.extend)
        return bytes(pieces)

    async def _chunked(self, on_data: Callable[[bytes], None]) -> None:
        reader = self.reader
        assert reader is not None
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";", 1)[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the blank line
                    pass
                return
            remaining = size
            while remaining:
                piece = await reader.read(remaining)
                if not piece:
                    raise ConnectionError("connection closed inside a chunk")
                remaining -= len(piece)
                on_data(piece)
            await reader.readexactly(2)


@dataclass
class Tally:
    frames: int = 0
    streams: int = 0
    errors: list[str] = field(default_factory=list)
    first_frame_ms: list[float] = field(default_factory=list)


class FrameCounter:
    """Counts delimiters across the pieces of one stream (a delimiter may straddle two pieces)."""

    def __init__(self, delimiter: bytes, tally: Tally, began: float) -> None:
        self.delimiter, self.tally, self.began = delimiter, tally, began
        self.tail = b""
        self.seen = 0

    def __call__(self, piece: bytes) -> None:
        data = self.tail + piece if self.tail else piece
        found = data.count(self.delimiter)
        if found:
            if not self.seen:
                self.tally.first_frame_ms.append((time.perf_counter() - self.began) * 1000)
            self.seen += found
            self.tally.frames += found
        self.tail = data[-(len(self.delimiter) - 1) :] if len(self.delimiter) > 1 else b""


def openai_body(target: dict[str, Any], count: int) -> bytes:
    # "model" and "extra" (fields added to every request: stream_options, logprobs) where the target names them.
    request: dict[str, Any] = {"model": target.get("model", MODEL), "max_tokens": count}
    request["stream"] = bool(target["stream"])
    request.update(target.get("extra", {}))
    if target["kind"] == "chat":
        request["messages"] = [{"role": "user", "content": "hi"}]
    else:
        request["prompt"] = "hi"
    return json.dumps(request).encode()


def rest_request(target: dict[str, Any], count: int) -> tuple[str, bytes]:
    """The path and body of one HTTP request for `count` tokens."""
    if "kind" in target:
        return OPENAI_PATHS[target["kind"]], openai_body(target, count)
    return target["path"], http_body(target["body"], count)


class Whole:
    """A whole answer (Content-Length): its `count` chunks, at once, when it has all arrived."""

    def __init__(self, tally: Tally, count: int, began: float) -> None:
        self.tally, self.count, self.began = tally, count, began

    def __call__(self, piece: bytes) -> None:
        self.tally.first_frame_ms.append((time.perf_counter() - self.began) * 1000)
        self.tally.frames += self.count


def counter(target: dict[str, Any], tally: Tally, count: int) -> Callable[[bytes], None]:
    """What counts the frames of one answer as its pieces arrive."""
    began = time.perf_counter()
    if "kind" not in target:
        return FrameCounter(DELIMITERS[target["frames"]], tally, began)
    if not target["stream"]:
        return Whole(tally, count, began)
    return FrameCounter(b'"content":"token"' if target["kind"] == "chat" else b'"text":"token"', tally, began)


async def rest_worker(target: dict[str, Any], count: int, tally: Tally, stop: asyncio.Event) -> None:
    connection = Connection(target["address"])
    path, body = rest_request(target, count)
    try:
        while not stop.is_set():
            tally.streams += 1
            try:
                await connection.stream(path, body, counter(target, tally, count))
            except (OSError, HTTPError, asyncio.IncompleteReadError, ValueError) as error:
                tally.errors.append(f"{type(error).__name__}: {error}")
                await connection.close()
    finally:
        await connection.close()


async def grpc_worker(call: Any, body: bytes, tally: Tally, stop: asyncio.Event) -> None:
    while not stop.is_set():
        began = time.perf_counter()
        tally.streams += 1
        stream = call(iter((body,)))
        seen = 0
        try:
            async for _message in stream:
                if not seen:
                    tally.first_frame_ms.append((time.perf_counter() - began) * 1000)
                seen += 1
                tally.frames += 1
        except grpc.RpcError as error:
            tally.errors.append(f"{error.code().name}: {error.details()}")
        finally:
            stream.cancel()


@contextlib.asynccontextmanager
async def grpc_call(target: dict[str, Any]) -> Any:
    async with grpc.aio.insecure_channel(target["address"]) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        yield channel.stream_stream(STREAM_INFER)  # bytes in, bytes out: no (de)serializer


async def load(target: dict[str, Any], count: int, concurrency: int, seconds: float, warmup: float,
               pids: list[int]) -> dict[str, Any]:  # fmt: skip
    tally, stop = Tally(), asyncio.Event()
    async with contextlib.AsyncExitStack() as stack:
        if target.get("wire") == "grpc":
            call = await stack.enter_async_context(grpc_call(target))
            workers = [grpc_worker(call, grpc_body(count), tally, stop) for _ in range(concurrency)]
        else:
            workers = [rest_worker(target, count, tally, stop) for _ in range(concurrency)]
        tasks = [asyncio.create_task(worker) for worker in workers]
        await asyncio.sleep(warmup)
        frames, cpu, began, own = tally.frames, procs.cpu_seconds(pids), time.perf_counter(), time.process_time()
        first = len(tally.first_frame_ms)
        await asyncio.sleep(seconds)
        frames, cpu, elapsed = tally.frames - frames, procs.cpu_seconds(pids) - cpu, time.perf_counter() - began
        own = time.process_time() - own
        stop.set()
        for task in tasks:  # streams still open are cut: the window is over
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "frames": frames,
        "seconds": elapsed,
        "rate": frames / elapsed,
        "cpu_s": cpu,
        "cpu_us_per_frame": cpu * 1e6 / frames if frames else None,
        # The client's own CPU over the window: near `seconds`, the client (not the server) set the pace.
        "client_cpu_s": own,
        "streams": tally.streams,
        "errors": len(tally.errors),
        "first_error": tally.errors[0] if tally.errors else None,
        "first_frame_ms": tally.first_frame_ms,  # the warm-up's streams first, then the window's
        "window_first": first,
    }


async def ttft(target: dict[str, Any], count: int, repeat: int) -> dict[str, Any]:
    """`repeat` streams of `count` frames one after another, each read to its end: time to the first frame."""
    tally = Tally()
    async with contextlib.AsyncExitStack() as stack:
        if target.get("wire") == "grpc":
            call = await stack.enter_async_context(grpc_call(target))
            body = grpc_body(count)
            for _ in range(repeat):
                began, seen = time.perf_counter(), 0
                async for _message in call(iter((body,))):
                    if not seen:
                        tally.first_frame_ms.append((time.perf_counter() - began) * 1000)
                    seen += 1
        else:
            connection = Connection(target["address"])
            stack.push_async_callback(connection.close)
            path, body = rest_request(target, count)
            for _ in range(repeat):
                await connection.stream(path, body, counter(target, tally, count))
    ordered = sorted(tally.first_frame_ms)
    return {
        "first_frame_ms": ordered,
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
    }


async def check(target: dict[str, Any], count: int) -> dict[str, Any]:
    """One stream of `count` frames, every frame parsed: the token, the count, the content type."""
    if "kind" in target:
        return await check_openai(target, count)
    tokens: list[str | None] = []
    try:
        if target["wire"] == "grpc":
            async with grpc_call(target) as call:
                async for message in call(iter((grpc_body(count),)), timeout=120):
                    tokens.append(message_token(message, target.get("message", "stream")))
            content_type = "application/grpc"
        else:
            pieces = bytearray()
            connection = Connection(target["address"])
            try:
                headers = await asyncio.wait_for(connection.stream(target["path"], http_body(target["body"], count),
                                                                   pieces.extend), 120)  # fmt: skip
            finally:
                await connection.close()
            content_type = headers.get("content-type", "")
            delimiter = DELIMITERS[target["frames"]]
            frames = [frame for frame in bytes(pieces).split(delimiter) if frame.strip()]
            tokens = [frame_token(target["body"], frame) for frame in frames]
    except (grpc.RpcError, OSError, HTTPError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError) as error:
        details = f"{error.code().name}: {error.details()}" if isinstance(error, grpc.RpcError) else str(error)
        return {"error": f"{type(error).__name__}: {details}"[:500]}
    empty = tokens.count(None)
    carried = [token for token in tokens if token is not None]
    wrong = [token for token in carried if token != TOKEN]
    if len(carried) != count or wrong:
        return {"error": f"expected {count} frames of {TOKEN!r}, got {len(carried)} ({len(wrong)} wrong: {wrong[:3]})"}
    if target.get("frames") == "sse" and not content_type.startswith("text/event-stream"):
        return {"error": f"expected text/event-stream, got {content_type!r}"}
    return {"error": None, "frames": len(carried), "empty_responses": empty, "content_type": content_type}


async def check_openai(target: dict[str, Any], count: int) -> dict[str, Any]:
    """One answer, parsed whole: `count` pieces of the token, in OpenAI's shapes, the stream ended by [DONE]."""
    pieces = bytearray()
    connection = Connection(target["address"])
    try:
        headers = await asyncio.wait_for(connection.stream(*rest_request(target, count), pieces.extend), 120)
    except (OSError, HTTPError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError) as error:
        return {"error": f"{type(error).__name__}: {error}"[:500]}
    finally:
        await connection.close()
    chat = target["kind"] == "chat"
    if not target["stream"]:
        choice = json.loads(pieces)["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
        if text != TOKEN * count:
            return {"error": f"expected {count} tokens joined, got {text[:80]!r}"}
        return {"error": None, "frames": count, "content_type": headers.get("content-type")}
    events = [event for event in bytes(pieces).split(b"\n\n") if event.strip()]
    if events[-1].strip() != b"data: [DONE]":
        return {"error": f"the stream does not end with data: [DONE]: {events[-1][:120]!r}"}
    texts = []
    for event in events[:-1]:
        choices = json.loads(event.removeprefix(b"data: "))["choices"]
        if choices and choices[0]["finish_reason"] is None:
            texts.append(choices[0]["delta"].get("content") if chat else choices[0]["text"])
    carried = [text for text in texts if text]
    if carried != [TOKEN] * count:
        return {"error": f"expected {count} chunks of {TOKEN!r}, got {len(carried)}: {carried[:3]}"}
    if not headers.get("content-type", "").startswith("text/event-stream"):
        return {"error": f"expected text/event-stream, got {headers.get('content-type')!r}"}
    return {"error": None, "frames": count, "events": len(events), "content_type": headers["content-type"]}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="streams.py")
    parser.add_argument("command", choices=("check", "ttft", "load"))
    parser.add_argument("target", type=json.loads)
    parser.add_argument("-n", "--tokens", type=int, default=10_000)
    parser.add_argument("-c", "--concurrency", type=int, default=1)
    parser.add_argument("-s", "--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--pids", default="", help="the server's processes, whose CPU the window measures")
    args = parser.parse_args(argv)
    if args.command == "check":
        work = check(args.target, args.tokens)
    elif args.command == "ttft":
        work = ttft(args.target, args.tokens, args.repeat)
    else:
        pids = [int(pid) for pid in args.pids.split(",") if pid]
        work = load(args.target, args.tokens, args.concurrency, args.seconds, args.warmup, pids)
    result = uvloop.run(work)  # the client's loop as fast as the servers' (uvicorn runs uvloop)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
