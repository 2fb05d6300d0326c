"""W11's load generator: OpenAI chat completions and completions, streamed (chunks counted as they come) or
whole (a response counted as its `max_tokens` chunks), over W10's raw HTTP/1.1 client (w10_loadgen.py).

    python w11_loadgen.py check TARGET -n 1000
    python w11_loadgen.py ttft TARGET -n 1000 --repeat 50
    python w11_loadgen.py load TARGET -n 1000 -c 16 -s 3 --warmup 1 --pids 12,13

TARGET is a JSON object: {"address": "127.0.0.1:PORT", "kind": "chat"|"completion", "stream": true|false}.
A streamed answer's chunks are counted by the text each content chunk carries (`"content":"token"`,
`"text":"token"`), without parsing them: the first one is the time to first chunk.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from typing import Any

import procs
import uvloop
from w10_loadgen import Connection, FrameCounter, HTTPError, Tally  # siblings: W10's client, reused as it is

MODEL, TOKEN = "tokens", "token"
PATHS = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}


def body(target: dict[str, Any], count: int) -> bytes:
    request: dict[str, Any] = {"model": MODEL, "max_tokens": count, "stream": bool(target["stream"])}
    if target["kind"] == "chat":
        request["messages"] = [{"role": "user", "content": "hi"}]
    else:
        request["prompt"] = "hi"
    return json.dumps(request).encode()


def needle(target: dict[str, Any]) -> bytes:
    return b'"content":"token"' if target["kind"] == "chat" else b'"text":"token"'


class Whole:
    """A whole answer (Content-Length): its `count` chunks, at once, when it has all arrived."""

    def __init__(self, tally: Tally, count: int, began: float) -> None:
        self.tally, self.count, self.began = tally, count, began

    def __call__(self, piece: bytes) -> None:
        self.tally.first_frame_ms.append((time.perf_counter() - self.began) * 1000)
        self.tally.frames += self.count


def counter(target: dict[str, Any], tally: Tally, count: int) -> Any:
    began = time.perf_counter()
    return FrameCounter(needle(target), tally, began) if target["stream"] else Whole(tally, count, began)


async def worker(target: dict[str, Any], count: int, tally: Tally, stop: asyncio.Event) -> None:
    connection = Connection(target["address"])
    payload, path = body(target, count), PATHS[target["kind"]]
    try:
        while not stop.is_set():
            tally.streams += 1
            try:
                await connection.stream(path, payload, counter(target, tally, count))
            except (OSError, HTTPError, asyncio.IncompleteReadError, ValueError) as error:
                tally.errors.append(f"{type(error).__name__}: {error}")
                await connection.close()
    finally:
        await connection.close()


async def load(target: dict[str, Any], count: int, concurrency: int, seconds: float, warmup: float,
               pids: list[int]) -> dict[str, Any]:  # fmt: skip
    tally, stop = Tally(), asyncio.Event()
    tasks = [asyncio.create_task(worker(target, count, tally, stop)) for _ in range(concurrency)]
    await asyncio.sleep(warmup)
    frames, cpu, began, own = tally.frames, procs.cpu_seconds(pids), time.perf_counter(), time.process_time()
    first = len(tally.first_frame_ms)
    await asyncio.sleep(seconds)
    frames, cpu, elapsed = tally.frames - frames, procs.cpu_seconds(pids) - cpu, time.perf_counter() - began
    own = time.process_time() - own
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "frames": frames,
        "seconds": elapsed,
        "rate": frames / elapsed,
        "cpu_s": cpu,
        "cpu_us_per_frame": cpu * 1e6 / frames if frames else None,
        "client_cpu_s": own,
        "streams": tally.streams,
        "errors": len(tally.errors),
        "first_error": tally.errors[0] if tally.errors else None,
        "first_frame_ms": tally.first_frame_ms[first:],
    }


async def ttft(target: dict[str, Any], count: int, repeat: int) -> dict[str, Any]:
    """`repeat` answers one after another, each read to its end: the time to the first chunk of each."""
    tally = Tally()
    connection = Connection(target["address"])
    try:
        for _ in range(repeat):
            await connection.stream(PATHS[target["kind"]], body(target, count), counter(target, tally, count))
    finally:
        await connection.close()
    ordered = sorted(tally.first_frame_ms)
    return {"p50_ms": statistics.median(ordered), "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]}


async def check(target: dict[str, Any], count: int) -> dict[str, Any]:
    """One answer, parsed whole: `count` pieces of the token, in OpenAI's shapes, the stream ended by [DONE]."""
    pieces = bytearray()
    connection = Connection(target["address"])
    try:
        headers = await asyncio.wait_for(connection.stream(PATHS[target["kind"]], body(target, count),
                                                           pieces.extend), 120)  # fmt: skip
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
    parser = argparse.ArgumentParser(prog="w11_loadgen.py")
    parser.add_argument("command", choices=("check", "ttft", "load"))
    parser.add_argument("target", type=json.loads)
    parser.add_argument("-n", "--tokens", type=int, default=1000)
    parser.add_argument("-c", "--concurrency", type=int, default=1)
    parser.add_argument("-s", "--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--pids", default="")
    args = parser.parse_args(argv)
    if args.command == "check":
        work = check(args.target, args.tokens)
    elif args.command == "ttft":
        work = ttft(args.target, args.tokens, args.repeat)
    else:
        pids = [int(pid) for pid in args.pids.split(",") if pid]
        work = load(args.target, args.tokens, args.concurrency, args.seconds, args.warmup, pids)
    with contextlib.suppress(KeyboardInterrupt):
        print(json.dumps(uvloop.run(work)))


if __name__ == "__main__":
    main(sys.argv[1:])
