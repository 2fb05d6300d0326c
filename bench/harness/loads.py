"""Load generators, pinned to the load core: wrk (Debian's package) posting one body file, and our own
(bench/loadgen/), run in a peer's environment, each answering with one JSON object."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import envs, procs

LUA = envs.BENCH / "post.lua"
LOADGEN = envs.BENCH / "loadgen"


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


def wrk(
    url: str,
    body: Path,
    content_type: str,
    connections: int,
    seconds: float,
    header_length: int | None = None,
    timeout: str = "30s",
) -> LoadResult:
    """One wrk run (one thread) posting `body` to `url` (post.lua)."""
    command = [
        "taskset", "-c", str(procs.LOAD_CORE), ensure_wrk(), "-t1", f"-c{connections}", f"-d{seconds:g}s",
        "--timeout", timeout, "-s", str(LUA), url, "--", str(body), content_type,
        "" if header_length is None else str(header_length),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    line = next((line for line in done.stdout.splitlines() if line.startswith('{"requests"')), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}"[:500])
    summary = json.loads(line)
    return LoadResult(
        requests=summary["requests"],
        seconds=summary["duration_us"] / 1e6,
        errors=sum(summary[key] for key in ("connect", "read", "write", "status", "timeout")),
        p50_ms=summary["p50_us"] / 1e3,
        p99_ms=summary["p99_us"] / 1e3,
    )


def loadgen(
    python: Path, script: str, *args: str, timeout: float = 300, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """bench/loadgen/<script> run by `python` on the load core; its JSON answer (the last line it prints)."""
    command = ["taskset", "-c", str(procs.LOAD_CORE), str(python), str(LOADGEN / script), *args]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False, env={**os.environ, **(env or {})}
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script} {args[0]} failed: {done.stderr.strip()[-500:]}")
    lines = done.stdout.strip().splitlines()
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    return result
