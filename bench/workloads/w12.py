"""W12: Triton's `add_sub` Python model (a `TritonPythonModel`), served by ours and by Triton 2.51's Python backend.

    PYTHONPATH=.:adapters .venv/bin/python bench/run.py --workloads W12 --rounds 3 --seconds 3   # or bench/w12.py
    PYTHONPATH=.:adapters .venv/bin/python bench/run.py --workloads W12 --quick      # 1 round, 1 s windows

Run with an interpreter that has oip-asgi's `[grpc,test]` dependencies (ours is served by it, and tritonclient
checks the answers); Triton comes from nvidia-pytriton 0.7.0, installed into bench/.peers/pytriton.

Three servers, each given a one-model repository holding add_sub's config.pbtxt:

- shim: examples/python_backend/models/add_sub/1/model.py unchanged (a `TritonPythonModel` using pb_utils),
  served by `oip-asgi serve --model-repository`;
- native: the same logic in our own model.py form (`def model(INPUT0, INPUT1)`), served the same way;
- triton: the shim's very folder, served by `tritonserver --model-repository --backend-directory` (the Triton 2.51
  and Python backend that nvidia-pytriton 0.7.0 ships).

- base (with --base DIR, a checkout of another commit: git worktree add --detach DIR REF): the shim's very
  repository, served by that commit's oip-asgi, in the same rounds: a change measured against the code before it.

The repository of shim, base and triton also holds `tokens` (issue 37), a decoupled model with an `async def
execute` answering through its response sender: one `text_output` response per request (`max_tokens` 1).

Per server and round: start to ready (process start to /v2/health/ready answering 200), then over REST (wrk,
one JSON body) and gRPC (bench/loadgen/grpc_unary.py, one serialized ModelInferRequest) at c=1 and c=16: requests/s
and server CPU per request (utime + stime of the server's process tree, Triton's stub process included, over the
timed window); and `tokens` over gRPC ModelStreamInfer (bench/loadgen/streams.py, 16 streams of one request each
in flight at once): responses/s and server CPU per response. The server is pinned to core 0 and the load
generator to core 1; each answer is checked with tritonclient first. Rounds interleave the servers; ratios are
paired by round, their median reported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import envs, loads, procs, report, rounds, servers
from harness.rounds import Run

SERVERS = ("shim", "native", "triton", "base")
DECOUPLED = ("shim", "triton", "base")  # the servers of the repository that holds `tokens`
DECOUPLED_CONFIG = """name: "tokens"
backend: "python"
model_transaction_policy { decoupled: true }
input [{ name: "text_input", data_type: TYPE_STRING, dims: [1] },
       { name: "max_tokens", data_type: TYPE_INT32, dims: [1] }]
output [{ name: "text_output", data_type: TYPE_STRING, dims: [1] }]
"""
DECOUPLED_MODEL = '''"""A decoupled model with an async execute: max_tokens responses through each request's sender."""

import numpy as np
import triton_python_backend_utils as pb_utils

TOKEN = np.array([b"token"], dtype=np.object_)


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(pb_utils.get_input_tensor_by_name(request, "max_tokens").as_numpy()[0])
            for index in range(count):
                response = pb_utils.InferenceResponse([pb_utils.Tensor("text_output", TOKEN)])
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if index == count - 1 else 0)
        return None
