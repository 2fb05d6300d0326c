"""An ensemble of two trivial models against the same two calls made by a client: server CPU per request (issue 39).

`oip-asgi serve --model-repository` serves `first` and `second` (model.py files: each passes its FP32
[1,16] on, as an async function) and `both`, the ensemble of the two. One client on the other core,
one request at a time over one keep-alive connection, asks `both` N times, then asks `first` and, with
its output, `second`, N times: the server's CPU (utime + stime of its process, from /proc) over each
run, divided by N. One run each, as the issue asks; the machine's other load moves it by a few percent
(`bench/instructions.py --cases E2ensemble,E2calls` counts the same in-process, load or not).

    cd bench && PYTHONPATH=..:../adapters flock /work/bench.lock python ensemble_cost.py [--requests N]

Recorded in docs/benchmarks.md ("Issue 39").
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import time
from pathlib import Path

from harness import procs

MODEL = """
from oip_asgi import Model, TensorSpec


async def passed_on(INPUT0):
    return {"OUTPUT0": INPUT0}


model = Model(
    passed_on, inputs=[TensorSpec("INPUT0", "FP32", [-1, 16])], outputs=[TensorSpec("OUTPUT0", "FP32", [-1, 16])]
)
"""
ENSEMBLE = """
name: "both"
platform: "ensemble"
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1, 16 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1, 16 ] } ]
ensemble_scheduling { step [
  { model_name: "first", model_version: -1, input_map { key: "INPUT0" value: "INPUT0" }
    output_map { key: "OUTPUT0" value: "between" } },
  { model_name: "second", model_version: -1, input_map { key: "INPUT0" value: "between" }
    output_map { key: "OUTPUT0" value: "OUTPUT0" } }
] }
"""


def repository(root: Path) -> Path:
    for name in ("first", "second"):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(MODEL)
    (root / "both" / "1").mkdir(parents=True)
    (root / "both" / "config.pbtxt").write_text(ENSEMBLE)
    return root


def body(data: list[float]) -> bytes:
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": data}]}).encode()


def ask(connection: http.client.HTTPConnection, model: str, payload: bytes) -> list[float]:
    connection.request("POST", f"/v2/models/{model}/infer", payload, {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    if response.status != 200:
        raise RuntimeError(f"{model} answered {response.status}: {answer}")
    data: list[float] = answer["outputs"][0]["data"]
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--python", default=sys.executable, help="an interpreter with oip-asgi[serve]")
    args = parser.parse_args()
    data = [float(value) for value in range(16)]
    with tempfile.TemporaryDirectory() as folder:
        port = procs.free_port()
        command = [args.python, "-m", "oip_asgi", "serve", "--model-repository", str(repository(Path(folder))),
                   "--port", str(port), "--log-level", "warning"]  # fmt: skip
        server = procs.Server("ours", command, port, Path(folder) / "server.log")
        server.start(procs.SERVER_CORE)
        try:
            server.wait_until("/v2/health/ready", time.perf_counter() + 120)
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            for _ in range(200):  # warm: both paths once taken, caches filled
                ask(connection, "both", body(data))
                ask(connection, "second", body(ask(connection, "first", body(data))))

            def ensemble() -> None:
                for _ in range(args.requests):
                    ask(connection, "both", body(data))

            def calls() -> None:
                for _ in range(args.requests):
                    ask(connection, "second", body(ask(connection, "first", body(data))))

            for name, run in (("ensemble", ensemble), ("two calls", calls)):
                cpu, _ = procs.cpu_of(server.tree(), run)
                print(
                    f"{name}: {cpu / args.requests * 1e6:.0f} us of server CPU per request ({args.requests} requests)"
                )
            connection.close()
        finally:
            if server.process is not None:
                server.process.terminate()
                server.process.wait(10)


if __name__ == "__main__":
    main()
