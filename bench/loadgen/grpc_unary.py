"""The gRPC load generator: ModelInfer with one pre-serialized request, C calls in flight, for S seconds.

Runs in the `ours-grpc` environment (grpcio, and oip-asgi's generated messages to build and check
requests), pinned to the load core by the caller. The call sends and receives bytes: no protobuf work
on the client's side while timing, so the client costs as little CPU per request as grpcio allows.

    python grpc_unary.py bodies DIR                          # write the request bodies
    python grpc_unary.py check ADDRESS BODY                  # one call, its answer checked (JSON out)
    python grpc_unary.py load ADDRESS BODY -c 16 -s 5        # timed load (JSON out)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import grpc
import numpy as np

from oip_asgi.grpc import inference_pb2 as pb

SEED = 20240404
INFER = "/inference.GRPCInferenceService/ModelInfer"
UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
# Each workload: (file, elements); every one is FP32 [1, elements] to model "identity", input and output "x".
BODIES = {"g1.bin": 16, "g2.bin": 1024 * 1024, "g4.bin": 16 * 1024 * 1024}


def make_request(elements: int, seed: int) -> pb.ModelInferRequest:
    array = np.random.default_rng(seed).standard_normal((1, elements), dtype=np.float32)
    request = pb.ModelInferRequest(model_name="identity", id="bench")
    request.inputs.add(name="x", datatype="FP32", shape=[1, elements])
    request.outputs.add(name="x")
    request.raw_input_contents.append(array.tobytes())
    return request


def write_bodies(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for index, (name, elements) in enumerate(BODIES.items()):
        (directory / name).write_bytes(make_request(elements, SEED + index).SerializeToString())


def check_answer(request: pb.ModelInferRequest, answer: bytes) -> dict[str, object]:
    response = pb.ModelInferResponse.FromString(answer)
    sent = np.frombuffer(request.raw_input_contents[0], dtype="<f4")
    if len(response.outputs) != 1:
        return {"error": f"expected one output, got {len(response.outputs)}"}
    output = response.outputs[0]
    shape = list(request.inputs[0].shape)
    if (output.name, output.datatype, list(output.shape)) != ("x", "FP32", shape):
        return {"error": f"expected x FP32 {shape}, got {output.name} {output.datatype} {list(output.shape)}"}
    if response.raw_output_contents:
        got, form = np.frombuffer(response.raw_output_contents[0], dtype="<f4"), "raw"
    else:
        got, form = np.array(output.contents.fp32_contents, dtype=np.float32), "typed"
    if not np.array_equal(got, sent):
        return {"error": f"{form} output differs from the input"}
    return {"error": None, "form": form, "response_bytes": len(answer)}


async def check(address: str, body: bytes, echo: bool) -> dict[str, object]:
    async with grpc.aio.insecure_channel(address, options=UNLIMITED) as channel:
        try:
            answer = await channel.unary_unary(INFER)(body, timeout=120)
        except grpc.RpcError as error:
            return {"error": f"{error.code().name}: {error.details()}"}
    if echo:  # the floor answers with the request's own bytes
        return {"error": None if answer == body else "echo differs", "form": "echo", "response_bytes": len(answer)}
    return check_answer(pb.ModelInferRequest.FromString(body), answer)


async def load(address: str, body: bytes, concurrency: int, seconds: float) -> dict[str, object]:
    async with grpc.aio.insecure_channel(address, options=UNLIMITED) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        call = channel.unary_unary(INFER)
        loop = asyncio.get_running_loop()
        latencies: list[float] = []
        errors: list[str] = []
        start = loop.time()
        deadline = start + seconds
        last = start

        async def worker() -> None:
            nonlocal last
            while loop.time() < deadline:
                began = time.perf_counter()
                try:
                    await call(body, timeout=60)
                except grpc.RpcError as error:
                    errors.append(f"{error.code().name}: {error.details()}")
                    continue
                latencies.append(time.perf_counter() - began)
                last = loop.time()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = max(last - start, 1e-9)
    ordered = sorted(latencies)
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "seconds": elapsed,
        "rate": len(latencies) / elapsed,
        "p50_ms": statistics.median(ordered) * 1000 if ordered else 0.0,
        "p99_ms": ordered[int(len(ordered) * 0.99) - 1] * 1000 if ordered else 0.0,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("bodies").add_argument("directory", type=Path)
    checking = commands.add_parser("check")
    checking.add_argument("address")
    checking.add_argument("body", type=Path)
    checking.add_argument("--echo", action="store_true", help="the answer is the request's bytes (the floor)")
    loading = commands.add_parser("load")
    loading.add_argument("address")
    loading.add_argument("body", type=Path)
    loading.add_argument("-c", "--concurrency", type=int, default=1)
    loading.add_argument("-s", "--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.command == "bodies":
        write_bodies(args.directory)
        return
    body = args.body.read_bytes()
    if args.command == "check":
        result = asyncio.run(check(args.address, body, args.echo))
    else:
        result = asyncio.run(load(args.address, body, args.concurrency, args.seconds))
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
