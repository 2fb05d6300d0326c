"""Mounting in a Starlette or FastAPI host: the host's middleware sees the protocol's requests, unless the
user asks for them to be answered in front of it (`bypass_host_middleware=True`)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from oip_asgi import Model, TensorSpec, mount, oip_app
from tests.support.client import client

pytestmark = pytest.mark.anyio

BODY = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}]}


def models() -> dict[str, Model]:
    return {"double": Model(lambda x: x * 2, inputs=[TensorSpec("x", "INT32", [-1])])}


class Seen:
    """A host's middleware that records each request's path, and refuses those without a token."""

    def __init__(self, app: ASGIApp, paths: list[str]) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
            if (b"authorization", b"Bearer token") not in scope["headers"]:
                await PlainTextResponse("no token", status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def own(request: Request) -> PlainTextResponse:
    return PlainTextResponse("the host's own")


def host(paths: list[str], **options: Any) -> Starlette:
    app = Starlette(routes=[Route("/own", own)], middleware=[Middleware(Seen, paths=paths)])
    mount(app, models(), path="/v2", **options)
    return app


async def test_the_hosts_middleware_sees_every_protocol_request_by_default() -> None:
    paths: list[str] = []
    async with client(host(paths)) as http:
        assert (await http.post("/v2/models/double/infer", json=BODY)).status_code == 401  # refused by it
        authorized = {"authorization": "Bearer token"}
        answer = await http.post("/v2/models/double/infer", json=BODY, headers=authorized)
        assert answer.json()["outputs"][0]["data"] == [2, 4]
        assert (await http.get("/v2", headers=authorized)).status_code == 200
        assert (await http.get("/v2/health/ready")).status_code == 401
    assert paths == ["/v2/models/double/infer", "/v2/models/double/infer", "/v2", "/v2/health/ready"]


async def test_bypass_host_middleware_answers_the_protocol_in_front_of_it_and_nothing_else() -> None:
    paths: list[str] = []
    async with client(host(paths, bypass_host_middleware=True)) as http:
        answer = await http.post("/v2/models/double/infer", json=BODY)  # no token: the middleware never saw it
        assert answer.json()["outputs"][0]["data"] == [2, 4]
        assert (await http.get("/v2")).json()["name"] == "oip-asgi"  # the exact prefix
        assert (await http.get("/v2/health/ready")).json() == {"ready": True}
        assert (await http.get("/v2/nothing")).status_code == 404  # the protocol's own 404
        assert (await http.get("/v2x")).status_code == 401  # not under the prefix: the host's
        assert (await http.get("/own")).status_code == 401
        assert (await http.get("/own", headers={"authorization": "Bearer token"})).text == "the host's own"
    assert paths == ["/v2x", "/own", "/own"]


async def test_bypass_host_middleware_under_a_root_path_and_after_the_host_has_started() -> None:
    paths: list[str] = []
    app = Starlette(routes=[Route("/own", own)], middleware=[Middleware(Seen, paths=paths)])
    async with client(app) as http:
        assert (await http.get("/own")).status_code == 401  # the host's stack is built
        oip = oip_app(models())
        mount(app, oip, path="/v2/", bypass_host_middleware=True)  # Starlette keeps the mount as /v2
        answer = await http.post("/v2/models/double/infer", json=BODY)
        assert answer.json()["outputs"][0]["data"] == [2, 4]
    behind_a_proxy = httpx.ASGITransport(app=app, root_path="/proxy")
    async with httpx.AsyncClient(transport=behind_a_proxy, base_url="http://testserver") as http:
        answer = await http.post("/proxy/v2/models/double/infer", json=BODY)
        assert answer.json()["outputs"][0]["data"] == [2, 4]
    assert paths == ["/own"]
