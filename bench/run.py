"""The one command: `python3 bench/run.py [--quick]` (see bench/README.md).

Standard library only: it sets up the harness's own virtual environment (numpy, matplotlib) under
bench/.peers/harness and re-runs the harness there, so nothing beyond Python 3.10+ is needed to start.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import envs


def main() -> None:
    harness_python = envs.venv_python("harness")
    if Path(sys.prefix).resolve() != (envs.PEERS / "harness").resolve():
        reason = envs.ensure_env("harness", envs.HARNESS_REQUIREMENTS)
        if reason:
            raise SystemExit(f"cannot set up the harness environment: {reason}")
        harness = envs.BENCH / "harness.py"
        os.execv(harness_python, [str(harness_python), str(harness), *sys.argv[1:]])


if __name__ == "__main__":
    main()
