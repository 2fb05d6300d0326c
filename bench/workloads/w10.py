"""W10: a decoupled model streaming 10,000 one-token responses, over REST and gRPC, ours against the peers.

    python3 bench/run.py --workloads W10 --servers ours,pytriton,mlserver,litserve --rounds 5 --seconds 3
    python3 bench/run.py --workloads W10 --quick     # 1 round, 1 s windows, every server (or bench/w10.py)

The model, `tokens`, answers one request (`text_input` "hi", `max_tokens` 10000) with 10,000 responses, each
one BYTES [1] output `text_output` holding b"token" (apps/_w10.py). Each server streams it its own way:

| server | REST | gRPC |
|---|---|---|
| floor | bare Starlette `StreamingResponse` of prepared SSE events | bare grpc.aio stream of prepared messages |
| ours | `POST /v2/models/tokens/generate_stream` (SSE), an async generator model | `ModelStreamInfer` |
| base | ours, served from `--base DIR` (a checkout of another commit), in the same rounds | the same |
| PyTriton | Triton's `generate_stream` (SSE), a decoupled generator `infer_func` | Triton's `ModelStreamInfer` |
| MLServer | `generate_stream` (SSE, an Open Inference Protocol request), `predict_stream` | `ModelStreamInfer` |
| LitServe | `POST /predict`, `stream=True`: one JSON line per token, chunked | - |

Measured as the other workloads are (bench/README.md): the server pinned to core 0, the load generator
(loadgen/streams.py, uvloop, raw HTTP/1.1 or grpcio) pinned to core 1; every answer is checked first (a whole
10,000-frame stream, every frame parsed); rounds are interleaved, ratios paired by round. Per server and
wire: frames/s and server CPU per frame (utime + stime of the server's process tree, read by the load
generator at the edges of the timed window, after `--warmup` s of streaming) at c=1 and c=16, and the time
to first response: `--ttft-repeat` streams of `--ttft-tokens` frames one after another, each read to its
end (p50 and p99), and the first frame of each stream started during the c=16 run (median). A server that
cannot be installed, started or checked is reported with the reason; the others still run.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from pathlib import Path
from typing import Any

from harness import envs, report, rounds, servers, streaming
from harness.rounds import Run

TOKENS = 10_000
GENERATE = {"path": "/v2/models/tokens/generate_stream", "body": "generate", "frames": "sse"}
GRPC = {"message": "stream"}
READY = (*servers.V2_READY, "/v2/models/tokens/ready")
OURS = servers.Peer(envs.OURS_GRPC_ENV, envs.OURS_GRPC_REQUIREMENTS, "ours_w10_app.py", ("--grpc-port",), READY)
PEERS = {
    "floor": dataclasses.replace(OURS, app="floor_w10_app.py"),
    "ours": OURS,
    "base": OURS,  # ours at another commit (--base DIR, a checkout of it), in the same rounds
    "pytriton": dataclasses.replace(servers.PEERS["pytriton"], app="pytriton_w10_app.py", ready=READY),
    "mlserver": dataclasses.replace(servers.PEERS["mlserver"], app="mlserver_w10_app.py", ready=READY),
    "litserve": servers.Peer("litserve", envs.LITSERVE_REQUIREMENTS, "litserve_w10_app.py", ready=("/health",)),
}
WIRES = {  # server -> wire -> what the load generator posts and how it cuts frames
    "floor": {"rest": GENERATE, "grpc": GRPC},
    "ours": {"rest": GENERATE, "grpc": GRPC},
    "base": {"rest": GENERATE, "grpc": GRPC},
    "pytriton": {"rest": GENERATE, "grpc": GRPC},
    # MLServer 1.7 writes bare ModelInferResponse messages on ModelStreamInfer, not ModelStreamInferResponse.
    "mlserver": {"rest": {**GENERATE, "body": "v2"}, "grpc": {"message": "infer"}},
    "litserve": {"rest": {"path": "/predict", "body": "litserve", "frames": "ndjson"}},
}
METRICS = streaming.metrics("fps", "frame", "response", "one stream at a time")


def measure_server(name: str, wire: str, python: Path, args: Any, run: Run, round_index: int) -> None:
    """A fresh server per wire: streams cut at the end of a window may keep a server busy long after (PyTriton
    finishes every token of a stream whose client has gone), which must not fall into the other wire's runs."""
    source = {"ours": args.ours_source, "base": args.base}.get(name)
    env = servers.environment(PEERS[name], python, source)
    log = args.results / "raw" / "logs" / f"{name}.log"
    series = f"{name}.{wire}"
    try:
        with servers.running(servers.app_server(name, PEERS[name], python, log, env=env)) as server:
            port = server.ports["--grpc-port" if wire == "grpc" else "--port"]
            target = {"wire": wire, "address": f"127.0.0.1:{port}", **WIRES[name][wire]}
            stream = streaming.Stream(target, TOKENS, args.ttft_tokens, args.ttft_repeat, "fps", "frame", False)
            streaming.measure(series, stream, server, args.loadgen_python, args.seconds, args.warmup, run, round_index)
    except servers.NotReady as exc:
        run.fail(series, "server", str(exc))
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        run.fail(series, "load", str(exc))


