"""The servers under test and their virtual environments under bench/.peers/ (git-ignored)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PEERS = BENCH / ".peers"
APPS = BENCH / "apps"

HARNESS_REQUIREMENTS = ("numpy>=1.24", "matplotlib>=3.7")


@dataclass(frozen=True)
class Spec:
    name: str
    env: str
    requirements: tuple[str, ...]
    app: str
    extra_ports: tuple[str, ...] = ()
    imports: str = ""
    distributions: tuple[str, ...] = ()
    # Triton's Python-backend stub links libpython by soname; point it at the venv's own interpreter.
    needs_libpython_path: bool = False


# W9 serves the same model files everywhere: a joblib pickle loads only under the scikit-learn that wrote it,
# so every environment that loads or trains one gets the same release (the one mlserver-sklearn 1.7.1 resolves).
MODEL_FILE_PINS = ("scikit-learn==1.9.1", "xgboost==3.2.0", "onnxruntime==1.32.0")
# skl2onnx exports W9's MLP; the files are trained in this environment (bench/w9_files.py).
OURS_REQUIREMENTS = (f"-e {ROOT}[examples,onnx,sklearn]", "uvloop", "httptools", "skl2onnx", *MODEL_FILE_PINS)
UVICORN_STACK = ("starlette", "uvicorn", "uvloop", "httptools")
MODEL_FILE_LIBRARIES = ("scikit-learn", "xgboost", "xgboost-cpu", "onnxruntime")
SPECS = {
    "ours": Spec(
        name="ours",
        env="ours",
        requirements=OURS_REQUIREMENTS,
        app="ours_app.py",
        imports="import oip_asgi",
        distributions=("oip-asgi", "msgspec", "orjson", "pysimdjson", "numpy", *UVICORN_STACK, *MODEL_FILE_LIBRARIES),
    ),
    "floor": Spec(
        name="floor",
        env="ours",
        requirements=OURS_REQUIREMENTS,
        app="floor_app.py",
        # The floor's import time is the baseline of the W5 import target.
        imports="import msgspec, numpy, starlette",
        distributions=UVICORN_STACK,
    ),
    # ours at another commit (`--base DIR`, a checkout of it): a change measured against the code before it.
    "base": Spec(
        name="base",
        env="ours",
        requirements=OURS_REQUIREMENTS,
        app="ours_app.py",
        imports="import oip_asgi",
        distributions=("oip-asgi", "msgspec", "orjson", "pysimdjson", "numpy", *UVICORN_STACK),
    ),
    "mlserver": Spec(
        name="mlserver",
        env="mlserver",
        requirements=("mlserver==1.7.1", "mlserver-sklearn==1.7.1", "mlserver-xgboost==1.7.1", *MODEL_FILE_PINS[:2]),
        app="mlserver_app.py",
        extra_ports=("--grpc-port", "--metrics-port"),
        imports="import mlserver",
        distributions=(
            "mlserver",
            "mlserver-sklearn",
            "mlserver-xgboost",
            "fastapi",
            "numpy",
            *UVICORN_STACK,
            *MODEL_FILE_LIBRARIES,
        ),
    ),
    "kserve": Spec(
        name="kserve",
        env="kserve",
        requirements=("kserve==0.21.0",),
        app="kserve_app.py",
        extra_ports=("--grpc-port",),
        imports="import kserve",
        distributions=("kserve", "fastapi", "numpy", *UVICORN_STACK),
    ),
    "pytriton": Spec(
        name="pytriton",
        env="pytriton",
        requirements=("nvidia-pytriton==0.7.0", MODEL_FILE_PINS[2]),
        app="pytriton_app.py",
        extra_ports=("--grpc-port", "--metrics-port"),
        imports="import pytriton.triton",
        distributions=("nvidia-pytriton", "tritonclient", "numpy", "onnxruntime"),
        needs_libpython_path=True,
    ),
}
ORDER = ("floor", "ours", "base", "mlserver", "kserve", "pytriton")


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


def import_seconds(python: Path, statement: str, repeat: int) -> list[float]:
    """Wall time of `statement` in fresh interpreters (bytecode caches already warm)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    times = []
    for _ in range(repeat):
        done = subprocess.run(
            ["taskset", "-c", "0", str(python), "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"`{statement}` failed: {done.stderr.strip()[-300:]}")
        times.append(float(done.stdout.strip()))
    return times
