"""A mounted app starts and stops with its host (issue 35, points 2 and 3): `oip.lifespan` loads every model at
the host's startup and, at its shutdown, runs each `unload` step and each Triton model's `finalize`, once, after the
gRPC server started beside it has stopped; a plain Starlette `Mount` of the app answers its own path."""

from __future__ import annotations

import contextlib
import logging
import signal
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import oip_asgi
from oip_asgi import Model, ModelRepository, OIPApp, OIPMount, oip_app
from tests.support.servers import HOST, ROOT, free_port, serving
from tests.support.waiting import HANG, wait_until

PYTHON_MODELS = ROOT / "examples" / "python_backend" / "models"
FINALIZED = "add_sub: unloaded"  # what examples/python_backend/models/add_sub's finalize prints


class Steps:
    """A model's load and unload steps, recorded in order."""

    def __init__(self) -> None:
        self.done: list[str] = []

    def model(self) -> Model:
        return Model(lambda x: x, load=lambda: self.done.append("load"), unload=lambda: self.done.append("unload"))


def served(steps: Steps) -> OIPApp:
    """A model of code and a Triton Python model (add_sub), both with something to do at unload."""
    repository = ModelRepository(PYTHON_MODELS, model_control_mode="explicit", load_models=("add_sub",))
    return oip_app({"m": steps.model()}, model_repository=repository)


@contextlib.asynccontextmanager
async def asgi_lifespan(app: Any) -> AsyncIterator[list[str]]:
    """Startup before the block and shutdown after it, as an ASGI server sends them; the messages sent back."""
    stop = anyio.Event()
    started = anyio.Event()
    messages = iter([{"type": "lifespan.startup"}])
    sent: list[str] = []

    async def receive() -> dict[str, str]:
        for message in messages:
            return message
        await stop.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: dict[str, str]) -> None:
        sent.append(message["type"])
        started.set()

    async with anyio.create_task_group() as group:
        group.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
        with anyio.fail_after(HANG):
            await started.wait()
        yield sent
        stop.set()


def test_fastapi_given_the_lifespan_loads_at_startup_and_unloads_at_shutdown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fastapi = pytest.importorskip("fastapi")
    steps = Steps()
    oip = served(steps)
    app = fastapi.FastAPI(lifespan=oip.lifespan)
    oip_asgi.mount(app, oip)
    with TestClient(app) as client:
        assert steps.done == ["load"]  # at startup, before any request
        assert client.get("/v2/models/add_sub/ready").json() == {"name": "add_sub", "ready": True}
        assert FINALIZED not in capsys.readouterr().out
    assert steps.done == ["load", "unload"]
    assert FINALIZED in capsys.readouterr().out


def test_starlette_with_a_lifespan_of_its_own_nests_the_apps_and_unloads_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    steps = Steps()
    oip = served(steps)
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        events.append("host starts")
        async with oip.lifespan(app):
            async with oip.lifespan(app):  # entered twice: the models still unload once, when the outer ends
                yield
            events.append(f"inner left: {steps.done}")
        events.append(f"host stops: {steps.done}")

    app = Starlette(routes=[Mount("/v2", oip)], lifespan=lifespan)
    with TestClient(app) as client:
        assert client.get("/v2/models/m/ready").json() == {"name": "m", "ready": True}
    assert events == ["host starts", "inner left: ['load']", "host stops: ['load', 'unload']"]
    assert capsys.readouterr().out.count(FINALIZED) == 1


def test_a_host_started_twice_loads_and_unloads_twice() -> None:
    steps = Steps()
    oip = oip_app({"m": steps.model()})
    app = Starlette(routes=[OIPMount("/v2", oip)], lifespan=oip.lifespan)
    for _ in range(2):
        with TestClient(app) as client:
            assert client.get("/v2/models/m/ready").json()["ready"]
    assert steps.done == ["load", "unload", "load", "unload"]


