"""W10: a decoupled model streaming 10,000 one-token responses, over REST and gRPC, ours against the peers.

    python3 bench/w10.py --servers ours,pytriton,mlserver,litserve --rounds 5 --seconds 3
    python3 bench/w10.py --quick                 # 1 round, 1 s windows, every server

The model, `tokens`, answers one request (`text_input` "hi", `max_tokens` 10000) with 10,000 responses, each
one BYTES [1] output `text_output` holding b"token" (apps/_w10.py). Each server streams it its own way:

| server | REST | gRPC |
|---|---|---|
| floor | bare Starlette `StreamingResponse` of prepared SSE events | bare grpc.aio stream of prepared messages |
| ours | `POST /v2/models/tokens/generate_stream` (SSE), an async generator model | `ModelStreamInfer` |
| PyTriton | Triton's `generate_stream` (SSE), a decoupled generator `infer_func` | Triton's `ModelStreamInfer` |
| MLServer | `generate_stream` (SSE, an Open Inference Protocol request), `predict_stream` | `ModelStreamInfer` |
| LitServe | `POST /predict`, `stream=True`: one JSON line per token, chunked | - |

Measured as the other workloads are (bench/README.md): the server pinned to core 0, the load generator
(w10_loadgen.py, uvloop, raw HTTP/1.1 or grpcio) pinned to core 1; every answer is checked first (a whole
10,000-frame stream, every frame parsed); rounds are interleaved, ratios paired by round. Per server and
wire: frames/s and server CPU per frame (utime + stime of the server's process tree, read by the load
generator at the edges of the timed window, after `--warmup` s of streaming) at c=1 and c=16, and the time
to first response: `--ttft-repeat` streams of `--ttft-tokens` frames one after another, each read to its
end (p50 and p99), and the first frame of each stream started during the c=16 run (median). A server that
cannot be installed, started or checked is reported with the reason; the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import envs
import procs

SERVER_CORE, LOAD_CORE = 0, 1
TOKENS = 10_000
SETTLE_SECONDS = 120.0
LOADGEN_ENV = "ours-grpc"
LOADGEN_REQUIREMENTS = (f"-e {envs.ROOT}[examples,grpc]", "uvloop", "httptools")
GENERATE = {"path": "/v2/models/tokens/generate_stream", "body": "generate", "frames": "sse"}
GRPC = {"message": "stream"}
V2_READY = ("/v2/health/ready", "/v2/models/tokens/ready")


@dataclass(frozen=True)
class Peer:
    env: str
    requirements: tuple[str, ...]
    app: str
    ports: tuple[str, ...]  # flags beside --port, each given a free port; --grpc-port is gRPC's
    wires: dict[str, dict[str, str]]  # wire -> what the load generator posts and how it cuts frames
    ready: tuple[str, ...] = V2_READY
    libpython: bool = False


PEERS = {
    "floor": Peer(LOADGEN_ENV, LOADGEN_REQUIREMENTS, "floor_w10_app.py", ("--grpc-port",),
                  {"rest": GENERATE, "grpc": GRPC}),
    "ours": Peer(LOADGEN_ENV, LOADGEN_REQUIREMENTS, "ours_w10_app.py", ("--grpc-port",),
                 {"rest": GENERATE, "grpc": GRPC}),
    "pytriton": Peer("pytriton", envs.SPECS["pytriton"].requirements, "pytriton_w10_app.py",
                     ("--grpc-port", "--metrics-port"), {"rest": GENERATE, "grpc": GRPC}, libpython=True),
    # MLServer 1.7 writes bare ModelInferResponse messages on ModelStreamInfer, not ModelStreamInferResponse.
    "mlserver": Peer("mlserver", envs.SPECS["mlserver"].requirements, "mlserver_w10_app.py",
                     ("--grpc-port", "--metrics-port"),
                     {"rest": {**GENERATE, "body": "v2"}, "grpc": {"message": "infer"}}),
    "litserve": Peer("litserve", ("litserve==0.2.19", "uvloop", "httptools"), "litserve_w10_app.py", (),
                     {"rest": {"path": "/predict", "body": "litserve", "frames": "ndjson"}}, ready=("/health",)),
}  # fmt: skip
METRICS = {
    "fps_c1": ("frames/s (c=1)", "higher"),
    "fps_c16": ("frames/s (c=16)", "higher"),
    "cpu_us_c1": ("server CPU µs/frame (c=1)", "lower"),
    "cpu_us_c16": ("server CPU µs/frame (c=16)", "lower"),
    "ttft_p50_ms": ("time to first response, p50 ms (one stream at a time)", "lower"),
    "ttft_p99_ms": ("time to first response, p99 ms (one stream at a time)", "lower"),
    "ttft_c16_ms": ("time to first response, median ms (c=16)", "lower"),
}


@dataclass
class Run:
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    errors: dict[str, dict[str, str]] = field(default_factory=dict)
    details: list[dict[str, Any]] = field(default_factory=list)

    def add(self, series: str, metric: str, value: float, round_index: int) -> None:
        values = self.samples.setdefault(series, {}).setdefault(metric, [])
        values.extend([float("nan")] * (round_index - len(values)))  # a round it missed stays a gap
        values.append(value)

    def fail(self, series: str, what: str, reason: str) -> None:
        self.errors.setdefault(series, {}).setdefault(what, reason)
        print(f"  {series} {what}: NOT MEASURED: {reason[:300]}", flush=True)


def loadgen(python: Path, *args: str, timeout: float = 300) -> dict[str, Any]:
    command = ["taskset", "-c", str(LOAD_CORE), str(python), str(envs.BENCH / "w10_loadgen.py"), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"w10_loadgen {args[0]} failed: {done.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def idle_rate(pids: list[int], seconds: float = 1.0) -> float:
    """The server's CPU use (cores) before any request: PyTriton's processes poll, using CPU with nothing to do."""
    before = procs.cpu_seconds(pids)
    time.sleep(seconds)
    return (procs.cpu_seconds(pids) - before) / seconds


def settle(pids: list[int], idle: float, window: float = 0.5) -> bool:
    """Wait until the server is back to its idle use (a stream cut by the last window may still be generating);
    False if it is not within SETTLE_SECONDS."""
    deadline = time.perf_counter() + SETTLE_SECONDS
    before = procs.cpu_seconds(pids)
    while time.perf_counter() < deadline:
        time.sleep(window)
        after = procs.cpu_seconds(pids)
        if after - before <= (idle + 0.05) * window + 2 / procs.CLOCK_TICKS:
            return True
        before = after
    return False


def log_tail(path: Path, lines: int = 4) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def measure_wire(
    name: str, wire: str, target: dict[str, str], server: procs.Server, args: Any, python: Path, run: Run,
    round_index: int,
) -> None:  # fmt: skip
    series = f"{name}.{wire}"
    idle = idle_rate(server.tree())
    encoded = json.dumps(target)
    print(f"  {series:14} checking one {TOKENS}-frame stream (server idle: {idle:.0%} of a core)", flush=True)
    answer = loadgen(python, "check", encoded, "-n", str(TOKENS))
    if answer["error"]:
        run.fail(series, "check", f"{answer['error']} (log: {server.log_path}: {log_tail(server.log_path)})")
        return
    run.details.append({"round": round_index, "series": series, "check": answer, "idle_cores": idle})
    if not settle(server.tree(), idle):
        run.fail(series, "ttft", f"the server was still busy {SETTLE_SECONDS:g} s after the check")
        return
    probe = loadgen(python, "ttft", encoded, "-n", str(args.ttft_tokens), "--repeat", str(args.ttft_repeat))
    run.add(series, "ttft_p50_ms", probe["p50_ms"], round_index)
    run.add(series, "ttft_p99_ms", probe["p99_ms"], round_index)
    line = [f"  {series:14} ttft p50 {probe['p50_ms']:6.2f} ms p99 {probe['p99_ms']:6.2f} ms"]
    for concurrency in (1, 16):
        pids = server.tree()
        if not settle(pids, idle):
            run.fail(series, f"c={concurrency}", f"the server was still busy {SETTLE_SECONDS:g} s after the last run")
            continue
        result = loadgen(
            python, "load", encoded, "-n", str(TOKENS), "-c", str(concurrency), "-s", str(args.seconds),
            "--warmup", str(args.warmup), "--pids", ",".join(map(str, pids)),
        )  # fmt: skip
        if result["frames"] == 0 or result["errors"]:
            run.fail(series, f"c={concurrency}", f"{result['frames']} frames, {result['errors']} errors: "
                                                 f"{result['first_error']}")  # fmt: skip
            continue
        run.add(series, f"fps_c{concurrency}", result["rate"], round_index)
        run.add(series, f"cpu_us_c{concurrency}", result["cpu_us_per_frame"], round_index)
        if concurrency == 16 and result["first_frame_ms"]:
            run.add(series, "ttft_c16_ms", statistics.median(result["first_frame_ms"]), round_index)
        run.details.append({"round": round_index, "series": series, "concurrency": concurrency,
                            **{key: value for key, value in result.items() if key != "first_frame_ms"},
                            "first_frame_ms": result["first_frame_ms"][:64]})  # fmt: skip
        line.append(
            f"c={concurrency}: {result['rate']:8.0f} frames/s {result['cpu_us_per_frame']:6.1f} µs CPU/frame "
            f"(client {result['client_cpu_s'] / result['seconds']:.0%} busy)"
        )
    print("  ".join(line), flush=True)


def measure_server(name: str, wire: str, peer: Peer, python: Path, args: Any, loadgen_python: Path, run: Run,
                   round_index: int) -> None:  # fmt: skip
    """A fresh server per wire: streams cut at the end of a window may keep a server busy long after (PyTriton
    finishes every token of a stream whose client has gone), which must not fall into the other wire's runs."""
    port = procs.free_port()
    ports = {flag: procs.free_port() for flag in peer.ports}
    command = [str(python), str(envs.APPS / peer.app), "--port", str(port)]
    for flag, value in ports.items():
        command += [flag, str(value)]
    env: dict[str, str] = {}
    if peer.libpython:
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [envs.libpython_dir(python), os.environ.get("LD_LIBRARY_PATH")]))
    if name == "ours" and args.ours_source is not None:
        env["PYTHONPATH"] = str(args.ours_source.resolve())  # ahead of the environment's editable install
    server = procs.Server(name, command, port, args.results / "raw" / "logs" / f"{name}.log", env)
    server.start(SERVER_CORE)
    series = f"{name}.{wire}"
    try:
        deadline = time.perf_counter() + 180
        try:
            for path in peer.ready:
                server.wait_until(path, deadline)
        except (RuntimeError, TimeoutError) as exc:
            run.fail(series, "server", f"did not become ready: {exc} ({log_tail(server.log_path)})")
            return
        address = f"127.0.0.1:{ports['--grpc-port'] if wire == 'grpc' else port}"
        try:
            measure_wire(name, wire, {"wire": wire, "address": address, **peer.wires[wire]}, server, args,
                         loadgen_python, run, round_index)  # fmt: skip
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            run.fail(series, "load", str(exc))
    finally:
        server.stop()


