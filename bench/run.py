"""The one command: `python3 bench/run.py [--quick] [--workloads KEYS]` (see bench/README.md).

Each workload is a module of bench/workloads/ that plugs into the harness (bench/harness/):

| --workloads | module | runs in |
|---|---|---|
| W1-W9 (the default) | workloads/http.py | bench/.peers/harness (numpy, matplotlib), set up and re-run there |
| W10 | workloads/w10.py | this interpreter (standard library) |
| W11 | workloads/w11.py | this interpreter, which also serves ours and runs the load generator |
| W12 | workloads/w12.py | this interpreter, with oip-asgi's [grpc,test] dependencies |
| W13 | workloads/w13.py | this interpreter, with oip-asgi's [grpc,test] dependencies; perf_analyzer's set-up |
| G1,G2,G4 | workloads/grpc.py | this interpreter (standard library) |

One module a run: each has its own servers, options and results folder (`--help` with `--workloads` names them).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import envs

MODULES = {"W10": "w10", "W11": "w11", "W12": "w12", "W13": "w13", "G1": "grpc", "G2": "grpc", "G4": "grpc"}
REST = "http"  # every other key: W1-W9


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--workloads", default="")
    keys = [key for key in parser.parse_known_args(argv)[0].workloads.split(",") if key]
    modules = {MODULES.get(key, REST) for key in keys} or {REST}
    if len(modules) > 1:
        raise SystemExit(f"{', '.join(keys)}: these belong to {', '.join(sorted(modules))}; run one at a time")
    (module,) = modules
    if module == REST and Path(sys.prefix).resolve() != (envs.PEERS / "harness").resolve():
        reason = envs.ensure_env("harness", envs.HARNESS_REQUIREMENTS)
        if reason:
            raise SystemExit(f"cannot set up the harness environment: {reason}")
        python = envs.venv_python("harness")
        os.execv(python, [str(python), __file__, *argv])
    importlib.import_module(f"workloads.{module}").main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
