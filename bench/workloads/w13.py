"""W13: a 16 MiB FP32 tensor in and out through system shared memory, against the same tensor as binary data in
the body, and against Triton 2.51 through system shared memory, on the same model (issue 39).

    flock /work/bench.lock .venv/bin/python bench/run.py --workloads W13 --rounds 3 --seconds 3
    .venv/bin/python bench/run.py --workloads W13 --quick      # 1 round, windows of 5 requests (16 at c=8)

Run with an interpreter that has oip-asgi's `[grpc,test]` dependencies; perf_analyzer comes from
`bench/perf_analyzer.py --setup-only`, Triton from nvidia-pytriton 0.7.0 in bench/.peers/pytriton (as W12's).

One repository holds one model, `identity`: a Triton Python model (FP32 [-1] in, the same array out), served by
`oip-asgi serve --model-repository` (ours, through the Python-backend shim) and by `tritonserver` with its Python
backend (triton). perf_analyzer sends INPUT0 of 4,194,304 floats (16 MiB) and asks for OUTPUT0 back, over REST and
gRPC at c=1 and c=8 (three windows of 5 requests per second of `--seconds`, at least 2 per connection), in three
ways:

- shm: `--shared-memory system`: input and output in regions perf_analyzer registers (ours and triton);
- body: the same tensors in the request and the response (REST's binary data, gRPC's raw contents; ours).

Per series, wire and c: req/s (perf_analyzer's throughput) and server CPU per request (utime + stime of the
server's process tree, Triton's stub included, over the whole perf_analyzer run, divided by the inferences the
server's statistics counted meanwhile). Server on core 0, perf_analyzer on core 1; rounds interleave the servers.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import envs, procs, report, rounds, servers
from harness.rounds import Run

from workloads import w12

SERVERS = ("ours", "triton")
SERIES = {"ours": ("shm", "body"), "triton": ("shm",)}
WIRES = ("rest", "grpc")
CONCURRENCY = (1, 8)
ELEMENTS = 4 * 2**20  # FP32: 16 MiB
MODEL = '''"""Identity: the input array is the output (W13)."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy())]
            )
            for request in requests
        ]
