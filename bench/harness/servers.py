"""The servers under test: what each is (its environment, app, ports and readiness), and one started for a block."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import envs, procs

UVICORN_STACK = ("starlette", "uvicorn", "uvloop", "httptools")
MODEL_FILE_LIBRARIES = ("scikit-learn", "xgboost", "xgboost-cpu", "onnxruntime")
V2_READY = ("/v2/health/ready",)
IDENTITY_READY = (*V2_READY, "/v2/models/identity_bytes/ready")


class NotReady(Exception):
    """The server exited or did not answer its readiness paths in time; the message ends with its log's tail."""


@dataclass(frozen=True)
class Peer:
    env: str  # its virtual environment, bench/.peers/<env>
    requirements: tuple[str, ...]
    app: str  # under bench/apps/, started as `python APP --port N` plus `ports`
    ports: tuple[str, ...] = ()  # flags beside --port, each given a free port
    ready: tuple[str, ...] = V2_READY
    # Triton's Python-backend stub links libpython by soname; point it at the venv's own interpreter.
    libpython: bool = False
    environment: tuple[tuple[str, str], ...] = ()  # variables it starts with
    imports: str = ""  # W5's import time
    distributions: tuple[str, ...] = ()  # whose versions the results record


OURS_DISTRIBUTIONS = ("oip-asgi", "msgspec", "orjson", "pysimdjson", "numpy", *UVICORN_STACK)
# The REST workloads' servers (W1-W9); the others' are these with another app (dataclasses.replace).
PEERS = {
    "floor": Peer(
        "ours",
        envs.OURS_REQUIREMENTS,
        "floor_app.py",
        ready=(*V2_READY, "/v2/models/fixed/ready"),
        # The floor's import time is the baseline of the W5 import target.
        imports="import msgspec, numpy, starlette",
        distributions=UVICORN_STACK,
    ),
    "ours": Peer(
        "ours",
        envs.OURS_REQUIREMENTS,
        "ours_app.py",
        ready=IDENTITY_READY,
        imports="import oip_asgi",
        distributions=(*OURS_DISTRIBUTIONS, *MODEL_FILE_LIBRARIES),
    ),
    # ours mounted in a Starlette host whose own (pass-through) middleware our routes go through (`--host mounted`).
    "mounted": Peer(
        "ours",
        envs.OURS_REQUIREMENTS,
        "ours_app.py",
        ready=IDENTITY_READY,
        imports="import oip_asgi",
        distributions=OURS_DISTRIBUTIONS,
    ),
    # ours at another commit (`--base DIR`, a checkout of it): a change measured against the code before it.
    "base": Peer(
        "ours",
        envs.OURS_REQUIREMENTS,
        "ours_app.py",
        ready=IDENTITY_READY,
        imports="import oip_asgi",
        distributions=OURS_DISTRIBUTIONS,
    ),
    "mlserver": Peer(
        "mlserver",
        ("mlserver==1.7.1", "mlserver-sklearn==1.7.1", "mlserver-xgboost==1.7.1", *envs.MODEL_FILE_PINS[:2]),
        "mlserver_app.py",
        ("--grpc-port", "--metrics-port"),
        ready=IDENTITY_READY,
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
    ),  # fmt: skip
    "kserve": Peer(
        "kserve",
        ("kserve==0.21.0",),
        "kserve_app.py",
        ("--grpc-port",),
        ready=IDENTITY_READY,
        imports="import kserve",
        distributions=("kserve", "fastapi", "numpy", *UVICORN_STACK),
    ),
    "pytriton": Peer(
        "pytriton",
        ("nvidia-pytriton==0.7.0", envs.MODEL_FILE_PINS[2]),
        "pytriton_app.py",
        ("--grpc-port", "--metrics-port"),
        ready=IDENTITY_READY,
        libpython=True,
        imports="import pytriton.triton",
        distributions=("nvidia-pytriton", "tritonclient", "numpy", "onnxruntime"),
    ),
}
ORDER = tuple(PEERS)


def install(peers: Mapping[str, Peer]) -> tuple[dict[str, Path], dict[str, str]]:
    """Each peer's environment set up (or reused): its interpreter, or why it could not be installed."""
    pythons: dict[str, Path] = {}
    failures: dict[str, str] = {}
    for name, peer in peers.items():
        reason = envs.ensure_env(peer.env, peer.requirements)
        if reason:
            failures[name] = f"cannot install: {reason}"
        else:
            pythons[name] = envs.venv_python(peer.env)
    return pythons, failures


def environment(peer: Peer, python: Path, pythonpath: Path | None = None) -> dict[str, str]:
    """The variables a peer starts with; `pythonpath`: a checkout of oip-asgi ahead of the installed one."""
    env = dict(peer.environment)
    if peer.libpython:
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [envs.libpython_dir(python), os.environ.get("LD_LIBRARY_PATH")]))
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def app_server(
    name: str, peer: Peer, python: Path, log: Path, args: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> procs.Server:
    """A peer's app, on free ports, not started yet."""
    ports = {"--port": procs.free_port(), **{flag: procs.free_port() for flag in peer.ports}}
    command = [str(python), str(envs.APPS / peer.app)]
    for flag, port in ports.items():
        command += [flag, str(port)]
    return procs.Server(
        name,
        [*command, *args],
        ports["--port"],
        log,
        {**environment(peer, python), **(env or {})},
        ports=ports,
        ready=peer.ready,
    )


@contextlib.contextmanager
def running(server: procs.Server, seconds: float = 180) -> Iterator[procs.Server]:
    """The server started pinned to the server core, ready on each of its paths, and stopped after the block."""
    server.start(procs.SERVER_CORE)
    try:
        deadline = time.perf_counter() + seconds
        try:
            for path in server.ready:
                server.wait_until(path, deadline)
        except (RuntimeError, TimeoutError) as exc:
            raise NotReady(f"did not become ready: {exc} (log: {server.log_path}: {server.log_tail()})") from exc
        yield server
    finally:
        server.stop()
