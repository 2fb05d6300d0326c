"""W12: Triton's `add_sub` Python model (a `TritonPythonModel`), served by ours and by Triton 2.51's Python backend.

    PYTHONPATH=.:adapters .venv/bin/python bench/w12.py --rounds 3 --seconds 3
    PYTHONPATH=.:adapters .venv/bin/python bench/w12.py --quick      # 1 round, 1 s windows: a smoke run

Run with an interpreter that has oip-asgi's `[grpc,test]` dependencies (ours is served by it, and tritonclient
checks the answers); Triton comes from nvidia-pytriton 0.7.0, installed into bench/.peers/pytriton.

Three servers, each given a one-model repository holding add_sub's config.pbtxt:

- shim: examples/python_backend/models/add_sub/1/model.py unchanged (a `TritonPythonModel` using pb_utils),
  served by `oip-asgi serve --model-repository`;
- native: the same logic in our own model.py form (`def model(INPUT0, INPUT1)`), served the same way;
- triton: the shim's very folder, served by `tritonserver --model-repository --backend-directory` (the Triton 2.51
  and Python backend that nvidia-pytriton 0.7.0 ships).

Per server and round: start to ready (process start to /v2/health/ready answering 200), then over REST (wrk,
one JSON body) and gRPC (bench/grpc_loadgen.py, one serialized ModelInferRequest) at c=1 and c=16: requests/s
and server CPU per request (utime + stime of the server's process tree, Triton's stub process included, over the
timed window). The server is pinned to core 0 and the load generator to core 1; each answer is checked with
tritonclient first. Rounds interleave the servers; ratios are paired by round, their median reported.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import envs
import loadgen
import procs

SERVER_CORE, LOAD_CORE = 0, 1
SERVERS = ("shim", "native", "triton")
WIRES = ("rest", "grpc")
CONCURRENCY = (1, 16)
EXAMPLE = envs.ROOT / "examples" / "python_backend" / "models" / "add_sub"
TRITON_REQUIREMENTS = ("nvidia-pytriton==0.7.0",)
TRITON_ENV = "pytriton"
NATIVE_MODEL = '''"""add_sub in oip-asgi's own model.py form: the logic of Triton's example, nothing around it."""

from __future__ import annotations

import numpy as np


def model(INPUT0: np.ndarray, INPUT1: np.ndarray) -> dict[str, np.ndarray]:
    return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}
'''
A = [0.5, 1.5, 2.5, 3.5]
B = [1.0, 0.25, -2.0, 8.0]
REST_BODY = {
    "inputs": [
        {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": A},
        {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": B},
    ]
}


def repositories(root: Path) -> dict[str, Path]:
    """The one-model repositories: add_sub as Triton ships it (shim, triton) and in our own form (native)."""
    shim = root / "shim"
    shutil.copytree(EXAMPLE, shim / "add_sub")
    native = root / "native" / "add_sub"
    (native / "1").mkdir(parents=True)
    shutil.copy(EXAMPLE / "config.pbtxt", native / "config.pbtxt")
    (native / "1" / "model.py").write_text(NATIVE_MODEL)
    return {"shim": shim, "native": root / "native", "triton": shim}


def triton_backends(python: Path) -> tuple[Path, Path, dict[str, str]]:
    """tritonserver, a backend directory holding the Python backend (libtriton_python.so, the stub built for this
    Python, triton_python_backend_utils.py) as PyTriton lays it out in its workspace, and the environment it needs."""
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import pytriton, os; print(os.path.dirname(pytriton.__file__))"], text=True
        ).strip()
    )
    server = site / "tritonserver"
    version = subprocess.check_output(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], text=True
    ).strip()
    backends = envs.PEERS / "triton-backends"
    python_backend = backends / "python"
    python_backend.mkdir(parents=True, exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        link = python_backend / name
        if not link.exists():
            link.symlink_to(server / "backends" / "python" / name)
    stub = python_backend / "triton_python_backend_stub"
    if not stub.exists():
        shutil.copy(server / "python_backend_stubs" / version / "triton_python_backend_stub", stub)
    # The stub embeds this venv's Python (found on PATH) and links its CUDA runtime from the wheel's libraries.
    libraries = [envs.libpython_dir(python), str(site.parent / "nvidia_pytriton.libs")]
    env = {"PATH": f"{python.parent}:{os.environ['PATH']}", "LD_LIBRARY_PATH": ":".join(libraries)}
    return server / "bin" / "tritonserver", backends, env


def grpc_body(path: Path) -> None:
    import numpy as np

    from oip_asgi.grpc import inference_pb2 as pb

    request = pb.ModelInferRequest(model_name="add_sub", id="w12")
    for name, values in (("INPUT0", A), ("INPUT1", B)):
        request.inputs.add(name=name, datatype="FP32", shape=[4])
        request.raw_input_contents.append(np.array(values, np.float32).tobytes())
    path.write_bytes(request.SerializeToString())


def check(http_port: int, grpc_port: int) -> None:
    """One inference on each wire with NVIDIA's clients, its answer checked."""
    import numpy as np
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    a, b = np.array(A, np.float32), np.array(B, np.float32)
    for module, address in ((httpclient, f"127.0.0.1:{http_port}"), (grpcclient, f"127.0.0.1:{grpc_port}")):
        inputs = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        client = module.InferenceServerClient(address)
        try:
            result = client.infer("add_sub", inputs)
        finally:
            client.close()
        if not (
            np.array_equal(result.as_numpy("OUTPUT0"), a + b) and np.array_equal(result.as_numpy("OUTPUT1"), a - b)
        ):
            raise RuntimeError(f"wrong answer over {module.__name__}")