'''
CONFIG = """name: "identity"
backend: "python"
max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }]
instance_group [{ kind: KIND_CPU count: 1 }]
"""
PERF_ANALYZER = envs.PEERS / "perf_analyzer"
_THROUGHPUT = re.compile(r"Concurrency: (\d+), throughput: ([\d.]+) infer/sec")


def repository(root: Path) -> Path:
    model = root / "identity"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG)
    (model / "1" / "model.py").write_text(MODEL)
    return root


def make_server(name: str, repo: Path, log: Path, triton: tuple[Path, Path, dict[str, str]] | None) -> procs.Server:
    server = w12.make_server("triton" if name == "triton" else "native", repo, log, triton)
    server.name = name
    return server


def check(server: procs.Server) -> None:
    """One 16 MiB request through shared memory on each wire, with tritonclient, its answer compared."""
    import numpy as np
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm

    data = np.random.default_rng(13).standard_normal(ELEMENTS).astype(np.float32)
    size = data.nbytes
    handles = [shm.create_shared_memory_region(f"w13_{n}", f"/w13_check_{n}", size) for n in ("in", "out")]
    shm.set_shared_memory_region(handles[0], [data])
    addresses = {httpclient: f"127.0.0.1:{server.port}", grpcclient: f"127.0.0.1:{server.ports['--grpc-port']}"}
    try:
        for module, address in addresses.items():
            client = module.InferenceServerClient(address)
            try:
                client.unregister_system_shared_memory()
                client.register_system_shared_memory("w13_in", "/w13_check_in", size)
                client.register_system_shared_memory("w13_out", "/w13_check_out", size)
                tensor = module.InferInput("INPUT0", [ELEMENTS], "FP32")
                tensor.set_shared_memory("w13_in", size)
                output = module.InferRequestedOutput("OUTPUT0")
                output.set_shared_memory("w13_out", size)
                client.infer("identity", [tensor], outputs=[output])
                if not np.array_equal(shm.get_contents_as_numpy(handles[1], np.float32, [ELEMENTS]), data):
                    raise RuntimeError(f"wrong answer over {module.__name__}")
                unregister(client)
            finally:
                client.close()
    finally:
        for handle in handles:
            shm.destroy_shared_memory_region(handle)


def unregister(client: Any) -> None:
    """Unregister every region; Triton 2.51's gRPC frontend holds a request's regions until it has released the
    response, a moment after the client has it ("Failed to unregister ..."): asked again until it lets go (10 s)."""
    from tritonclient.utils import InferenceServerException

    deadline = time.monotonic() + 10
    while True:
        try:
            client.unregister_system_shared_memory()
            return
        except InferenceServerException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def inferences(server: procs.Server) -> int:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/v2/models/identity/stats", timeout=10) as answer:
        (entry,) = json.load(answer)["model_stats"]
    return int(entry["inference_count"])


def requests(c: int, seconds: float) -> int:
    """How many requests make a window: 5 per second of `--seconds`, at least 2 per connection."""
    return max(2 * c, round(5 * seconds))


def perf_analyzer(server: procs.Server, series: str, wire: str, c: int, seconds: float) -> float:
    """perf_analyzer's throughput (infer/s) over three windows of `requests(c, seconds)` requests each, whatever
    their spread (`-s 1000`): a 16 MiB body over REST runs at a few requests a second, too few for windows of time to
    be stable, and `--request-count`'s throughput is the count over one second, not over the time taken."""
    address = f"127.0.0.1:{server.port if wire == 'rest' else server.ports['--grpc-port']}"
    memory = ["--shared-memory", "system", "--output-shared-memory-size", str(4 * ELEMENTS)] if series == "shm" else []
    command = [
        "taskset", "-c", str(procs.LOAD_CORE), str(PERF_ANALYZER / "bin" / "perf_analyzer"), "-m", "identity",
        "-u", address, "-i", "http" if wire == "rest" else "grpc", "--shape", f"INPUT0:{ELEMENTS}", *memory,
        "--concurrency-range", str(c), "--measurement-mode", "count_windows",
        "--measurement-request-count", str(requests(c, seconds)), "-s", "1000", "-r", "3",
    ]  # fmt: skip
    environment = {"LD_LIBRARY_PATH": str(PERF_ANALYZER / "lib")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment, check=False)
    found = _THROUGHPUT.findall(done.stdout)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"perf_analyzer failed ({done.returncode}): {(done.stdout + done.stderr)[-600:]}")
    return float(found[-1][1])


def measure(name: str, server: procs.Server, args: Any, run: Run, round_index: int) -> None:
    check(server)
    for series in SERIES[name]:
        for wire in WIRES:
            for c in CONCURRENCY:
                key = f"{name}-{series}"
                try:
                    before = inferences(server)
                    cpu, rate = procs.cpu_of(
                        server.tree(), lambda s=series, w=wire, n=c: perf_analyzer(server, s, w, n, args.seconds)
                    )
                    count = inferences(server) - before
                except RuntimeError as exc:
                    run.fail(key, f"{wire} c={c}", str(exc))
                    continue
                run.add(key, f"{wire}.rps_c{c}", rate, round_index)
                run.add(key, f"{wire}.cpu_ms_c{c}", cpu / max(count, 1) * 1e3, round_index)


# label -> (ours, theirs, metric, the bar and which side of it is met)
RATIOS = {
    **{f"{wire}: shared memory / body, server CPU per request (c={c})":
       ("ours-shm", "ours-body", f"{wire}.cpu_ms_c{c}", 0.3, "lower") for wire in WIRES for c in CONCURRENCY},
    **{f"{wire}: ours / Triton through shared memory, req/s (c={c})":
       ("ours-shm", "triton-shm", f"{wire}.rps_c{c}", 1.0, "higher") for wire in WIRES for c in CONCURRENCY},
}  # fmt: skip
METRICS = {
    f"{wire}.{figure}_c{c}": (f"{wire}: {title} (c={c})", better)
    for wire in WIRES
    for c in CONCURRENCY
    for figure, title, better in (("rps", "req/s", "higher"), ("cpu_ms", "server CPU ms/request", "lower"))
}


def main(argv: list[str]) -> None:
    parser = rounds.parser("W13", __doc__, SERVERS)
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results" / "w13")
    args = parser.parse_args(argv)
    rounds.defaults(args, 3, 3.0, 0.0, 0.0)
    if not (PERF_ANALYZER / "bin" / "perf_analyzer").exists():
        raise SystemExit("perf_analyzer is not set up: python3 bench/perf_analyzer.py --setup-only")
    names = [name for name in args.servers.split(",") if name]
    run = Run()
    triton = None
    if "triton" in names:
        problem = envs.ensure_env(w12.TRITON_ENV, w12.TRITON_REQUIREMENTS)
        if problem:
            run.fail("triton-shm", "server", f"cannot install: {problem}")
            names.remove("triton")
        else:
            triton = w12.triton_backends(envs.venv_python(w12.TRITON_ENV))
    loadavg = [report.loadavg()]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="w13-") as directory:
        repo = repository(Path(directory))
        for round_index, order in rounds.each_round(args.rounds, names):
            for name in order:
                log = args.results / "logs" / f"{name}.log"
                try:
                    with servers.running(make_server(name, repo, log, triton)) as server:
                        measure(name, server, args, run, round_index)
                except (servers.NotReady, RuntimeError, subprocess.TimeoutExpired) as exc:
                    run.fail(name, "server", str(exc))
                for key in (f"{name}-{series}" for series in SERIES[name]):
                    figures = {metric: round(values[-1], 4) for metric, values in run.samples.get(key, {}).items()}
                    print(f"  {key}: {json.dumps(figures)}", flush=True)
    loadavg.append(report.loadavg())
    medians = rounds.medians(run.samples)
    rows = report.paired_targets(run, RATIOS)  # issue 39's bars
    settings = {"rounds": args.rounds, "seconds": args.seconds, "elements": ELEMENTS, "python": sys.executable}
    document = report.document(report.command("bench/run.py", argv), started, settings, run,
                               loadavg_before_after=loadavg, medians=medians, targets=rows)  # fmt: skip
    series = [key for key in ("ours-shm", "ours-body", "triton-shm") if key in medians]
    markdown = report.table(METRICS, medians, series, {})
    markdown += "\n\n" + report.targets_table(rows).replace(
        "| target | ours |", "| ratio (median of the per-round ratios) | value |"
    )
    load = " / ".join(loadavg)
    title = f"W13 ({args.rounds} rounds, windows of {requests(1, args.seconds)} requests; load {load})"
    report.write(args.results, "w13", title, document, markdown)
