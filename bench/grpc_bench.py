"""gRPC workloads: oip-asgi's gRPC half against MLServer's, KServe's and Triton's (through PyTriton).

    python3 bench/grpc_bench.py                 # 5 interleaved rounds, 5 s per timed run (about 12 minutes)
    python3 bench/grpc_bench.py --quick         # 1 round, 1 s per timed run

Measured as the REST workloads are (bench/README.md): each server pinned to core 0 with every request
from a load generator pinned to core 1 (bench/grpc_loadgen.py, grpcio's asyncio client sending one
pre-serialized request); server CPU is utime + stime of its whole process tree over the timed run;
rounds are interleaved and ratios paired by round. The servers are the REST harness's own apps, whose
gRPC ports were already open (MLServer, PyTriton), KServe's with `enable_grpc=True`, and ours with
`oip_asgi.grpc.serving` in uvicorn's loop. Every server answers each workload once, checked, first.

| key | request | measured |
|---|---|---|
| G1 | FP32 [1,16], raw_input_contents | server CPU ms/request and req/s, at c=1 and c=16 |
| G2 | FP32 [1,1048576] (4 MiB), raw in and out | MB/s (tensor bytes x req/s) and server CPU ms/request at c=1 |
| G4 | one FP32 [1,16777216] (64 MiB) raw request | (peak RSS - idle RSS) / payload, every server process |
"""

from __future__ import annotations

import argparse
import dataclasses
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
G2_BYTES = 4 * 1024 * 1024
G4_BYTES = 64 * 1024 * 1024
LOADGEN_ENV = "ours-grpc"
LOADGEN_REQUIREMENTS = (f"-e {envs.ROOT}[examples,grpc]", "uvloop", "httptools")
# --keep-memory: glibc keeps freed memory instead of returning it to the kernel and faulting it back in
# (grpcio allocates and frees each large message several times); given to every server alike.
KEEP_MEMORY = {
    "MALLOC_TRIM_THRESHOLD_": str(512 * 2**20),
    "MALLOC_MMAP_THRESHOLD_": str(512 * 2**20),
    "MALLOC_TOP_PAD_": str(64 * 2**20),
}


@dataclass(frozen=True)
class Peer:
    env: str
    requirements: tuple[str, ...]
    app: str
    ports: tuple[str, ...]  # flags beside --port, each given a free port; --grpc-port is the one measured
    libpython: bool = False
    environment: tuple[tuple[str, str], ...] = ()  # variables the server starts with


PEERS = {
    "floor": Peer(LOADGEN_ENV, LOADGEN_REQUIREMENTS, "grpc_floor_app.py", ("--grpc-port",)),
    "ours": Peer(LOADGEN_ENV, LOADGEN_REQUIREMENTS, "ours_grpc_app.py", ("--grpc-port",)),
    # ours at another commit (--base DIR, a checkout of it), in the same rounds; its PYTHONPATH is set in main.
    "base": Peer(LOADGEN_ENV, LOADGEN_REQUIREMENTS, "ours_grpc_app.py", ("--grpc-port",)),
    "mlserver": Peer(
        "mlserver",
        envs.SPECS["mlserver"].requirements,
        "mlserver_app.py",
        ("--grpc-port", "--metrics-port"),
        # MLServer's gRPC takes 4 MiB messages by default: G2's 4 MiB tensor and its framing would not fit.
        environment=(("MLSERVER_GRPC_MAX_MESSAGE_LENGTH", "2147483647"),),
    ),  # fmt: skip
    "kserve": Peer("kserve", envs.SPECS["kserve"].requirements, "kserve_grpc_app.py", ("--grpc-port",)),
    "pytriton": Peer(
        "pytriton", envs.SPECS["pytriton"].requirements, "pytriton_app.py", ("--grpc-port", "--metrics-port"), True
    ),
}
METRICS = {
    "G1.cpu_ms_c1": ("G1 FP32 [1,16]: server CPU ms/request (c=1)", "lower"),
    "G1.cpu_ms_c16": ("G1 FP32 [1,16]: server CPU ms/request (c=16)", "lower"),
    "G1.rps_c1": ("G1 FP32 [1,16]: req/s (c=1)", "higher"),
    "G1.rps_c16": ("G1 FP32 [1,16]: req/s (c=16)", "higher"),
    "G2.mbps_c1": ("G2 raw 4 MiB in/out: MB/s (c=1)", "higher"),
    "G2.cpu_ms_c1": ("G2 raw 4 MiB in/out: server CPU ms/request (c=1)", "lower"),
    "G4.rss_over_payload": ("G4 one 64 MiB raw request: (peak RSS - idle) / payload", "lower"),
}