def make_server(
    name: str, repository: Path, log: Path, triton: tuple[Path, Path, dict[str, str]] | None
) -> tuple[procs.Server, int]:
    port, grpc_port = procs.free_port(), procs.free_port()
    if name == "triton":
        assert triton is not None
        binary, backends, env = triton
        command = [
            str(binary),
            "--model-repository",
            str(repository),
            "--backend-directory",
            str(backends),
            "--http-port",
            str(port),
            "--grpc-port",
            str(grpc_port),
            "--metrics-port",
            str(procs.free_port()),
            "--log-info",
            "false",
        ]
    else:
        command = [
            sys.executable,
            "-m",
            "oip_asgi",
            "serve",
            "--model-repository",
            str(repository),
            "--port",
            str(port),
            "--grpc-port",
            str(grpc_port),
            "--no-access-log",
            "--log-level",
            "warning",
        ]
        env = {"PYTHONPATH": os.pathsep.join([str(envs.ROOT), str(envs.ROOT / "adapters")])}
    return procs.Server(name, command, port, log, env), grpc_port


def load(
    wire: str, port: int, grpc_port: int, bodies: dict[str, Path], c: int, seconds: float, wrk: str
) -> dict[str, float]:
    if wire == "rest":
        url = f"http://127.0.0.1:{port}/v2/models/add_sub/infer"
        command = [
            "taskset",
            "-c",
            str(LOAD_CORE),
            wrk,
            "-t1",
            f"-c{c}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "30s",
            "-s",
            str(loadgen.LUA),
            url,
            "--",
            str(bodies["rest"]),
            "application/json",
            "",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
        line = next((row for row in done.stdout.splitlines() if row.startswith('{"requests"')), None)
        if done.returncode != 0 or line is None:
            raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}"[:500])
        summary = json.loads(line)
        errors = sum(summary[key] for key in ("connect", "read", "write", "status", "timeout"))
        return {"requests": summary["requests"], "seconds": summary["duration_us"] / 1e6, "errors": errors}
    command = [
        "taskset",
        "-c",
        str(LOAD_CORE),
        sys.executable,
        str(envs.BENCH / "grpc_loadgen.py"),
        "load",
        f"127.0.0.1:{grpc_port}",
        str(bodies["grpc"]),
        "-c",
        str(c),
        "-s",
        str(seconds),
    ]
    env = {**os.environ, "PYTHONPATH": str(envs.ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"grpc_loadgen failed: {done.stderr.strip()[-400:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"requests": result["requests"], "seconds": result["seconds"], "errors": result["errors"]}


def measure(
    name: str,
    repository: Path,
    args: Any,
    bodies: dict[str, Path],
    wrk: str,
    triton: tuple[Path, Path, dict[str, str]] | None,
    log: Path,
) -> dict[str, float]:
    server, grpc_port = make_server(name, repository, log, triton)
    server.start(SERVER_CORE)
    figures: dict[str, float] = {}
    try:
        figures["ready_s"] = server.wait_until("/v2/health/ready", time.perf_counter() + 120)
        check(server.port, grpc_port)
        for wire in WIRES:
            for c in CONCURRENCY:
                load(wire, server.port, grpc_port, bodies, c, args.warmup, wrk)
                procs.wait_idle(server.tree())
                pids = server.tree()
                before = procs.cpu_seconds(pids)
                result = load(wire, server.port, grpc_port, bodies, c, args.seconds, wrk)
                cpu = procs.cpu_seconds(pids) - before
                if result["errors"]:
                    raise RuntimeError(f"{wire} c={c}: {result['errors']} errors")
                figures[f"{wire}.rps_c{c}"] = result["requests"] / result["seconds"]
                figures[f"{wire}.cpu_us_c{c}"] = cpu / max(result["requests"], 1) * 1e6
    finally:
        server.stop()
    return figures


def ratios(rounds: list[dict[str, dict[str, float]]]) -> dict[str, float]:
    """Median over rounds of each round's ratio (paired by round)."""
    found: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        found.setdefault(key, []).append(value)

    for figures in rounds:
        shim, native, triton = figures.get("shim"), figures.get("native"), figures.get("triton")
        for wire in WIRES:
            for c in CONCURRENCY:
                if shim and native:
                    add(
                        f"{wire}: shim / native CPU per request (c={c})",
                        shim[f"{wire}.cpu_us_c{c}"] / native[f"{wire}.cpu_us_c{c}"],
                    )
                if shim and triton:
                    add(f"{wire}: shim / Triton req/s (c={c})", shim[f"{wire}.rps_c{c}"] / triton[f"{wire}.rps_c{c}"])
        if shim and triton:
            add("start to ready: shim / Triton", shim["ready_s"] / triton["ready_s"])
    return {key: statistics.median(values) for key, values in found.items()}


TARGETS = {"shim / native CPU": ("<=", 1.2), "shim / Triton req/s": (">=", 2.0), "start to ready": ("<=", 1 / 3)}


def report(rounds: list[dict[str, dict[str, float]]], meta: dict[str, Any]) -> str:
    lines = [
        f"W12 ({meta['rounds']} rounds, {meta['seconds']} s windows; load {meta['loadavg_before']} before, "
        f"{meta['loadavg_after']} after)",
        "",
        "| server | figure | median | rounds |",
        "|---|---|---|---|",
    ]
    for name in SERVERS:
        keys = sorted({key for figures in rounds for key in figures.get(name, {})})
        for key in keys:
            values = [figures[name][key] for figures in rounds if name in figures]
            lines.append(
                f"| {name} | {key} | {statistics.median(values):,.4g} | {', '.join(f'{v:,.4g}' for v in values)} |"
            )
    lines += ["", "| ratio (median of the per-round ratios) | value | target | met |", "|---|---|---|---|"]
    for key, value in ratios(rounds).items():
        target = next((bound for label, bound in TARGETS.items() if label in key), None)
        met = (
            ""
            if target is None
            else ("yes" if (value <= target[1] if target[0] == "<=" else value >= target[1]) else "NO")
        )
        lines.append(f"| {key} | {value:.3f} | {'' if target is None else f'{target[0]} {target[1]:.3g}'} | {met} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--quick", action="store_true", help="1 round, 1 s windows and warm-up")
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results" / "w12")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds, args.warmup = 1, 1.0, 1.0
    names = [name for name in args.servers.split(",") if name]
    wrk = loadgen.ensure_wrk()
    triton = None
    if "triton" in names:
        problem = envs.ensure_env(TRITON_ENV, TRITON_REQUIREMENTS)
        if problem:
            print(f"triton: not measured: {problem}", flush=True)
            names.remove("triton")
        else:
            triton = triton_backends(envs.venv_python(TRITON_ENV))
    args.results.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "rounds": args.rounds,
        "seconds": args.seconds,
        "loadavg_before": Path("/proc/loadavg").read_text().split()[:3],
    }
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="w12-") as directory:
        root = Path(directory)
        repos = repositories(root)
        bodies = {"rest": root / "rest.json", "grpc": root / "grpc.bin"}
        bodies["rest"].write_text(json.dumps(REST_BODY))
        grpc_body(bodies["grpc"])
        for index in range(args.rounds):
            # Interleaved, and each round in another order: drift in the machine's load spreads over the servers.
            order = names[index % len(names) :] + names[: index % len(names)]
            figures: dict[str, dict[str, float]] = {}
            for name in order:
                print(f"round {index + 1}/{args.rounds}: {name}", flush=True)
                figures[name] = measure(
                    name, repos[name], args, bodies, wrk, triton, args.results / "logs" / f"{name}.log"
                )
                print(f"  {json.dumps({key: round(value, 4) for key, value in figures[name].items()})}", flush=True)
            rounds.append(figures)
    meta["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    text = report(rounds, meta)
    (args.results / "w12.json").write_text(
        json.dumps({"meta": meta, "rounds": rounds, "ratios": ratios(rounds)}, indent=1)
    )
    (args.results / "w12.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
