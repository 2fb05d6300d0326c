"""Load generation with wrk (Debian package), pinned to its own core, posting one body file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workloads import Workload

LUA = Path(__file__).with_name("post.lua")


def ensure_wrk() -> str:
    """wrk's path; installs Debian's package when missing and we may, else exits with the reason."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("wrk not found: installing Debian's package (apt-get update && apt-get install -y wrk)", flush=True)
        subprocess.run(["apt-get", "update", "-qq"], check=False, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=False, timeout=600)
        found = shutil.which("wrk")
        if found:
            return found
    raise SystemExit("wrk is required: install it with `apt-get install -y wrk` (Debian/Ubuntu) and run again")


@dataclass(frozen=True)
class LoadResult:
    requests: int
    seconds: float
    errors: int
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def run_wrk(
    wrk: str, port: int, path: str, workload: Workload, connections: int, seconds: float, core: int
) -> LoadResult:
    url = f"http://127.0.0.1:{port}{path}"
    header_length = "" if workload.header_length is None else str(workload.header_length)
    command = [
        "taskset", "-c", str(core), wrk, "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "30s",
        "-s", str(LUA), url, "--", str(workload.body_path), workload.content_type, header_length,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    line = next((line for line in done.stdout.splitlines() if line.startswith('{"requests"')), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}"[:500])
    summary = json.loads(line)
    errors = sum(summary[key] for key in ("connect", "read", "write", "status", "timeout"))
    return LoadResult(
        requests=summary["requests"],
        seconds=summary["duration_us"] / 1e6,
        errors=errors,
        p50_ms=summary["p50_us"] / 1e3,
        p99_ms=summary["p99_us"] / 1e3,
    )
