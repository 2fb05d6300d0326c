"""One owner of a model's life: the states of names and versions and the transitions between them, the
per-name locks, the `unload` step, a repository model's module leaving `sys.modules`, and the faults
(a repository folder named as a model from code; a repository model whose load failed)."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oip_asgi import Model, ModelNotReady, ModelRepository, oip_app
from oip_asgi._core.locks import NameLocks
from oip_asgi._core.served import SERVING, TRANSITIONS, Cause, IllegalTransition, ServedModels
from oip_asgi._core.server import ServerCore, _together
from oip_asgi._core.serving import VERSION_TRANSITIONS, ServedModel, State
from oip_asgi._core.workers import WorkerPool
from tests.core.test_core import BODY, SPECS, adding
from tests.core.test_repository import broken_model, index, infer, write_model
from tests.support.client import client
from tests.support.waiting import HANG, until

pytestmark = pytest.mark.anyio

MODULE = "oip_asgi_repository.a.1"


# -- the state machine -------------------------------------------------------------------------------------------


def served_version(name: str = "m", **options: Any) -> ServedModel:
    return ServedModel(name, adding(1, **options), WorkerPool(1))


# How to bring a name to each condition, from nothing, through legal steps only.
_SETUPS: dict[Cause | str | None, Callable[[ServedModels], None]] = {
    None: lambda served: None,
    Cause.LOADING: lambda served: served.loading("m"),
    SERVING: lambda served: served.put("m", [served_version()]) and None,
    Cause.UNLOADING: lambda served: (served.put("m", [served_version()]), served.unloading("m")) and None,
    Cause.FAILED: lambda served: served.load_failed("m", "weights missing"),
    Cause.UNLOADED: lambda served: served.unloaded("m"),
}
# Each change, and the condition it leads to.
_CHANGES: dict[str, tuple[Callable[[ServedModels], Any], Cause | str | None]] = {
    "loading": (lambda served: served.loading("m"), Cause.LOADING),
    "put": (lambda served: served.put("m", [served_version()]), SERVING),
    "load_failed": (lambda served: served.load_failed("m", "no luck"), Cause.FAILED),
    "unloading": (lambda served: served.unloading("m"), Cause.UNLOADING),
    "unloaded": (lambda served: served.unloaded("m"), Cause.UNLOADED),
    "forget": (lambda served: served.forget("m"), None),
    "pop": (lambda served: served.pop("m"), None),
}


def condition(served: ServedModels) -> Cause | str | None:
    if "m" in served:
        return SERVING
    record = served.not_served("m")
    return None if record is None else record.cause


@pytest.mark.parametrize("start", list(_SETUPS), ids=str)
@pytest.mark.parametrize("change", list(_CHANGES))
def test_a_name_changes_only_along_the_transition_table(start: Cause | str | None, change: str) -> None:
    served = ServedModels()
    _SETUPS[start](served)
    assert condition(served) == start
    do, becomes = _CHANGES[change]
    # What a change leaves alone, on purpose: a reload's start or failure while a name serves, forgetting no record.
    unchanged = (start == SERVING and change in ("loading", "load_failed")) or (start is None and change == "forget")
    # pop takes a name that serves, forget one that has a record; the others follow the table.
    legal = {"pop": start == SERVING, "forget": start != SERVING and None in TRANSITIONS[start]}.get(
        change, becomes in TRANSITIONS[start]
    )
    if unchanged:
        do(served)
        assert condition(served) == start
    elif legal:
        do(served)
        assert condition(served) == becomes
    else:
        with pytest.raises(IllegalTransition, match="model 'm' cannot"):
            do(served)
        assert condition(served) == start  # a refused change changes nothing


def test_a_name_record_tells_the_index_state_and_why() -> None:
    served = ServedModels()
    served.load_failed("m", "weights missing")
    record = served.not_served("m")
    assert record is not None and (record.state, record.reason) == ("UNAVAILABLE", "weights missing")
    assert served.failed() == {"m": record}
    served.loading("m")
    assert served.not_served("m") is not None and served.not_served("m").state == "LOADING"  # type: ignore[union-attr]
    assert served.failed() == {}


@pytest.mark.parametrize("start", list(VERSION_TRANSITIONS))
@pytest.mark.parametrize("becoming", list(VERSION_TRANSITIONS))
def test_a_version_changes_only_along_its_transition_table(start: State, becoming: State) -> None:
    version = served_version()
    version.state = start
    if becoming in VERSION_TRANSITIONS[start]:
        version._become(becoming, "why")
        assert (version.state, version.reason) == (becoming, "why")
    else:
        with pytest.raises(RuntimeError, match=f"cannot go from {start} to {becoming}"):
            version._become(becoming)
        assert version.state == start


async def test_a_version_walks_loading_ready_unloading_unavailable() -> None:
    seen: list[str] = []
    version = served_version(load=lambda: seen.append("loaded"))
    assert version.state == "LOADING"
    await version.ensure_ready()
    assert (version.state, seen) == ("READY", ["loaded"])
    version.hold()
    unloading = asyncio.ensure_future(version.unload())
    await until(lambda: version.state == "UNLOADING")
    version.release()
    await unloading
    assert (version.state, version.reason) == ("UNAVAILABLE", "unloaded")


async def test_the_index_readiness_and_errors_read_one_record(tmp_path: Path) -> None:
    broken_model(tmp_path, "a")
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit", load_models=["a"]))
    served = app.core.served
    async with client(app) as http:
        await app.load()
        assert list(served.failed()) == ["a"] and not app.core.ready
        assert [(row["state"], "weights missing" in row["reason"]) for row in await index(http)] == [
            ("UNAVAILABLE", True)
        ]
        assert (await infer(http, "a"))[0] == 503
        write_model(tmp_path, "a", adds=1)  # fixed
        assert (await http.post("/repository/models/a/load")).status_code == 200
        assert served.not_served("a") is None and app.core.ready
        assert await index(http) == [{"name": "a", "version": "1", "state": "READY", "reason": ""}]
        assert (await http.post("/repository/models/a/unload")).status_code == 200
        record = served.not_served("a")
        assert record is not None and record.cause is Cause.UNLOADED and app.core.ready  # unloaded is no fault
        status, error = await infer(http, "a")
        assert (status, error) == (
            404,
            "Request for unknown model: 'a' has no available versions; it is UNAVAILABLE: unloaded",
        )
        assert (await http.get("/models/a/ready")).status_code == 404


# -- the per-name locks ------------------------------------------------------------------------------------------


async def test_a_names_lock_serialises_it_lets_others_run_and_its_holder_take_it_again() -> None:
    locks = NameLocks()
    order: list[str] = []
    inside = asyncio.Event()
    release = asyncio.Event()

    async def hold(name: str, tag: str) -> None:
        async with locks.hold(name):
            order.append(f"{tag} in")
            inside.set()
            async with locks.hold(name):  # the holder takes it again without waiting on itself
                await release.wait()
            order.append(f"{tag} out")

    first = asyncio.ensure_future(hold("a", "a1"))
    await inside.wait()
    second = asyncio.ensure_future(hold("a", "a2"))
    other = asyncio.ensure_future(hold("b", "b1"))
    await until(lambda: "b1 in" in order)
    assert "a2 in" not in order and len(locks) == 2  # b runs beside a; a's second holder waits
    release.set()
    await asyncio.gather(first, second, other)
    assert order.index("a1 out") < order.index("a2 in")
    assert len(locks) == 0


async def test_the_loads_run_together_and_the_first_failure_cancels_the_others_before_it_is_raised() -> None:
    # `ServerCore.load` runs its models' loads with asyncio's tasks alone (no anyio backend at start-up), as
    # a task group would: at once, and a failure cancels the others, which have finished when it is raised.
    waiting_started, left = asyncio.Event(), []

    async def waits() -> None:
        waiting_started.set()
        try:
            await asyncio.Event().wait()  # never set: only the cancellation ends it
        finally:
            left.append("cancelled")

    async def fails() -> None:
        await waiting_started.wait()  # the other is running: they run together
        raise RuntimeError("this load broke")

    with pytest.raises(RuntimeError, match="this load broke"):
        await asyncio.wait_for(_together([waits(), fails()]), HANG)
    assert left == ["cancelled"]
    await _together([])  # no models: nothing to run


async def test_a_thousand_names_put_and_removed_leave_no_lock_behind() -> None:
    core = ServerCore({})

    async def come_and_go(number: int) -> None:
        await core.put_model(f"m{number}", adding(number))
        await core.remove_model(f"m{number}")

    for start in range(0, 1000, 100):
        await asyncio.gather(*(come_and_go(number) for number in range(start, start + 100)))
    assert len(core.served.locks) == 0 and core.served.names() == [] and core.served.unserved() == {}


async def test_repository_names_loaded_and_unloaded_leave_no_lock_behind(tmp_path: Path) -> None:
    for number in range(30):
        write_model(tmp_path, f"m{number}")
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    async with client(app) as http:
        await app.load()
        for action in ("load", "unload"):
            answers = await asyncio.gather(*(http.post(f"/repository/models/m{n}/{action}") for n in range(30)))
            assert {answer.status_code for answer in answers} == {200}
    assert len(app.core.served.locks) == 0


# -- the unload step ---------------------------------------------------------------------------------------------


def held_model(release: asyncio.Event, entered: asyncio.Event, **options: Any) -> Model:
    async def held(x: np.ndarray) -> np.ndarray:
        entered.set()
        await release.wait()
        return x + 1

    return Model(held, **SPECS, **options)


async def test_a_sync_unload_runs_once_off_the_loop_after_the_last_request_on_a_reload() -> None:
    threads: list[threading.Thread] = []
    entered, release = asyncio.Event(), asyncio.Event()
    app = oip_app({"m": held_model(release, entered, unload=lambda: threads.append(threading.current_thread()))})
    async with client(app) as http:
        in_flight = asyncio.ensure_future(http.post("/models/m/infer", json=BODY))
        await entered.wait()
        old = app.core.served.get("m")
        reloading = asyncio.ensure_future(app.core.put_model("m", adding(100)))
        await until(lambda: old.state == "UNLOADING")
        assert threads == []  # a request still holds the old version
        release.set()
        assert (await in_flight).status_code == 200
        await reloading
        assert len(threads) == 1 and threads[0] is not threading.main_thread()
        await app.core.put_model("m", adding(200))  # the new version had no unload step: nothing more runs
        assert len(threads) == 1


async def test_an_async_unload_runs_once_on_removal_after_the_last_request() -> None:
    unloaded: list[str] = []
    entered, release = asyncio.Event(), asyncio.Event()

    async def unload() -> None:
        unloaded.append("m")

    app = oip_app({"m": held_model(release, entered, unload=unload)})
    async with client(app) as http:
        in_flight = asyncio.ensure_future(http.post("/models/m/infer", json=BODY))
        await entered.wait()
        model = app.core.served.get("m")
        removing = asyncio.ensure_future(app.core.remove_model("m"))
        await until(lambda: model.state == "UNLOADING")
        assert unloaded == []
        release.set()
        await in_flight
        await removing
        await model.unload()  # asked again: it has run
        assert unloaded == ["m"]


async def test_unload_runs_for_what_loaded_only_and_on_close() -> None:
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("weights missing")

    app = oip_app({"m": adding(1, unload=lambda: ran.append("m1"))})
    with pytest.raises(ModelNotReady):
        await app.core.put_model(
            "m",
            [
                adding(1, version="1", unload=lambda: ran.append("loaded beside a failure")),
                adding(2, version="2", load=broken, unload=lambda: ran.append("failed")),
            ],
        )
    assert ran == ["loaded beside a failure"]  # it loaded and never served: freed; the failed one loaded nothing
    await app.core.close()
    assert ran == ["loaded beside a failure", "m1"]


async def test_a_failing_unload_is_logged_and_the_server_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    def unload() -> None:
        raise OSError("device busy")

    app = oip_app({"m": adding(1, unload=unload), "other": adding(2)})
    with caplog.at_level(logging.ERROR, logger="oip_asgi"):
        await app.core.remove_model("m")
    assert "model 'm' (version 1) failed to unload" in caplog.text and "device busy" in caplog.text
    async with client(app) as http:
        assert (await http.post("/models/other/infer", json=BODY)).status_code == 200


async def lifespan(app: Any) -> None:
    sent: list[dict[str, Any]] = []
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "lifespan"}, receive, send)
    assert [message["type"] for message in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


async def test_the_lifespan_shutdown_runs_the_unload_steps_and_a_later_start_serves_again(tmp_path: Path) -> None:
    ran: list[str] = []
    write_model(tmp_path, "r")
    repository = ModelRepository(tmp_path, model_control_mode="explicit", load_models=["r"])
    app = oip_app(
        {"m": adding(1, load=lambda: ran.append("load"), unload=lambda: ran.append("unload"))},
        model_repository=repository,
    )
    async with client(app) as http:
        await app.load()
        assert await infer(http, "r") == (200, [2, 3])
    await lifespan(app)
    assert ran == ["load", "unload"]
    assert "r" not in app.core.served
    async with client(app) as http:  # the same app, started again (a host's second lifespan)
        assert await infer(http, "m") == (200, [2, 3])
        assert await infer(http, "r") == (200, [2, 3])
    assert ran == ["load", "unload", "load"]


def test_unload_is_an_option_replace_keeps() -> None:
    def unload() -> None: ...

    model = adding(1, unload=unload)
    assert model.options()["unload"] is unload and model.replace(version="2").unload is unload


async def test_a_repository_models_unload_runs_on_unload(tmp_path: Path) -> None:
    done = tmp_path / "unloaded"
    write_model(
        tmp_path,
        "a",
        body=f"""
        from pathlib import Path
        from oip_asgi import Model

        model = Model(lambda x: x, unload=lambda: Path({str(done)!r}).write_text("yes"))
    """,
    )
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit", load_models=["a"]))
    async with client(app) as http:
        await app.load()
        assert not done.exists()
        assert (await http.post("/repository/models/a/unload")).status_code == 200
        assert done.read_text() == "yes"


# -- a repository model's module -----------------------------------------------------------------------------------


async def test_a_repository_models_module_leaves_sys_modules_when_it_stops_serving(tmp_path: Path) -> None:
    write_model(tmp_path, "a", adds=1)
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    async with client(app) as http:
        assert (await http.post("/repository/models/a/load")).status_code == 200
        # What the module's globals hold (weights, say) lives as long as its functions: follow one.
        first = weakref.ref(sys.modules[MODULE].predict)
        write_model(tmp_path, "a", adds=2)
        assert (await http.post("/repository/models/a/load")).status_code == 200  # a reload
        assert sys.modules[MODULE].predict is not first()
        assert first() is None  # freed by the reload itself: nothing keeps the replaced version alive
        second = weakref.ref(sys.modules[MODULE].predict)
        assert (await http.post("/repository/models/a/unload")).status_code == 200
        assert MODULE not in sys.modules
        assert second() is None


async def test_a_failed_load_leaves_no_module_and_a_failed_reload_keeps_the_serving_ones(tmp_path: Path) -> None:
    broken_model(tmp_path, "a")
    write_model(  # loads its module, then its load step fails
        tmp_path,
        "b",
        body="from oip_asgi import Model\n\ndef load():\n    raise RuntimeError('no weights')\n\n"
        "model = Model(lambda x: x, load=load)\n",
    )
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    async with client(app) as http:
        for name in ("a", "b"):
            assert (await http.post(f"/repository/models/{name}/load")).status_code == 400
            assert f"oip_asgi_repository.{name}.1" not in sys.modules
        write_model(tmp_path, "a", adds=1)
        assert (await http.post("/repository/models/a/load")).status_code == 200
        serving = sys.modules[MODULE]
        broken_model(tmp_path, "a")  # a reload that fails: version 1 goes on serving, its module with it
        assert (await http.post("/repository/models/a/load")).status_code == 400
        assert sys.modules[MODULE] is serving
        assert await infer(http, "a") == (200, [2, 3])
        assert (await http.post("/repository/models/a/unload")).status_code == 200
    assert MODULE not in sys.modules


# -- the faults --------------------------------------------------------------------------------------------------


def clash_message(root: Path) -> str:
    return (
        "model 'a' is served from code (the models given to oip_app, or the serve command's target) and also "
        f"found in the model repository {str(root)!r}; the model from code goes on serving"
    )


async def test_a_repository_folder_named_as_a_model_from_code_is_refused_and_the_code_model_serves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_model(tmp_path, "a", adds=1000)
    write_model(tmp_path, "b", adds=1)
    repository = ModelRepository(tmp_path, model_control_mode="explicit", load_models=["*"])
    app = oip_app({"a": adding(1)}, model_repository=repository)
    async with client(app) as http:
        with caplog.at_level(logging.ERROR, logger="oip_asgi"):
            await app.load()
        assert clash_message(tmp_path) in caplog.text  # refused at start
        assert await infer(http, "a") == (200, [2, 3])  # the model from code
        assert await infer(http, "b") == (200, [2, 3])
        rows = {row["name"]: row for row in await index(http)}
        assert rows["a"]["state"] == "UNAVAILABLE" and rows["a"]["reason"].startswith(clash_message(tmp_path))

        response = await http.post("/repository/models/a/load")  # refused at load
        assert response.status_code == 400
        assert response.json()["error"].startswith(f"failed to load 'a': {clash_message(tmp_path)}")
        response = await http.post("/repository/models/a/unload")  # and the repository API never removes it
        assert response.status_code == 400 and "served from code" in response.json()["error"]
        assert await infer(http, "a") == (200, [2, 3])
        assert (await http.get("/health/ready")).json() == {"ready": True}


async def test_poll_mode_refuses_a_folder_named_as_a_model_from_code(tmp_path: Path) -> None:
    app = oip_app(
        {"a": adding(1)},
        model_repository=ModelRepository(tmp_path, model_control_mode="poll", repository_poll_secs=3600),
    )
    control = app.core.control
    assert control is not None
    async with client(app) as http:
        await app.load()
        write_model(tmp_path, "a", adds=1000)
        await control.poll_once()
        assert await infer(http, "a") == (200, [2, 3])
        (tmp_path / "a" / "1" / "model.py").unlink()
        (tmp_path / "a" / "1").rmdir()
        (tmp_path / "a").rmdir()
        await control.poll_once()  # the folder goes: the model from code stays
        assert await infer(http, "a") == (200, [2, 3])