def targets(
    medians: dict[str, dict[str, float]], ratios: dict[str, dict[str, float | None]], wires: list[str]
) -> list[dict[str, Any]]:
    """Issue 26's bars, each with the figure it is judged on (None: not measured)."""
    rows = []
    for wire in wires:
        ours = medians.get(f"ours.{wire}", {})
        mlserver = ratios.get(f"mlserver.{wire}", {})
        pytriton = ratios.get(f"pytriton.{wire}", {})
        rows += [
            {"target": f"{wire}: >= 3,500 frames/s at c=1", "value": ours.get("fps_c1"), "bar": 3500,
             "better": "higher"},
            {"target": f"{wire}: time to first response < 5 ms (p50)", "value": ours.get("ttft_p50_ms"), "bar": 5,
             "better": "lower"},
            *({"target": f"{wire}: >= 2x MLServer's frames/s (c={c})", "value": mlserver.get(f"fps_c{c}"), "bar": 2,
               "better": "higher"} for c in (1, 16)),
            *({"target": f"{wire}: >= PyTriton's frames/s (c={c})", "value": pytriton.get(f"fps_c{c}"), "bar": 1,
               "better": "higher"} for c in (1, 16)),
            *({"target": f"{wire}: < PyTriton's CPU/frame (c={c})", "value": pytriton.get(f"cpu_us_c{c}"), "bar": 1,
               "better": "lower"} for c in (1, 16)),
        ]  # fmt: skip
    return report.judged(rows)


def main(argv: list[str]) -> None:
    parser = rounds.parser("W10", __doc__, list(PEERS))
    parser.add_argument("--wires", default="rest,grpc")
    parser.add_argument("--ttft-tokens", type=int, default=16, help="frames per stream of the TTFT probe")
    parser.add_argument("--ttft-repeat", type=int, help="streams in the TTFT probe (default 50, quick 10)")
    parser.add_argument("--ours-source", type=Path, help="serve ours from this checkout (e.g. another branch's)")
    parser.add_argument("--base", type=Path, help="serve 'base' from this checkout (another commit), beside ours")
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results" / "w10")
    args = parser.parse_args(argv)
    rounds.defaults(args, 5, 3.0, 1.0, 0.5)
    args.ttft_repeat = args.ttft_repeat or (10 if args.quick else 50)
    args.wires = args.wires.split(",")
    if args.ours_source is not None:
        args.ours_source = args.ours_source.resolve()  # ahead of the environment's editable install
    if args.base is not None:
        args.base = args.base.resolve()
    names = [name for name in PEERS if name in args.servers.split(",") and (name != "base" or args.base is not None)]
    series = [f"{name}.{wire}" for wire in args.wires for name in names if wire in WIRES[name]]
    run = Run()

    reason = envs.ensure_env(envs.OURS_GRPC_ENV, envs.OURS_GRPC_REQUIREMENTS)
    if reason:
        raise SystemExit(f"cannot install the load generator's environment: {reason}")
    args.loadgen_python = envs.venv_python(envs.OURS_GRPC_ENV)
    pythons, failures = servers.install({name: PEERS[name] for name in names})
    for name, reason in failures.items():
        for wire in WIRES[name]:
            run.fail(f"{name}.{wire}", "server", reason)
    distributions = ("oip-asgi", "grpcio", "uvicorn", "uvloop", "mlserver", "nvidia-pytriton", "litserve")
    versions = {name: envs.versions(python, distributions) for name, python in pythons.items()}
    started = time.time()
    for round_index, order in rounds.each_round(args.rounds, list(pythons)):
        for name in order:
            for wire in (wire for wire in args.wires if wire in WIRES[name]):
                measure_server(name, wire, pythons[name], args, run, round_index)
    medians = rounds.medians(run.samples)
    pairs = {name: (f"ours.{name.split('.')[1]}", name) for name in series if not name.startswith("ours.")}
    ratios = rounds.ratios(run.samples, pairs, list(METRICS))
    rows = targets(medians, ratios, args.wires)
    settings = {"rounds": args.rounds, "seconds": args.seconds, "warmup": args.warmup, "tokens": TOKENS,
                "ttft_tokens": args.ttft_tokens, "ttft_repeat": args.ttft_repeat, "wires": args.wires}  # fmt: skip
    document = report.document(report.command("bench/run.py", argv), started, settings, run, versions=versions,
                               ours_source=args.ours_source, medians=medians, ratios=ratios, targets=rows)  # fmt: skip
    columns = {f"ours/{key.split('.')[0]} ({key.split('.')[1]})": values for key, values in ratios.items()}
    markdown = report.table(METRICS, medians, series, columns) + "\n\n" + report.targets_table(rows)
    title = (f"W10: 10,000 one-token responses per stream ({document['date']}, {args.rounds} rounds, "
             f"{args.seconds:g} s windows)")  # fmt: skip
    report.write(args.results, "quick" if args.quick else "full", title, document, markdown)
