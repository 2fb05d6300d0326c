"""Where the bench lives, and the virtual environments of the servers under test under bench/.peers/ (git-ignored)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent
PEERS = BENCH / ".peers"
APPS = BENCH / "apps"

HARNESS_REQUIREMENTS = ("numpy>=1.24", "matplotlib>=3.7")


# W9 serves the same model files everywhere: a joblib pickle loads only under the scikit-learn that wrote it,
# so every environment that loads or trains one gets the same release (the one mlserver-sklearn 1.7.1 resolves).
MODEL_FILE_PINS = ("scikit-learn==1.9.1", "xgboost==3.2.0", "onnxruntime==1.32.0")
# skl2onnx exports W9's MLP; the files are trained in this environment (bench/w9_files.py).
OURS_REQUIREMENTS = (f"-e {ROOT}[examples,onnx,sklearn]", "uvloop", "httptools", "skl2onnx", *MODEL_FILE_PINS)
# oip-asgi with gRPC: ours and the floor of the gRPC and streaming workloads, and the load generators (loadgen/).
OURS_GRPC_ENV = "ours-grpc"
OURS_GRPC_REQUIREMENTS = (f"-e {ROOT}[examples,grpc]", "uvloop", "httptools")
LITSERVE_REQUIREMENTS = ("litserve==0.2.19", "uvloop", "httptools")


def venv_python(env: str) -> Path:
    return PEERS / env / "bin" / "python"


def _fingerprint(requirements: tuple[str, ...]) -> str:
    text = "\n".join(requirements)
    if any(requirement.startswith("-e ") for requirement in requirements):
        text += (ROOT / "pyproject.toml").read_text()
    return hashlib.sha256(text.encode()).hexdigest()


def ensure_env(env: str, requirements: tuple[str, ...], python: str = sys.executable) -> str | None:
    """Create or update bench/.peers/<env>; None when ready, else the reason it could not be installed."""
    directory = PEERS / env
    marker = directory / ".bench-requirements"
    fingerprint = _fingerprint(requirements)
    if marker.exists() and marker.read_text() == fingerprint and venv_python(env).exists():
        return None
    directory.parent.mkdir(parents=True, exist_ok=True)
    log = PEERS / f"{env}.install.log"
    print(
        f"setting up {directory.relative_to(ROOT)}: {' '.join(requirements)} (log: {log.relative_to(ROOT)})", flush=True
    )
    with log.open("w") as output:
        arguments = [part for requirement in requirements for part in requirement.split(" ", 1)]
        steps = {
            f"{python} -m venv": [python, "-m", "venv", str(directory)],
            f"pip install {' '.join(requirements)}": [str(venv_python(env)), "-m", "pip", "install", "-q", *arguments],
        }
        for title, step in steps.items():
            done = subprocess.run(step, stdout=output, stderr=subprocess.STDOUT, timeout=1800, check=False)
            if done.returncode != 0:
                tail = [line for line in log.read_text().splitlines() if not line.startswith("WARNING: Location")]
                return f"`{title}` failed: " + " | ".join(tail[-8:])
    marker.write_text(fingerprint)
    return None


def libpython_dir(python: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_config_var('LIBDIR') or '')"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout.strip()


def versions(python: Path, distributions: tuple[str, ...]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "found = {'python': sys.version.split()[0]}\n"
        f"for name in {list(distributions)!r}:\n"
        "    try: found[name] = m.version(name)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(found))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, check=False)
    return dict(json.loads(done.stdout)) if done.returncode == 0 else {}


def cached_bytecode(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without PYTHONDONTWRITEBYTECODE: a server under test, as an installed package, starts from cached
    bytecode. With the variable set (as a test machine may have it), a checkout's modules were compiled from source
    at every start, which W5's start to ready and its import times measured instead of the imports themselves."""
    return {name: value for name, value in environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def import_seconds(python: Path, statement: str, repeat: int) -> list[float]:
    """Wall time of `statement` in fresh interpreters (bytecode caches already warm)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    times = []
    for _ in range(repeat):
        done = subprocess.run(
            ["taskset", "-c", "0", str(python), "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=cached_bytecode(os.environ),  # the first run writes the caches the others (and servers) read
        )
        if done.returncode != 0:
            raise RuntimeError(f"`{statement}` failed: {done.stderr.strip()[-300:]}")
        times.append(float(done.stdout.strip()))
    return times
