"""Worker processes under gunicorn: each worker loads its models once and the parent loads none,
with uvicorn's worker class (gunicorn importing the app in each worker, or once in the parent
before forking with --preload) and with Flask on gunicorn's forking sync workers."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.apps.cli import recorded
from tests.support.servers import HOST, free_port, serving
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

pytest.importorskip("gunicorn")
pytest.importorskip("uvicorn_worker")


@pytest.mark.parametrize("preload", [False, True], ids=["import-in-workers", "preload"])
def test_gunicorn_workers_each_load_once(tmp_path: Path, preload: bool) -> None:
    log = tmp_path / "events"
    port = free_port()
    argv = ["-m", "gunicorn", "--workers", "2", "--worker-class", "uvicorn_worker.UvicornWorker"]
    argv += ["--bind", f"{HOST}:{port}", *(["--preload"] if preload else []), "tests.apps.cli:app"]
    with serving(argv, port, ready_path="/health/ready", env={"OIP_TEST_EVENTS": str(log)}) as server:
        wait_until(lambda: len(recorded(log, "load")) >= 2, "both workers loaded")
        loads = recorded(log, "load")
        # The sync load ran on each worker's own threads: after a fork, the pool starts afresh.
        assert len(loads) == len(set(loads)) == 2 and server.pid not in loads
        imports = recorded(log, "import")
        assert imports == [server.pid] if preload else sorted(imports) == sorted(loads)
    assert server.process.returncode == 0


@pytest.mark.parametrize("preload", [False, True], ids=["import-in-workers", "preload"])
def test_flask_under_gunicorn_sync_workers(tmp_path: Path, preload: bool) -> None:
    pytest.importorskip("flask")
    log = tmp_path / "events"
    port = free_port()
    argv = ["-m", "gunicorn", "--workers", "2", "--bind", f"{HOST}:{port}", *(["--preload"] if preload else [])]
    with serving([*argv, "tests.apps.wsgi:app"], port, env={"OIP_TEST_EVENTS": str(log)}) as server:
        if preload:  # loaded once, in the parent, at import; the workers inherit the loaded models
            assert recorded(log, "import") == recorded(log, "load") == [server.pid]
        else:
            wait_until(lambda: len(recorded(log, "load")) >= 2, "both workers loaded")
            loads = recorded(log, "load")
            assert len(loads) == len(set(loads)) == 2 and server.pid not in loads
            assert sorted(recorded(log, "import")) == sorted(loads)
        # A worker serves inference on the models it has, after the fork.
        request = json.dumps({"inputs": [{"name": "X", "datatype": "INT64", "shape": [1], "data": [0]}]}).encode()
        with urllib.request.urlopen(f"http://{server.address}/v2/models/pid/infer", data=request, timeout=30) as answer:
            assert json.load(answer)["outputs"][0]["data"][0] != server.pid
    assert server.process.returncode == 0
