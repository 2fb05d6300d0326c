"""Worker processes under gunicorn: each worker loads its models once and the parent loads none,
with uvicorn's worker class (gunicorn importing the app in each worker, or once in the parent
before forking with --preload) and with Flask on gunicorn's forking sync workers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ._servers import HOST, free_port, serving

pytest.importorskip("gunicorn")
pytest.importorskip("uvicorn_worker")


def events(path: Path, kind: str) -> list[int]:
    lines = path.read_text().split("\n") if path.exists() else []
    return [int(line.split()[1]) for line in lines if line.startswith(kind + " ")]


@pytest.mark.parametrize("preload", [False, True], ids=["import-in-workers", "preload"])
def test_gunicorn_workers_each_load_once(tmp_path: Path, preload: bool) -> None:
    log = tmp_path / "events"
    port = free_port()
    argv = ["-m", "gunicorn", "--workers", "2", "--worker-class", "uvicorn_worker.UvicornWorker"]
    argv += ["--bind", f"{HOST}:{port}", *(["--preload"] if preload else []), "tests.apps_cli:app"]
    with serving(argv, port, ready_path="/health/ready", env={"OIP_TEST_EVENTS": str(log)}) as server:
        deadline = time.monotonic() + 20
        while len(events(log, "load")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        loads = events(log, "load")
        # The sync load ran on each worker's own threads: after a fork, the pool starts afresh.
        assert len(loads) == len(set(loads)) == 2 and server.pid not in loads
        imports = events(log, "import")
        assert imports == [server.pid] if preload else sorted(imports) == sorted(loads)
    assert server.process.returncode == 0


def test_flask_under_gunicorn_sync_workers_loads_once_per_worker(tmp_path: Path) -> None:
    pytest.importorskip("flask")
    log = tmp_path / "events"
    port = free_port()
    argv = ["-m", "gunicorn", "--workers", "2", "--bind", f"{HOST}:{port}", "tests.apps_wsgi:app"]
    with serving(argv, port, env={"OIP_TEST_EVENTS": str(log)}) as server:
        deadline = time.monotonic() + 20
        while len(events(log, "load")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        loads = events(log, "load")
        assert len(loads) == len(set(loads)) == 2 and server.pid not in loads
        assert sorted(events(log, "import")) == sorted(loads)
    assert server.process.returncode == 0