def paired_ratio(ours: list[float], theirs: list[float]) -> float | None:
    ratios = [a / b for a, b in zip(ours, theirs, strict=False) if a == a and b == b and b > 0]
    return statistics.median(ratios) if ratios else None


def series_names(names: list[str], wires: list[str]) -> list[str]:
    return [f"{name}.{wire}" for wire in wires for name in names if wire in PEERS[name].wires]


def summarize(run: Run, series: list[str], wires: list[str]) -> dict[str, Any]:
    medians = {
        name: {metric: statistics.median([v for v in values if v == v]) for metric, values in metrics.items()
               if any(v == v for v in values)}
        for name, metrics in run.samples.items()
    }  # fmt: skip
    ratios: dict[str, dict[str, float | None]] = {}
    for name in series:
        server, wire = name.split(".")
        ours = f"ours.{wire}"
        if server != "ours" and name in run.samples and ours in run.samples:
            ratios[name] = {metric: paired_ratio(run.samples[ours].get(metric, []), run.samples[name].get(metric, []))
                            for metric in METRICS}  # fmt: skip
    return {"medians": medians, "ratios": ratios, "targets": targets(medians, ratios, wires)}


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
    for row in rows:
        value, bar = row["value"], row["bar"]
        row["met"] = None if value is None else (value >= bar if row["better"] == "higher" else value < bar)
    return rows