'''
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
    (shim / "tokens" / "1").mkdir(parents=True)
    (shim / "tokens" / "config.pbtxt").write_text(DECOUPLED_CONFIG)
    (shim / "tokens" / "1" / "model.py").write_text(DECOUPLED_MODEL)
    native = root / "native" / "add_sub"
    (native / "1").mkdir(parents=True)
    shutil.copy(EXAMPLE / "config.pbtxt", native / "config.pbtxt")
    (native / "1" / "model.py").write_text(NATIVE_MODEL)
    return {"shim": shim, "native": root / "native", "triton": shim, "base": shim}


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
    name: str, repository: Path, log: Path, triton: tuple[Path, Path, dict[str, str]] | None, base: Path | None = None
) -> procs.Server:
    ports = {"--port": procs.free_port(), "--grpc-port": procs.free_port()}
    if name == "triton":
        assert triton is not None
        binary, backends, env = triton
        command = [
            str(binary), "--model-repository", str(repository), "--backend-directory", str(backends),
            "--http-port", str(ports["--port"]), "--grpc-port", str(ports["--grpc-port"]),
            "--metrics-port", str(procs.free_port()), "--log-info", "false",
        ]  # fmt: skip
    else:
        command = [
            sys.executable, "-m", "oip_asgi", "serve", "--model-repository", str(repository),
            "--port", str(ports["--port"]), "--grpc-port", str(ports["--grpc-port"]),
            "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip
        source = base if name == "base" and base is not None else envs.ROOT  # base: that checkout's oip_asgi
        env = {"PYTHONPATH": os.pathsep.join([str(source), str(source / "adapters")])}
    return procs.Server(name, command, ports["--port"], log, env, ports=ports)


def load(wire: str, server: procs.Server, bodies: dict[str, Path], c: int, seconds: float) -> tuple[int, float, int]:
    """Requests, seconds and errors of one run on `wire`."""
    if wire == "rest":
        url = f"http://127.0.0.1:{server.port}/v2/models/add_sub/infer"
        result = loads.wrk(url, bodies["rest"], "application/json", c, max(1, round(seconds)))
        return result.requests, result.seconds, result.errors
    address = f"127.0.0.1:{server.ports['--grpc-port']}"
    args = ("load", address, str(bodies["grpc"]), "-c", str(c), "-s", str(seconds))
    answer = loads.loadgen(Path(sys.executable), "grpc_unary.py", *args, env={"PYTHONPATH": str(envs.ROOT)})
    return answer["requests"], answer["seconds"], answer["errors"]


def measure(name: str, server: procs.Server, args: Any, bodies: dict[str, Path], run: Run, round_index: int) -> None:
    run.add(name, "ready_s", server.ready_s["/v2/health/ready"], round_index)
    check(server.port, server.ports["--grpc-port"])
    for wire in WIRES:
        for c in CONCURRENCY:
            load(wire, server, bodies, c, args.warmup)
            cpu, (requests, seconds, errors) = procs.cpu_of(
                server.tree(), lambda w=wire, c=c: load(w, server, bodies, c, args.seconds)
            )
            if errors:
                raise RuntimeError(f"{wire} c={c}: {errors} errors")
            run.add(name, f"{wire}.rps_c{c}", requests / seconds, round_index)
            run.add(name, f"{wire}.cpu_us_c{c}", cpu / max(requests, 1) * 1e6, round_index)
    if name in DECOUPLED:
        target = json.dumps(
            {"address": f"127.0.0.1:{server.ports['--grpc-port']}", "wire": "grpc", "message": "stream"}
        )
        pids = ",".join(str(pid) for pid in server.tree())
        answer = loads.loadgen(
            Path(sys.executable), "streams.py", "load", target, "-n", "1", "-c", str(STREAMS), "-s", str(args.seconds),
            "--warmup", str(args.warmup), "--pids", pids, env={"PYTHONPATH": str(envs.ROOT)},
        )  # fmt: skip
        if answer["errors"] or not answer["frames"]:
            raise RuntimeError(f"tokens over gRPC streams: {answer['errors']} errors, first {answer['first_error']}")
        run.add(name, f"stream.rps_c{STREAMS}", answer["rate"], round_index)
        run.add(name, f"stream.cpu_us_c{STREAMS}", answer["cpu_us_per_frame"], round_index)


STREAMS = 16  # requests of the decoupled model in flight at once, each on a stream of its own
# label -> (ours, theirs, metric, the bar and which side of it is met)
RATIOS = {
    **{f"{wire}: shim / native CPU per request (c={c})": ("shim", "native", f"{wire}.cpu_us_c{c}", 1.2, "lower")
       for wire in WIRES for c in CONCURRENCY},
    **{f"{wire}: shim / Triton req/s (c={c})": ("shim", "triton", f"{wire}.rps_c{c}", 2.0, "higher")
       for wire in WIRES for c in CONCURRENCY},
    "start to ready: shim / Triton": ("shim", "triton", "ready_s", 1 / 3, "lower"),
    # Issue 37: the decoupled async model against Triton's Python backend, and the shim against the code before.
    f"decoupled async on gRPC streams: shim / Triton responses/s (c={STREAMS})":
        ("shim", "triton", f"stream.rps_c{STREAMS}", 1.0, "higher"),
    f"decoupled async on gRPC streams: shim / Triton CPU per response (c={STREAMS})":
        ("shim", "triton", f"stream.cpu_us_c{STREAMS}", 1.0, "lower"),
    **{f"{wire}: shim / base req/s (c={c})": ("shim", "base", f"{wire}.rps_c{c}", 0.95, "higher")
       for wire in WIRES for c in CONCURRENCY},
    **{f"{wire}: shim / base CPU per request (c={c})": ("shim", "base", f"{wire}.cpu_us_c{c}", 1.05, "lower")
       for wire in WIRES for c in CONCURRENCY},
}  # fmt: skip
METRICS = {
    "ready_s": ("start to ready (s)", "lower"),
    **{f"{wire}.{figure}_c{c}": (f"{wire}: {title} (c={c})", better) for wire in WIRES for c in CONCURRENCY
       for figure, title, better in (("rps", "req/s", "higher"), ("cpu_us", "server CPU µs/request", "lower"))},
    f"stream.rps_c{STREAMS}": (f"decoupled async, gRPC streams: responses/s (c={STREAMS})", "higher"),
    f"stream.cpu_us_c{STREAMS}": (f"decoupled async, gRPC streams: server CPU µs/response (c={STREAMS})", "lower"),
}  # fmt: skip


def main(argv: list[str]) -> None:
    parser = rounds.parser("W12", __doc__, SERVERS)
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results" / "w12")
    parser.add_argument("--base", type=Path, help="serve 'base' from this checkout of oip-asgi (another commit)")
    args = parser.parse_args(argv)
    rounds.defaults(args, 3, 3.0, 1.0, 1.0)
    names = [name for name in args.servers.split(",") if name]
    run = Run()
    if "base" in names and args.base is None:
        names.remove("base")  # (only with a checkout to serve it from)
    triton = None
    if "triton" in names:
        problem = envs.ensure_env(TRITON_ENV, TRITON_REQUIREMENTS)
        if problem:
            run.fail("triton", "server", f"cannot install: {problem}")
            names.remove("triton")
        else:
            triton = triton_backends(envs.venv_python(TRITON_ENV))
    loadavg = [report.loadavg()]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="w12-") as directory:
        root = Path(directory)
        repos = repositories(root)
        bodies = {"rest": root / "rest.json", "grpc": root / "grpc.bin"}
        bodies["rest"].write_text(json.dumps(REST_BODY))
        grpc_body(bodies["grpc"])
        for round_index, order in rounds.each_round(args.rounds, names):
            for name in order:
                log = args.results / "logs" / f"{name}.log"
                try:
                    server_of = make_server(name, repos[name], log, triton, args.base and args.base.resolve())
                    with servers.running(server_of) as server:
                        measure(name, server, args, bodies, run, round_index)
                except (servers.NotReady, RuntimeError, subprocess.TimeoutExpired) as exc:
                    run.fail(name, "server", str(exc))
                figures = {key: round(values[-1], 4) for key, values in run.samples.get(name, {}).items()}
                print(f"  {name}: {json.dumps(figures)}", flush=True)
    loadavg.append(report.loadavg())
    medians = rounds.medians(run.samples)
    rows = report.paired_targets(run, RATIOS)  # issue 27's bars
    settings = {"rounds": args.rounds, "seconds": args.seconds, "warmup": args.warmup}
    document = report.document(report.command("bench/run.py", argv), started, settings, run,
                               loadavg_before_after=loadavg, medians=medians, targets=rows)  # fmt: skip
    markdown = report.table(METRICS, medians, [name for name in SERVERS if name in medians], {})
    markdown += "\n\n" + report.targets_table(rows).replace(
        "| target | ours |", "| ratio (median of the per-round ratios) | value |"
    )
    title = f"W12 ({args.rounds} rounds, {args.seconds:g} s windows; load average before/after: {' / '.join(loadavg)})"
    report.write(args.results, "w12", title, document, markdown)
