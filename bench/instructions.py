"""Instructions per W1 request, in-process: the figure a change to the hot path is judged by.

callgrind counts instructions, which the machine's other load does not change. W1's request is driven
straight into the app (`inprocess.requester`: no server, no event loop) `--low` and `--high` times in
two processes under ``PYTHONHASHSEED=0`` (without a fixed seed the counts move by a few percent); the
difference, divided by the difference of the counts, cancels the start-up.

    python bench/instructions.py [--low 1000] [--high 3000]

Needs valgrind on the PATH and an interpreter that imports oip_asgi.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(count: int) -> None:
    sys.path[:0] = [str(HERE), str(HERE / "apps")]
    import numpy as np
    from inprocess import identity, requester
    from starlette.applications import Starlette
    from workloads import SEED, json_request

    import oip_asgi

    app = Starlette()
    oip_asgi.mount(app, {"identity": identity}, path="/v2")
    body = json_request("INPUT0", np.random.default_rng(SEED).standard_normal((1, 16)).astype(np.float32))
    request = requester(app, "/v2/models/identity/infer", body)
    for _ in range(count):
        request()


def instructions(count: int) -> int:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        # Without address randomisation: objects hashed by their address collide alike in every run.
        fixed = ["setarch", platform.machine(), "--addr-no-randomize"] if shutil.which("setarch") else []
        measured = [sys.executable, __file__, "--run", str(count)]
        subprocess.run(
            [*fixed, "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *measured],
            check=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            capture_output=True,
        )
        totals = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        assert totals is not None, "callgrind wrote no totals"
        return int(totals.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--low", type=int, default=1000)
    parser.add_argument("--high", type=int, default=3000)
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # the measured process
    args = parser.parse_args()
    if args.run is not None:
        run(args.run)
        return
    low, high = instructions(args.low), instructions(args.high)
    print(f"W1 in-process: {(high - low) / (args.high - args.low) / 1000:.1f} k instructions per request")


if __name__ == "__main__":
    main()
