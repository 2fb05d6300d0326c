"""Django under ASGI and WSGI: the composed application in-process, and uvicorn with tritonclient."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("django")
pytest.importorskip("a2wsgi")

import oip_asgi_django
from examples import django_asgi, django_wsgi
from oip_asgi import Model, TensorSpec, oip_app
from tests.support.servers import chunked_infer, triton_round_trip, uvicorn

pytestmark = pytest.mark.anyio


SIMPLE = {
    "inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [2] * 16},
    ]
}


def binary_simple() -> tuple[bytes, dict[str, str]]:
    a = np.arange(16, dtype=np.int32)
    header = {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
    }
    head = json.dumps(header).encode()
    return head + a.tobytes() + (a * 10).tobytes(), {"inference-header-content-length": str(len(head))}


def check_binary_answer(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/octet-stream"
    length = int(response.headers["inference-header-content-length"])
    assert json.loads(response.content[:length])["model_name"] == "simple"
    np.testing.assert_array_equal(np.frombuffer(response.content[length:], np.int32), np.arange(16) * 11)


@pytest.fixture
async def asgi() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=django_asgi.application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


@pytest.fixture
def wsgi() -> Iterator[httpx.Client]:
    transport = httpx.WSGITransport(app=django_wsgi.application)
    with httpx.Client(transport=transport, base_url="http://testserver") as client:
        yield client


async def test_asgi_django_keeps_serving_its_pages(asgi: httpx.AsyncClient) -> None:
    response = await asgi.get("/")
    assert response.status_code == 200
    assert response.text.startswith("Django serves /;")
    response = await asgi.get("/v2x")  # beside the prefix, not under it: Django's own 404 page
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")


async def test_asgi_serves_the_protocol_under_the_prefix(asgi: httpx.AsyncClient) -> None:
    response = await asgi.get("/v2")  # the exact prefix, no redirect
    assert response.status_code == 200
    assert response.json()["name"] == "oip-asgi"
    assert (await asgi.get("/v2/health/ready")).json() == {"ready": True}
    assert (await asgi.get("/v2/models/simple")).json()["name"] == "simple"

    response = await asgi.post("/v2/models/simple/infer", json=SIMPLE)
    assert response.status_code == 200
    assert response.json()["outputs"][0]["data"] == [value + 2 for value in range(16)]

    body, headers = binary_simple()
    check_binary_answer(await asgi.post("/v2/models/simple/infer", content=body, headers=headers))

    response = await asgi.get("/v2/models/missing")
    assert response.status_code == 404
    assert "missing" in response.json()["error"]


async def test_asgi_under_a_root_path() -> None:
    # uvicorn --root-path /site behind a proxy that keeps the prefix in the path
    transport = httpx.ASGITransport(app=django_asgi.application, root_path="/site")
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        assert (await client.get("/site/v2/models/simple")).json()["name"] == "simple"
        assert (await client.get("/site/")).text.startswith("Django serves /site/;")


@pytest.mark.parametrize("path", ["/site/v2/models/x", "/v2/models/x"], ids=["path-with-root", "path-without-root"])
async def test_root_path_is_extended_by_the_prefix(path: str) -> None:
    seen: list[tuple[str, str]] = []

    async def spy(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append((scope["root_path"], scope["path"]))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def django(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("reached Django")

    dispatcher = oip_asgi_django.OIPDispatcher(django, spy, prefix="/v2")  # type: ignore[arg-type]
    scope = {"type": "http", "method": "GET", "path": path, "root_path": "/site", "headers": []}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        pass

    await dispatcher(scope, receive, send)
    assert seen == [("/site/v2", "/site/v2/models/x")]


async def test_lifespan_goes_to_the_oip_app_and_loads_models() -> None:
    loads: list[str] = []
    loaded = threading.Event()

    def load() -> None:
        loads.append("loaded")
        loaded.set()

    model = Model(lambda X: X, inputs=[TensorSpec("X", "FP32", [-1])], load=load, max_concurrency=1)

    async def django(scope: Any, receive: Any, send: Any) -> None:
        raise ValueError("Django can only handle ASGI/HTTP connections, not lifespan.")

    application = oip_asgi_django.mount(django, {"m": model})
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        if sent:  # startup completed; the models load in the background
            assert await asyncio.to_thread(loaded.wait, 10)
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    await application({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert loads == ["loaded"]


def test_mount_serves_an_existing_oip_app_and_checks_the_prefix() -> None:
    app = oip_app({"m": lambda X: X})
    assert oip_asgi_django.mount(django_asgi.application, app).oip_app is app
    for prefix in ["v2", "/v2/", ""]:
        with pytest.raises(ValueError, match="prefix"):
            oip_asgi_django.mount(django_asgi.application, app, prefix=prefix)


def test_wsgi_serves_django_and_the_protocol(wsgi: httpx.Client) -> None:
    assert wsgi.get("/").text.startswith("Django serves /;")
    assert wsgi.get("/v2x").status_code == 404
    response = wsgi.get("/v2")
    assert response.status_code == 200
    assert response.json()["name"] == "oip-asgi"
    assert wsgi.get("/v2/models/simple/ready").json() == {"name": "simple", "ready": True}

    response = wsgi.post("/v2/models/simple/infer", json=SIMPLE)
    assert response.json()["outputs"][1]["data"] == [value - 2 for value in range(16)]
    body, headers = binary_simple()
    check_binary_answer(wsgi.post("/v2/models/simple/infer", content=body, headers=headers))
    assert wsgi.post("/v2/models/simple", json=SIMPLE).status_code == 405


def test_wsgi_refuses_a_chunked_body_it_cannot_read(wsgi: httpx.Client) -> None:
    # httpx streams an iterator chunked, without Content-Length, as gunicorn hands it on.
    body = json.dumps(SIMPLE).encode()
    response = wsgi.post("/v2/models/simple/infer", content=iter([body[:10], body[10:]]))
    assert response.status_code == 411
    assert "Content-Length" in response.json()["error"] and "waitress" in response.json()["error"]


@pytest.mark.slow
def test_real_uvicorn_with_tritonclient() -> None:
    # --lifespan on: startup fails outright if lifespan reached Django instead of the OIP app.
    with uvicorn("examples.django_asgi:application", "--lifespan", "on") as server:
        triton_round_trip(server.address)
        status, body = chunked_infer(server.address, SIMPLE)  # under ASGI, a chunked body streams in
        assert status == 200, body
        assert json.loads(body)["outputs"][0]["data"] == [value + 2 for value in range(16)]
        with urllib.request.urlopen(f"http://{server.address}/", timeout=10) as page:
            assert page.read().decode().startswith("Django serves /;")
