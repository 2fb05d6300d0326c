"""gRPC workloads: oip-asgi's gRPC half against MLServer's, KServe's and Triton's (through PyTriton).

    python3 bench/run.py --workloads G1,G2,G4 [--quick]    # or python3 bench/grpc_bench.py [--quick]

Measured as the REST workloads are (bench/README.md): each server pinned to core 0 with every request
from a load generator pinned to core 1 (bench/loadgen/grpc_unary.py, grpcio's asyncio client sending one
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

import dataclasses
import time
from pathlib import Path
from typing import Any

from harness import envs, loads, procs, report, rounds, servers
from harness.rounds import Run

KEYS = ("G1", "G2", "G4")
G2_BYTES = 4 * 1024 * 1024
G4_BYTES = 64 * 1024 * 1024
# --keep-memory: glibc keeps freed memory instead of returning it to the kernel and faulting it back in
# (grpcio allocates and frees each large message several times); given to every server alike.
KEEP_MEMORY = {
    "MALLOC_TRIM_THRESHOLD_": str(512 * 2**20),
    "MALLOC_MMAP_THRESHOLD_": str(512 * 2**20),
    "MALLOC_TOP_PAD_": str(64 * 2**20),
}
READY = (*servers.V2_READY, "/v2/models/identity/ready")
OURS = servers.Peer(envs.OURS_GRPC_ENV, envs.OURS_GRPC_REQUIREMENTS, "ours_grpc_app.py", ("--grpc-port",), READY)
PEERS = {
    "floor": dataclasses.replace(OURS, app="grpc_floor_app.py"),
    "ours": OURS,
    # ours at another commit (--base DIR, a checkout of it), in the same rounds; its PYTHONPATH is set in main.
    "base": OURS,
    "mlserver": dataclasses.replace(
        servers.PEERS["mlserver"],
        ready=READY,
        # MLServer's gRPC takes 4 MiB messages by default: G2's 4 MiB tensor and its framing would not fit.
        environment=(("MLSERVER_GRPC_MAX_MESSAGE_LENGTH", "2147483647"),),
    ),
    "kserve": dataclasses.replace(servers.PEERS["kserve"], app="kserve_grpc_app.py", ready=READY),
    "pytriton": dataclasses.replace(servers.PEERS["pytriton"], ready=READY),
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


def loadgen(python: Path, *args: str) -> dict[str, Any]:
    return loads.loadgen(python, "grpc_unary.py", *args)


def measure_load(
    name: str, server: procs.Server, body: Path, key: str, concurrency: int, payload: int, args: Any, run: Run,
    round_index: int,
) -> None:  # fmt: skip
    address = f"127.0.0.1:{server.ports['--grpc-port']}"
    if args.warmup > 0:
        loadgen(args.loadgen_python, "load", address, str(body), "-c", str(concurrency), "-s", str(args.warmup))
    window = ("load", address, str(body), "-c", str(concurrency), "-s", str(args.seconds))
    cpu, result = procs.cpu_of(server.tree(), lambda: loadgen(args.loadgen_python, *window))
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


def measure_memory(name: str, server: procs.Server, bodies: Path, args: Any, run: Run, round_index: int) -> None:
    address = f"127.0.0.1:{server.ports['--grpc-port']}"
    echo = ["--echo"] if name == "floor" else []
    pids = server.tree()
    grown_kib, reset, answer = procs.peak_growth(
        pids, lambda: loadgen(args.loadgen_python, "check", address, str(bodies / "g4.bin"), *echo)
    )
    if answer["error"]:
        run.fail(name, "G4", str(answer["error"]))
        return
    run.add(name, "G4.rss_over_payload", grown_kib * 1024 / G4_BYTES, round_index)
    run.details.append({"round": round_index, "server": name, "workload": "G4", "grown_kib": grown_kib,
                        "processes": len(pids), "peak_reset": reset, "form": answer.get("form")})  # fmt: skip
    print(f"  {name:9} G4 peak RSS grew {grown_kib / 1024:.0f} MiB for a 64 MiB tensor", flush=True)


def measure_server(name: str, python: Path, bodies: Path, args: Any, run: Run, round_index: int) -> None:
    env = KEEP_MEMORY if args.keep_memory else {}
    log = args.results / "raw" / "logs" / f"{name}.log"
    with servers.running(servers.app_server(name, PEERS[name], python, log, env=env)) as server:
        address = f"127.0.0.1:{server.ports['--grpc-port']}"
        for key in ("G1", "G2"):
            echo = ["--echo"] if name == "floor" else []
            answer = loadgen(args.loadgen_python, "check", address, str(bodies / f"{key.lower()}.bin"), *echo)
            if answer["error"]:
                run.fail(name, key, str(answer["error"]))
                return
            run.details.append({"round": round_index, "server": name, "workload": key, "form": answer["form"]})
        if "G4" in args.workloads:
            measure_memory(name, server, bodies, args, run, round_index)
        if "G1" in args.workloads:
            for concurrency in (1, 16):
                measure_load(name, server, bodies / "g1.bin", "G1", concurrency, 0, args, run, round_index)
        if "G2" in args.workloads:
            measure_load(name, server, bodies / "g2.bin", "G2", 1, G2_BYTES, args, run, round_index)


def main(argv: list[str]) -> None:
    parser = rounds.parser(",".join(KEYS), __doc__, list(PEERS))
    parser.add_argument("--keep-memory", action="store_true", help="every server with glibc keeping its memory")
    parser.add_argument("--base", type=Path, help="serve 'base' from this checkout of oip-asgi (another commit)")
    parser.add_argument("--results", type=Path, help="default: bench/results/grpc (grpc-keep-memory)")
    args = parser.parse_args(argv)
    if args.results is None:
        args.results = envs.BENCH / "results" / ("grpc-keep-memory" if args.keep_memory else "grpc")
    rounds.defaults(args, 5, 5.0, 1.0, 0.0)
    args.workloads = args.workloads.split(",")
    names = [name for name in PEERS if name in args.servers.split(",")]
    if "base" in names:
        if args.base is None:
            parser.error("the server 'base' needs --base DIR, a checkout of the commit to compare with")
        PEERS["base"] = dataclasses.replace(PEERS["base"], environment=(("PYTHONPATH", str(args.base.resolve())),))
    run = Run()

    reason = envs.ensure_env(envs.OURS_GRPC_ENV, envs.OURS_GRPC_REQUIREMENTS)
    if reason:
        raise SystemExit(f"cannot install the load generator's environment: {reason}")
    args.loadgen_python = envs.venv_python(envs.OURS_GRPC_ENV)
    bodies = args.results / "raw" / "bodies"
    loadgen(args.loadgen_python, "bodies", str(bodies))
    pythons, failures = servers.install({name: PEERS[name] for name in names})
    for name, reason in failures.items():
        run.fail(name, "server", reason)
    distributions = ("oip-asgi", "grpcio", "protobuf", "mlserver", "kserve", "nvidia-pytriton")
    versions = {name: envs.versions(python, distributions) for name, python in pythons.items()}
    started = time.time()
    for round_index, order in rounds.each_round(args.rounds, list(pythons)):
        for name in order:
            try:
                measure_server(name, pythons[name], bodies, args, run, round_index)
            except servers.NotReady as exc:
                run.fail(name, "server", str(exc))
    names = [name for name in names if name in run.samples or name in run.errors]
    medians = rounds.medians(run.samples)
    ratios = rounds.ratios(run.samples, {peer: ("ours", peer) for peer in names if peer != "ours"}, list(METRICS))
    settings = {"rounds": args.rounds, "seconds": args.seconds, "warmup": args.warmup, "workloads": args.workloads,
                "environment": KEEP_MEMORY if args.keep_memory else {}}  # fmt: skip
    document = report.document(report.command("bench/run.py", argv), started, settings, run, versions=versions,
                               medians=medians, ratios=ratios)  # fmt: skip
    # The floor's ratio too: ours over grpcio alone.
    markdown = report.table(
        METRICS, medians, names, {f"ours/{peer}": ratios.get(peer, {}) for peer in names if peer != "ours"}
    )
    title = f"gRPC workloads ({document['date']}, {args.rounds} rounds, {args.seconds:g} s runs)"
    report.write(args.results, "quick" if args.quick else "full", title, document, markdown)