@dataclass
class Run:
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    errors: dict[str, dict[str, str]] = field(default_factory=dict)
    details: list[dict[str, Any]] = field(default_factory=list)

    def add(self, server: str, metric: str, value: float, round_index: int) -> None:
        values = self.samples.setdefault(server, {}).setdefault(metric, [])
        values.extend([float("nan")] * (round_index - len(values)))  # a round it missed stays a gap
        values.append(value)

    def fail(self, server: str, what: str, reason: str) -> None:
        self.errors.setdefault(server, {}).setdefault(what, reason)
        print(f"  {server} {what}: NOT MEASURED: {reason[:300]}", flush=True)


def loadgen(python: Path, *args: str, timeout: float = 300) -> dict[str, Any]:
    command = ["taskset", "-c", str(LOAD_CORE), str(python), str(envs.BENCH / "grpc_loadgen.py"), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"grpc_loadgen {args[0]} failed: {done.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    return result


def measure_load(
    name: str, server: procs.Server, address: str, body: Path, key: str, concurrency: int, payload: int, args: Any,
    python: Path, run: Run, round_index: int,
) -> None:  # fmt: skip
    if args.warmup > 0:
        loadgen(python, "load", address, str(body), "-c", str(concurrency), "-s", str(args.warmup))
    pids = server.tree()
    procs.wait_idle(pids)
    before = procs.cpu_seconds(pids)
    result = loadgen(python, "load", address, str(body), "-c", str(concurrency), "-s", str(args.seconds))
    cpu = procs.cpu_seconds(pids) - before
    if result["requests"] == 0 or result["errors"] > 0.01 * result["requests"]:
        run.fail(name, key, f"{result['requests']} requests, {result['errors']} errors: {result['first_error']}")
        return
    suffix = f"_c{concurrency}"
    run.add(name, f"{key}.rps{suffix}", result["rate"], round_index)
    run.add(name, f"{key}.cpu_ms{suffix}", cpu * 1000 / result["requests"], round_index)
    if payload:
        run.add(name, f"{key}.mbps{suffix}", result["rate"] * payload / 1e6, round_index)
    run.details.append({"round": round_index, "server": name, "workload": key, "concurrency": concurrency,
                        "cpu_s": cpu, **result})  # fmt: skip
    print(
        f"  {name:9} {key} c={concurrency:<2} {result['rate']:9.1f} req/s  "
        f"{cpu * 1000 / result['requests']:8.3f} ms CPU/req  p50 {result['p50_ms']:.2f} ms",
        flush=True,
    )


def measure_memory(
    name: str, server: procs.Server, address: str, bodies: Path, python: Path, run: Run, round_index: int
) -> None:
    pids = server.tree()
    idle = {pid: procs.status_kib(pid, "VmRSS") for pid in pids}
    reset = all(procs.reset_peak_rss(pid) for pid in pids)
    answer = loadgen(python, "check", address, str(bodies / "g4.bin"), *(["--echo"] if name == "floor" else []))
    grown_kib = sum(max(procs.status_kib(pid, "VmHWM") - idle[pid], 0) for pid in pids)
    if answer["error"]:
        run.fail(name, "G4", str(answer["error"]))
        return
    run.add(name, "G4.rss_over_payload", grown_kib * 1024 / G4_BYTES, round_index)
    run.details.append({"round": round_index, "server": name, "workload": "G4", "grown_kib": grown_kib,
                        "processes": len(pids), "peak_reset": reset, "form": answer.get("form")})  # fmt: skip
    print(f"  {name:9} G4 peak RSS grew {grown_kib / 1024:.0f} MiB for a 64 MiB tensor", flush=True)


def measure_server(
    name: str, peer: Peer, python: Path, bodies: Path, args: Any, loadgen_python: Path, run: Run, round_index: int
) -> None:
    port = procs.free_port()
    ports = {flag: procs.free_port() for flag in peer.ports}
    command = [str(python), str(envs.APPS / peer.app), "--port", str(port)]
    for flag, value in ports.items():
        command += [flag, str(value)]
    env = dict(peer.environment)
    if args.keep_memory:
        env.update(KEEP_MEMORY)
    if peer.libpython:
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [envs.libpython_dir(python), os.environ.get("LD_LIBRARY_PATH")]))
    server = procs.Server(name, command, port, args.results / "raw" / "logs" / f"{name}.log", env)
    address = f"127.0.0.1:{ports['--grpc-port']}"
    server.start(SERVER_CORE)
    try:
        deadline = time.perf_counter() + 180
        try:
            server.wait_until("/v2/health/ready", deadline)
            server.wait_until("/v2/models/identity/ready", deadline)
        except (RuntimeError, TimeoutError) as exc:
            run.fail(name, "server", f"did not become ready: {exc} (log: {server.log_path})")
            return
        for key in ("G1", "G2"):
            echo = ["--echo"] if name == "floor" else []
            answer = loadgen(loadgen_python, "check", address, str(bodies / f"{key.lower()}.bin"), *echo)
            if answer["error"]:
                run.fail(name, key, str(answer["error"]))
                return
            run.details.append({"round": round_index, "server": name, "workload": key, "form": answer["form"]})
        if "G4" in args.workloads:
            measure_memory(name, server, address, bodies, loadgen_python, run, round_index)
        if "G1" in args.workloads:
            for concurrency in (1, 16):
                measure_load(name, server, address, bodies / "g1.bin", "G1", concurrency, 0, args,
                             loadgen_python, run, round_index)  # fmt: skip
        if "G2" in args.workloads:
            measure_load(name, server, address, bodies / "g2.bin", "G2", 1, G2_BYTES, args,
                         loadgen_python, run, round_index)  # fmt: skip
    finally:
        server.stop()


