"""docs/integrations.md: each recipe matches its example file, and the FastAPI one runs."""

from __future__ import annotations

import ast
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from oip_asgi import OIPApp
from oip_asgi._core.server import ServerCore
from tests.support.servers import ROOT
from tests.support.waiting import HANG

DOC = ROOT / "docs" / "integrations.md"
RECIPE = re.compile(r"<!-- recipe: (?P<name>\S+) -->\n```python\n(?P<code>.*?)```", re.DOTALL)


def recipes() -> dict[str, str]:
    return {match["name"]: match["code"] for match in RECIPE.finditer(DOC.read_text())}


def without_docstring(source: str) -> str:
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    if docstring is None:
        return source
    end = source.index('"""', source.index('"""') + 3) + 3
    return source[end:].lstrip("\n")


def test_every_integration_has_a_recipe() -> None:
    assert set(recipes()) == {
        "fastapi",
        "examples/django_asgi.py",
        "examples/django_wsgi.py",
        "examples/flask_app.py",
        "examples/lambda_handler.py",
    }


@pytest.mark.parametrize("name", [name for name in recipes() if name.startswith("examples/")])
def test_recipe_is_its_example_file(name: str) -> None:
    assert recipes()[name] == without_docstring((ROOT / name).read_text())


@asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """Startup before the block and shutdown after it, as a server sends them."""
    to_app: list[dict[str, str]] = [{"type": "lifespan.startup"}]
    started, stop = anyio.Event(), anyio.Event()
    sent: list[str] = []

    async def receive() -> dict[str, str]:
        if not to_app:
            await stop.wait()
            return {"type": "lifespan.shutdown"}
        return to_app.pop()

    async def send(message: dict[str, str]) -> None:
        sent.append(message["type"])
        started.set()

    async with anyio.create_task_group() as group:
        group.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
        with anyio.fail_after(HANG):
            await started.wait()
        assert sent == ["lifespan.startup.complete"]
        yield
        stop.set()
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


@pytest.mark.anyio
async def test_fastapi_recipe_loads_models_at_startup_unloads_at_shutdown_and_serves_the_exact_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fastapi = pytest.importorskip("fastapi")
    loads: list[OIPApp] = []
    closes: list[ServerCore] = []
    original, original_close = OIPApp.load, ServerCore.close

    async def load(self: OIPApp) -> None:
        loads.append(self)
        await original(self)

    async def close(self: ServerCore) -> None:
        closes.append(self)
        await original_close(self)

    monkeypatch.setattr(OIPApp, "load", load)
    monkeypatch.setattr(ServerCore, "close", close)
    namespace: dict[str, Any] = {"__name__": "recipe"}
    exec(compile(recipes()["fastapi"], str(DOC), "exec"), namespace)
    app = namespace["app"]
    assert isinstance(app, fastapi.FastAPI)

    async with lifespan(app):
        assert loads == [namespace["oip"]]  # at startup, before any request
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            response = await client.get("/v2")
            assert response.status_code == 200
            assert response.json()["name"] == "oip-asgi"
            assert (await client.get("/v2/models/simple/ready")).json() == {"name": "simple", "ready": True}
        assert closes == []
    assert closes == [namespace["oip"].core]  # at shutdown, once