@pytest.mark.anyio
async def test_django_asgi_unloads_at_the_servers_shutdown(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("django")
    import oip_asgi_django
    from examples import django_asgi  # Django's settings, and its ASGI application

    steps = Steps()
    oip = served(steps)
    application = oip_asgi_django.mount(django_asgi.application.app, oip)
    async with asgi_lifespan(application) as sent:
        await oip.core.load()  # the loads the startup began
        assert steps.done == ["load"]
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            assert (await client.get("/v2/models/add_sub/ready")).json()["ready"]
            assert (await client.get("/")).status_code == 200  # Django's own page
        assert FINALIZED not in capsys.readouterr().out
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert steps.done == ["load", "unload"]
    assert FINALIZED in capsys.readouterr().out


@pytest.mark.anyio
async def test_grpc_beside_the_lifespan_stops_before_the_models_unload_once(capsys: pytest.CaptureFixture[str]) -> None:
    grpc = pytest.importorskip("grpc")
    import oip_asgi.grpc
    from oip_asgi.grpc import inference_pb2 as pb
    from oip_asgi.grpc import inference_pb2_grpc

    steps = Steps()
    oip = served(steps)
    port = free_port()
    async with grpc.aio.insecure_channel(f"{HOST}:{port}") as channel:
        stub = inference_pb2_grpc.GRPCInferenceServiceStub(channel)

        async def between() -> None:  # after the gRPC server has stopped, before the models unload
            steps.done.append("grpc " + ("up" if await _answers(stub) else "down"))

        async with contextlib.AsyncExitStack() as host:
            await host.enter_async_context(oip.lifespan())
            host.push_async_callback(between)
            await host.enter_async_context(oip_asgi.grpc.serving(oip, address=f"{HOST}:{port}"))
            assert (await stub.ModelReady(pb.ModelReadyRequest(name="add_sub"))).ready
            assert await _answers(stub)
    assert steps.done == ["load", "grpc down", "unload"]
    assert capsys.readouterr().out.count(FINALIZED) == 1


@pytest.mark.anyio
async def test_grpc_serving_alone_unloads_when_it_ends() -> None:
    pytest.importorskip("grpc")
    import oip_asgi.grpc

    steps = Steps()
    oip = oip_app({"m": steps.model()})
    async with oip_asgi.grpc.serving(oip, address=f"{HOST}:0"):
        await oip.core.load()
    assert steps.done == ["load", "unload"]


async def _answers(stub: Any) -> bool:
    import grpc

    from oip_asgi.grpc import inference_pb2 as pb

    try:
        await stub.ServerLive(pb.ServerLiveRequest(), timeout=30)  # a stopped server refuses at once
    except grpc.aio.AioRpcError:
        return False
    return True


def test_the_serve_commands_grpc_and_rest_unload_once() -> None:
    pytest.importorskip("grpc")
    from oip_asgi._hosts.cli import Served

    steps = Steps()
    oip = oip_app({"m": steps.model()})
    whole = Served(oip, grpc_address=f"{HOST}:0")
    with TestClient(whole) as client:  # the serve command's startup completes at once; models load behind it
        wait_until(lambda: client.get("/v2/models/m/ready").json()["ready"], "the model loaded")
    assert steps.done == ["load", "unload"]


# Point 3: the plain mount, Starlette's natural line.


def test_a_plain_mount_answers_its_own_path_from_the_start_with_the_lifespan() -> None:
    oip = oip_app({"m": lambda x: x})
    app = Starlette(routes=[Mount("/api", routes=[Mount("/v2", oip)])], lifespan=oip.lifespan)
    with TestClient(app) as client:
        response = client.get("/api/v2", follow_redirects=False)
        assert response.status_code == 200
        assert response.json()["name"] == "oip-asgi"


def test_a_plain_mount_without_the_lifespan_answers_after_its_first_request_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    oip = oip_app({"m": lambda x: x})
    app = Starlette()
    app.mount("/v2", oip)
    with TestClient(app) as client, caplog.at_level(logging.WARNING, logger="oip_asgi"):
        assert client.get("/v2", follow_redirects=False).status_code == 307  # Starlette's, before the app sees it
        assert client.get("/v2/health/live").status_code == 200
        assert client.get("/v2", follow_redirects=False).status_code == 200
        assert client.get("/v2/health/live").status_code == 200
    warnings = [record.getMessage() for record in caplog.records if record.name == "oip_asgi"]
    assert len(warnings) == 1
    assert "plain Starlette Mount at /v2" in warnings[0] and "oip_asgi.mount(app, oip, path='/v2')" in warnings[0]


def test_a_plain_mount_with_middleware_is_left_and_the_log_says_what_to_do(caplog: pytest.LogCaptureFixture) -> None:
    from starlette.middleware import Middleware
    from starlette.middleware.gzip import GZipMiddleware

    oip = oip_app({"m": lambda x: x})
    app = Starlette(routes=[Mount("/v2", oip, middleware=[Middleware(GZipMiddleware)])], lifespan=oip.lifespan)
    with caplog.at_level(logging.WARNING, logger="oip_asgi"), TestClient(app) as client:
        assert client.get("/v2", follow_redirects=False).status_code == 307
    assert any("has middleware" in record.getMessage() for record in caplog.records)


APP = """
    from fastapi import FastAPI

    import oip_asgi
    from oip_asgi import Model, ModelRepository

    MODELS = ModelRepository({models!r}, model_control_mode="explicit", load_models=["add_sub"])
    oip = oip_asgi.oip_app({{"m": Model(lambda x: x, unload=lambda: print("m: unloaded", flush=True))}},
                           model_repository=MODELS)
    app = FastAPI(lifespan=oip.lifespan)
    app.mount("/v2", oip)  # Starlette's own line
"""


@pytest.fixture
def host_module(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "host_app.py").write_text(textwrap.dedent(APP.format(models=str(PYTHON_MODELS))))
    yield tmp_path


@pytest.mark.slow
def test_uvicorn_with_a_plain_mount_answers_tritonclient_and_finalizes_on_sigterm(host_module: Path) -> None:
    pytest.importorskip("fastapi")
    httpclient = pytest.importorskip("tritonclient.http")
    port = free_port()
    argv = ["-m", "uvicorn", "host_app:app", "--app-dir", str(host_module), "--host", HOST, "--port", str(port)]
    with serving(argv, port) as server:
        client = httpclient.InferenceServerClient(server.address)
        try:
            assert client.get_server_metadata()["name"] == "oip-asgi"  # GET /v2, the first request
            assert client.is_model_ready("add_sub")
        finally:
            client.close()
        assert FINALIZED not in server.output()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(30)
        output = server.output()
    assert FINALIZED in output and "m: unloaded" in output
    assert output.index("Shutting down") < output.index(FINALIZED) < output.index("Finished server process")


def test_the_hosts_url_path_for_passes_over_the_mounted_app() -> None:
    from starlette.routing import NoMatchFound, Route

    async def page(request: Any) -> None: ...

    app = Starlette(routes=[Route("/", page, name="index")])
    oip_asgi.mount(app, {})
    assert app.url_path_for("index") == "/"
    with pytest.raises(NoMatchFound):  # not an AttributeError from the OIP app's own route table
        app.url_path_for("nowhere")