def table(summary: dict[str, Any], series: list[str]) -> str:
    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.3g}"

    compared = [name for name in series if name in summary["ratios"]]
    head = ["metric", "better", *series, *(f"ours/{name.split('.')[0]} ({name.split('.')[1]})" for name in compared)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric, (title, better) in METRICS.items():
        cells = [title, better]
        cells += [number(summary["medians"].get(name, {}).get(metric)) for name in series]
        for name in compared:
            ratio = summary["ratios"][name].get(metric)
            cells.append(number(ratio) + ("x" if ratio else ""))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| target | ours | met |", "|---|---|---|"]
    for row in summary["targets"]:
        met = {None: "not measured", True: "yes", False: "no"}[row["met"]]
        lines.append(f"| {row['target']} | {number(row['value'])} | {met} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench/w10.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="1 round, 1 s windows, 0.5 s warm-up")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seconds", type=float, help="the timed window of each load run (default 3)")
    parser.add_argument("--warmup", type=float, help="streaming before the window opens (default 1)")
    parser.add_argument("--servers", default=",".join(PEERS), help="comma-separated subset of " + ",".join(PEERS))
    parser.add_argument("--wires", default="rest,grpc")
    parser.add_argument("--ttft-tokens", type=int, default=16, help="frames per stream of the TTFT probe")
    parser.add_argument("--ttft-repeat", type=int, help="streams in the TTFT probe (default 50, quick 10)")
    parser.add_argument("--ours-source", type=Path, help="serve ours from this checkout (e.g. another branch's)")
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results" / "w10")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 5)
    args.seconds = args.seconds or (1.0 if args.quick else 3.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 1.0)
    args.ttft_repeat = args.ttft_repeat or (10 if args.quick else 50)
    args.wires = args.wires.split(",")
    names = [name for name in PEERS if name in args.servers.split(",")]
    series = series_names(names, args.wires)
    run = Run()

    reason = envs.ensure_env(LOADGEN_ENV, LOADGEN_REQUIREMENTS)
    if reason:
        raise SystemExit(f"cannot install the load generator's environment: {reason}")
    loadgen_python = envs.venv_python(LOADGEN_ENV)
    pythons: dict[str, Path] = {}
    for name in names:
        peer = PEERS[name]
        reason = envs.ensure_env(peer.env, peer.requirements)
        if reason:
            for wire in peer.wires:
                run.fail(f"{name}.{wire}", "server", f"cannot install: {reason}")
            continue
        pythons[name] = envs.venv_python(peer.env)
    distributions = ("oip-asgi", "grpcio", "uvicorn", "uvloop", "mlserver", "nvidia-pytriton", "litserve")
    versions = {name: envs.versions(python, distributions) for name, python in pythons.items()}
    started = time.time()
    for round_index in range(args.rounds):
        order = list(pythons)
        order = order[round_index % len(order) :] + order[: round_index % len(order)]
        print(f"round {round_index + 1}/{args.rounds}: {', '.join(order)}", flush=True)
        for name in order:
            for wire in (wire for wire in args.wires if wire in PEERS[name].wires):
                measure_server(name, wire, PEERS[name], pythons[name], args, loadgen_python, run, round_index)
    summary = summarize(run, series, args.wires)
    label = "quick" if args.quick else "full"
    document = {
        "command": "python3 bench/w10.py" + ("" if not argv else " " + " ".join(argv)),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "elapsed_s": round(time.time() - started, 1),
        "settings": {"rounds": args.rounds, "seconds": args.seconds, "warmup": args.warmup, "tokens": TOKENS,
                     "ttft_tokens": args.ttft_tokens, "ttft_repeat": args.ttft_repeat, "wires": args.wires},
        "versions": versions,
        "ours_source": str(args.ours_source) if args.ours_source else None,
        "samples": run.samples,
        "errors": run.errors,
        "details": run.details,
        **summary,
    }  # fmt: skip
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{label}.json").write_text(json.dumps(document, indent=1, default=str))
    markdown = table(summary, series)
    notes = [f"- {name} {what}: {why}" for name, failures in run.errors.items() for what, why in failures.items()]
    missing = "\nNot measured:\n\n" + "\n".join(notes) + "\n" if notes else ""
    (args.results / f"{label}.md").write_text(
        f"# W10: 10,000 one-token responses per stream ({document['date']}, {args.rounds} rounds, "
        f"{args.seconds:g} s windows)\n\n{markdown}\n{missing}"
    )
    print(markdown)
    if notes:
        print("\nNot measured:\n" + "\n".join(notes))


if __name__ == "__main__":
    main(sys.argv[1:])
