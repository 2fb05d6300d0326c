"""A model repository served while it changes: the repository extension's index, load and unload
on REST, the model-control modes, failed loads, reloads, and what a request meets meanwhile."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from oip_asgi import ModelRepository, oip_app
from oip_asgi._core.control import LOAD_SWITCH_INTERVAL
from oip_asgi._hosts.cli.target import load_target
from tests.support.client import client

pytestmark = pytest.mark.anyio

BODY = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}]}


def write_model(root: Path, name: str, version: str = "1", *, adds: int = 1, body: str | None = None) -> Path:
    """A model folder whose version `version` is a model.py adding `adds` to its input."""
    folder = root / name / version
    folder.mkdir(parents=True, exist_ok=True)
    source = (
        body
        or f"""
        from oip_asgi import Model, TensorSpec

        def predict(x):
            return x + {adds}

        model = Model(predict, inputs=[TensorSpec("x", "INT32", [-1])], outputs=[TensorSpec("y", "INT32", [-1])])
    """
    )
    (folder / "model.py").write_text(textwrap.dedent(source))
    return folder


def broken_model(root: Path, name: str, version: str = "1") -> Path:
    return write_model(root, name, version, body="raise RuntimeError('weights missing')\n")


async def infer(http: Any, name: str) -> tuple[int, Any]:
    response = await http.post(f"/models/{name}/infer", json=BODY)
    body = response.json()
    return response.status_code, body["outputs"][0]["data"] if response.status_code == 200 else body["error"]


async def index(http: Any, **body: Any) -> list[dict[str, str]]:
    response = await http.post("/repository/index", json=body)
    assert response.status_code == 200, response.text
    rows: list[dict[str, str]] = response.json()
    return rows


async def test_explicit_mode_loads_what_it_is_asked_and_the_index_follows(tmp_path: Path) -> None:
    write_model(tmp_path, "a", adds=1)
    write_model(tmp_path, "b", adds=2)
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    async with client(app) as http:
        await app.load()
        assert await index(http) == [{"name": "a"}, {"name": "b"}]  # nothing loaded: the names alone
        assert (await http.get("/health/ready")).json() == {"ready": True}
        assert (await http.post("/repository/models/a/load")).status_code == 200
        assert await infer(http, "a") == (200, [2, 3])
        assert await index(http) == [{"name": "a", "version": "1", "state": "READY", "reason": ""}, {"name": "b"}]
        assert await index(http, ready=True) == [{"name": "a", "version": "1", "state": "READY", "reason": ""}]
        listed = set((await http.get("/")).json()["extensions"])
        assert {"model_repository", "model_repository(unload_dependents)"} <= listed

        assert (await http.post("/repository/models/a/unload")).status_code == 200
        assert (await index(http))[0] == {"name": "a", "state": "UNAVAILABLE", "reason": "unloaded"}
        status, error = await infer(http, "a")
        assert (status, error) == (
            404,
            "Request for unknown model: 'a' has no available versions; it is UNAVAILABLE: unloaded",
        )

        response = await http.post("/repository/models/nope/load")
        assert response.status_code == 400 and response.json()["error"].startswith("failed to load 'nope': ")


async def test_explicit_mode_loads_the_models_named_at_start(tmp_path: Path) -> None:
    write_model(tmp_path, "a")
    write_model(tmp_path, "b")
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit", load_models=["b"]))
    async with client(app) as http:
        await app.load()
        assert [row.get("state") for row in await index(http)] == [None, "READY"]
    everything = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit", load_models=["*"]))
    async with client(everything) as http:
        await everything.load()
        assert [row.get("state") for row in await index(http)] == ["READY", "READY"]


async def test_mode_none_loads_everything_and_refuses_load_and_unload_in_tritons_words(tmp_path: Path) -> None:
    write_model(tmp_path, "a")
    app = oip_app(model_repository=tmp_path)
    async with client(app) as http:
        await app.load()
        assert await infer(http, "a") == (200, [2, 3])
        for action in ("load", "unload"):
            response = await http.post(f"/repository/models/a/{action}")
            assert response.status_code == 503
            assert response.json()["error"].startswith(
                "explicit model load / unload is not allowed if polling is enabled"
            )


async def test_a_failed_load_is_unavailable_with_its_reason_and_a_served_version_goes_on(tmp_path: Path) -> None:
    write_model(tmp_path, "a", adds=1)
    broken_model(tmp_path, "broken")
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit", load_models=["*"]))
    async with client(app) as http:
        await app.load()
        rows = {row["name"]: row for row in await index(http)}
        assert rows["broken"]["state"] == "UNAVAILABLE" and "weights missing" in rows["broken"]["reason"]
        assert (await http.get("/health/ready")).json() == {"ready": False}  # a model failed to load
        status, error = await infer(http, "broken")  # the server's fault, not the client's: 503 with why
        assert status == 503 and error.startswith("model 'broken' failed to load; it is UNAVAILABLE: ")
        assert "weights missing" in error
        assert (await http.get("/models/broken/ready")).status_code == 400  # not ready, not unknown
        assert await infer(http, "a") == (200, [2, 3])  # the others serve

        broken_model(tmp_path, "a", "2")  # a new version that fails: version 1 goes on serving
        response = await http.post("/repository/models/a/load")
        assert response.status_code == 400 and response.json()["error"].startswith("failed to load 'a': ")
        assert "weights missing" in response.json()["error"]
        assert await infer(http, "a") == (200, [2, 3])
        assert [row["state"] for row in await index(http) if row["name"] == "a"] == ["READY"]


async def test_a_load_with_a_config_override_answers_that_config(tmp_path: Path) -> None:
    write_model(tmp_path, "a", "1", adds=1)
    write_model(tmp_path, "a", "2", adds=2)
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    config = {"name": "a", "backend": "python", "version_policy": {"specific": {"versions": [1]}}}
    async with client(app) as http:
        await app.load()
        response = await http.post("/repository/models/a/load", json={"parameters": {"config": json.dumps(config)}})
        assert response.status_code == 200, response.text
        assert (await http.get("/models/a")).json()["versions"] == ["1"]
        assert (await http.get("/models/a/config")).json()["version_policy"] == {"specific": {"versions": [1]}}
        response = await http.post("/repository/models/a/load", json={"parameters": {"config": "{not json"}})
        assert response.status_code == 400 and "parameter config is not JSON" in response.json()["error"]


async def test_poll_mode_follows_the_directory(tmp_path: Path) -> None:
    write_model(tmp_path, "a", adds=1)
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="poll", repository_poll_secs=3600))
    control = app.core.control
    assert control is not None
    async with client(app) as http:
        await app.load()
        assert await infer(http, "a") == (200, [2, 3])
        write_model(tmp_path, "b", adds=5)  # added
        write_model(tmp_path, "a", adds=10)  # changed
        (tmp_path / "a" / "1" / "model.py").touch()
        await control.poll_once()
        assert await infer(http, "b") == (200, [6, 7])
        assert await infer(http, "a") == (200, [11, 12])
        for path in sorted((tmp_path / "b").rglob("*"), reverse=True):  # removed
            path.unlink() if path.is_file() else path.rmdir()
        (tmp_path / "b").rmdir()
        await control.poll_once()
        assert [row["name"] for row in await index(http)] == ["a"]
        assert (await infer(http, "b"))[0] == 404
        response = await http.post("/repository/models/a/unload")
        assert response.status_code == 503  # poll mode takes no explicit load or unload


async def test_names_that_leave_the_repository_are_refused(tmp_path: Path) -> None:
    repository = tmp_path / "repository"
    write_model(repository, "a")
    write_model(tmp_path, "outside")
    (repository / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    app = oip_app(model_repository=ModelRepository(repository, model_control_mode="explicit"))
    async with client(app) as http:
        await app.load()
        for name in ("..", "link", "%2E%2E", "..%2Foutside"):
            response = await http.post(f"/repository/models/{name}/load")
            assert response.status_code in (400, 404), (name, response.text)
        assert [row["name"] for row in await index(http)] == ["a"]
        assert (await infer(http, "outside"))[0] == 404


async def test_load_and_unload_of_one_model_under_concurrent_requests_fail_none(tmp_path: Path) -> None:
    write_model(tmp_path, "a", adds=1)
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit", load_models=["a"]))
    answers: list[tuple[int, Any]] = []
    stop = asyncio.Event()

    async def keep_asking(http: Any) -> None:
        while not stop.is_set():
            answers.append(await infer(http, "a"))

    async with client(app) as http:
        await app.load()
        clients = [asyncio.ensure_future(keep_asking(http)) for _ in range(6)]
        for adds in range(2, 8):
            write_model(tmp_path, "a", adds=adds)
            assert (await http.post("/repository/models/a/load")).status_code == 200
            await asyncio.sleep(0.005)
        stop.set()
        await asyncio.gather(*clients)
    assert {status for status, _ in answers} == {200}
    assert all(data in ([1 + adds, 2 + adds] for adds in range(1, 8)) for _, data in answers)


async def test_a_hundred_load_and_unload_cycles_leave_no_thread_behind(tmp_path: Path) -> None:
    write_model(tmp_path, "a")
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    async with client(app) as http:
        await app.load()
        assert (await http.post("/repository/models/a/load")).status_code == 200
        assert await infer(http, "a") == (200, [2, 3])
        threads = threading.active_count()
        for _ in range(100):
            assert (await http.post("/repository/models/a/unload")).status_code == 200
            assert (await http.post("/repository/models/a/load")).status_code == 200
            assert await infer(http, "a") == (200, [2, 3])
        # A thread kept per cycle would be 100 more. A few are honest: a thread pool starts another when the
        # next job comes before the last one's thread is idle again, which the machine's load decides.
        assert threading.active_count() - threads < 8
        assert len(app.core.served.all()) == 1


async def test_loads_shorten_the_gil_switch_interval_while_they_run(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    write_model(
        tmp_path,
        "a",
        body=f"""
        import sys
        from pathlib import Path

        Path({str(seen)!r}).write_text(str(sys.getswitchinterval()))
        model = lambda x: x
    """,
    )
    before = sys.getswitchinterval()
    repository = ModelRepository(tmp_path, model_control_mode="explicit")
    app = oip_app(model_repository=repository, load_switch_interval=LOAD_SWITCH_INTERVAL)  # as the serve command
    async with client(app) as http:
        assert (await http.post("/repository/models/a/load")).status_code == 200
    # The event loop gets the GIL back sooner from a load computing in Python; then the interval is as it was.
    assert float(seen.read_text()) == min(before, LOAD_SWITCH_INTERVAL)
    assert sys.getswitchinterval() == before


async def test_an_app_leaves_the_switch_interval_alone_unless_told(tmp_path: Path) -> None:
    """Mounted in a host's process, the app does not own the interval: only the serve command passes one."""
    seen = tmp_path / "seen"
    write_model(
        tmp_path,
        "a",
        body=f"""
        import sys
        from pathlib import Path

        Path({str(seen)!r}).write_text(str(sys.getswitchinterval()))
        model = lambda x: x
    """,
    )
    before = sys.getswitchinterval()
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    async with client(app) as http:
        assert (await http.post("/repository/models/a/load")).status_code == 200
    assert float(seen.read_text()) == before
    served = load_target(None, repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    assert served.core.control is not None and served.core.control.load_switch_interval == LOAD_SWITCH_INTERVAL


async def test_file_overrides_write_only_where_allowed_and_only_inside_the_models_folder(tmp_path: Path) -> None:
    write_model(tmp_path, "a", adds=1)
    code = base64.b64encode(b"def model(x):\n    return {'y': x + 100}\n").decode()
    config = json.dumps({"name": "a", "backend": "python"})
    load = {"parameters": {"config": config, "file:1/model.py": code}}
    off = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    async with client(off) as http:
        response = await http.post("/repository/models/a/load", json=load)
        assert response.status_code == 500  # Triton's answer, which its clients check: INTERNAL, these words
        assert response.json()["error"].startswith("failed to load 'a': failed to poll from model repository: ")
    on = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit", allow_file_overrides=True))
    async with client(on) as http:
        assert (await http.post("/repository/models/a/load", json=load)).status_code == 200
        assert await infer(http, "a") == (200, [101, 102])
        for escape in ("file:../b/1/model.py", "file:/tmp/model.py", "file:1/../../b.py"):
            response = await http.post(
                "/repository/models/a/load", json={"parameters": {"config": config, escape: code}}
            )
            assert response.status_code == 500 and "failed to poll from model repository" in response.text, escape
        assert not (tmp_path / "b").exists() and not (tmp_path / "b.py").exists()
        assert await infer(http, "a") == (200, [101, 102])  # still the version that loaded


async def test_a_server_without_a_repository_says_so() -> None:
    app = oip_app({})
    async with client(app) as http:
        response = await http.post("/repository/index")
        assert response.status_code == 404 and "serves no model repository" in response.json()["error"]
        listed = set((await http.get("/")).json()["extensions"])
        assert not {"model_repository", "model_repository(unload_dependents)"} & listed


async def test_a_repository_is_mounted_in_starlette_django_and_flask_like_any_models(tmp_path: Path) -> None:
    from starlette.applications import Starlette

    import oip_asgi
    from oip_asgi_django import OIPDispatcher

    write_model(tmp_path, "a", adds=1)
    host = Starlette()
    oip_asgi.mount(host, oip_app(model_repository=tmp_path), path="/v2")
    django_like = OIPDispatcher(Starlette(), oip_app(model_repository=tmp_path), prefix="/v2")
    for app in (host, django_like):
        async with client(app) as http:
            response = await http.post("/v2/models/a/infer", json=BODY)  # loads on first use
            assert response.json()["outputs"][0]["data"] == [2, 3]
            assert (await http.post("/v2/repository/index")).json()[0]["state"] == "READY"


def test_a_repository_is_served_from_flask(tmp_path: Path) -> None:
    flask = pytest.importorskip("flask")
    from oip_asgi_flask import OIP

    write_model(tmp_path, "a", adds=1)
    app = flask.Flask(__name__)
    OIP(app, models=oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit")))
    http = app.test_client()
    assert http.post("/v2/repository/index").json == [{"name": "a"}]
    assert http.post("/v2/repository/models/a/load").status_code == 200
    assert http.post("/v2/models/a/infer", json=BODY).json["outputs"][0]["data"] == [2, 3]