def paired_ratio(ours: list[float], theirs: list[float]) -> float | None:
    ratios = [a / b for a, b in zip(ours, theirs, strict=False) if a == a and b == b and b > 0]
    return statistics.median(ratios) if ratios else None


def summarize(run: Run, names: list[str]) -> dict[str, Any]:
    medians = {
        name: {metric: statistics.median([v for v in values if v == v]) for metric, values in metrics.items()
               if any(v == v for v in values)}
        for name, metrics in run.samples.items()
    }  # fmt: skip
    ratios = {
        peer: {metric: paired_ratio(run.samples["ours"].get(metric, []), run.samples[peer].get(metric, []))
               for metric in METRICS}
        for peer in names if peer != "ours" and peer in run.samples and "ours" in run.samples
    }  # fmt: skip
    return {"medians": medians, "ratios": ratios}


def table(summary: dict[str, Any], names: list[str]) -> str:
    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.3g}"

    peers = [name for name in names if name != "ours"]  # the floor's ratio too: ours over grpcio alone
    head = ["metric", "better", *names, *(f"ours/{peer}" for peer in peers)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric, (title, better) in METRICS.items():
        cells = [title, better]
        cells += [number(summary["medians"].get(name, {}).get(metric)) for name in names]
        cells += [
            number(summary["ratios"].get(peer, {}).get(metric))
            + ("x" if summary["ratios"].get(peer, {}).get(metric) else "")
            for peer in peers
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench/grpc_bench.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="1 round, 1 s per timed run, no warm-up")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--warmup", type=float)
    parser.add_argument("--servers", default=",".join(PEERS), help="comma-separated subset of " + ",".join(PEERS))
    parser.add_argument("--workloads", default="G1,G2,G4")
    parser.add_argument("--keep-memory", action="store_true", help="every server with glibc keeping its memory")
    parser.add_argument("--base", type=Path, help="serve 'base' from this checkout of oip-asgi (another commit)")
    parser.add_argument("--results", type=Path, help="default: bench/results/grpc (grpc-keep-memory)")
    args = parser.parse_args(argv)
    if args.results is None:
        args.results = envs.BENCH / "results" / ("grpc-keep-memory" if args.keep_memory else "grpc")
    args.rounds = args.rounds or (1 if args.quick else 5)
    args.seconds = args.seconds or (1.0 if args.quick else 5.0)
    args.warmup = args.warmup if args.warmup is not None else (0.0 if args.quick else 1.0)
    args.workloads = args.workloads.split(",")
    names = [name for name in PEERS if name in args.servers.split(",")]
    if "base" in names:
        if args.base is None:
            parser.error("the server 'base' needs --base DIR, a checkout of the commit to compare with")
        PEERS["base"] = dataclasses.replace(PEERS["base"], environment=(("PYTHONPATH", str(args.base.resolve())),))
    run = Run()

    reason = envs.ensure_env(LOADGEN_ENV, LOADGEN_REQUIREMENTS)
    if reason:
        raise SystemExit(f"cannot install the load generator's environment: {reason}")
    loadgen_python = envs.venv_python(LOADGEN_ENV)
    bodies = args.results / "raw" / "bodies"
    loadgen(loadgen_python, "bodies", str(bodies))
    pythons: dict[str, Path] = {}
    for name in names:
        peer = PEERS[name]
        reason = envs.ensure_env(peer.env, peer.requirements)
        if reason:
            run.fail(name, "server", f"cannot install: {reason}")
            continue
        pythons[name] = envs.venv_python(peer.env)
    versions = {
        name: envs.versions(python, ("oip-asgi", "grpcio", "protobuf", "mlserver", "kserve", "nvidia-pytriton"))
        for name, python in pythons.items()
    }
    started = time.time()
    for round_index in range(args.rounds):
        order = list(pythons)
        order = order[round_index % len(order) :] + order[: round_index % len(order)]
        print(f"round {round_index + 1}/{args.rounds}: {', '.join(order)}", flush=True)
        for name in order:
            measure_server(name, PEERS[name], pythons[name], bodies, args, loadgen_python, run, round_index)
    summary = summarize(run, names)
    label = "quick" if args.quick else "full"
    document = {
        "command": "python3 bench/grpc_bench.py" + ("" if not argv else " " + " ".join(argv)),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "elapsed_s": round(time.time() - started, 1),
        "settings": {
            "rounds": args.rounds,
            "seconds": args.seconds,
            "warmup": args.warmup,
            "workloads": args.workloads,
            "environment": KEEP_MEMORY if args.keep_memory else {},
        },
        "versions": versions,
        "samples": run.samples,
        "errors": run.errors,
        "details": run.details,
        **summary,
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{label}.json").write_text(json.dumps(document, indent=1, default=str))
    markdown = table(summary, names)
    notes = [f"- {name} {what}: {reason}" for name, failures in run.errors.items() for what, reason in failures.items()]
    (args.results / f"{label}.md").write_text(
        f"# gRPC workloads ({document['date']}, {args.rounds} rounds, {args.seconds:g} s runs)\n\n{markdown}\n"
        + ("\nNot measured:\n" + "\n".join(notes) + "\n" if notes else "")
    )
    print(markdown)
    for note in notes:
        print(note)


if __name__ == "__main__":
    main(sys.argv[1:])
