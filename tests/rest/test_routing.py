"""The router under the HTTP wires (`_http/routing.py`): patterns, Starlette's matching (the first route
that takes the method answers, else a 405 naming every method, else the 404 of the first table under the
path), one error boundary, and tables mounted at prefixes, several under one.

`tiny_wire` is docs/architecture.md's recipe for a new wire, followed: a route table on the router and
an exchange for the core, and it answers health and inference.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import numpy as np
import pytest
from starlette.types import Receive, Scope, Send

from oip_asgi import Model, TensorSpec, oip_app, openai_app
from oip_asgi._core.request import DecodedRequest
from oip_asgi._core.responding import Reply
from oip_asgi._core.server import ServerCore
from oip_asgi._core.serving import ServedModel
from oip_asgi._declarations.errors import BadRequest, NotFound, OIPError
from oip_asgi._declarations.restricted import restrictions
from oip_asgi._hosts.cli import Served
from oip_asgi._http.routing import Route, Router, Table, WireApp, compile_pattern, path_templates
from oip_asgi._rest import app as rest_app

pytestmark = pytest.mark.anyio


# -- The recipe: a tiny wire, `{"x": [...]}` in and `{"y": [...]}` out -----------------------------------


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


class TinyExchange:
    """What the core asks of the wire for one request: decode it, encode the outputs, send the answer."""

    endpoint = "tiny end point"

    def __init__(self, body: bytes, send: Send) -> None:
        self._body = body
        self._send = send
        self.received = len(body)
        self.sent = self.responses = 0

    async def decode(self, model: ServedModel) -> DecodedRequest:
        try:
            return DecodedRequest(inputs={"x": np.asarray(json.loads(self._body)["x"], dtype=np.float32)})
        except (ValueError, KeyError, TypeError) as exc:
            raise BadRequest(f"the tiny wire takes {{'x': [numbers]}}: {exc}") from None

    def encode(self, reply: Reply) -> bytes:
        return json.dumps({output.name: output.array.tolist() for output in reply.outputs}).encode()

    async def send(self, response: bytes) -> None:
        await respond(self._send, 200, response)
        self.sent, self.responses = len(response), 1

    async def start(self) -> None:
        raise BadRequest("the tiny wire answers once")

    async def send_next(self, response: bytes) -> None:  # pragma: no cover  # start refuses
        raise AssertionError

    async def finish(self) -> None:  # pragma: no cover
        raise AssertionError


async def tiny_error(send: Send, error: OIPError) -> None:
    headers = [(key.lower().encode(), value.encode()) for key, value in error.headers.items()]
    await respond(send, error.status_code, json.dumps({"tiny_error": error.message}).encode(), headers)


def tiny_table(core: ServerCore, **options: Any) -> Table:
    async def ready(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        await respond(send, 200, json.dumps({"ready": core.server_ready()}).encode())

    async def infer(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await core.infer(match["name"], None, TinyExchange(body, send))

    routes = [
        Route("/models/{name}/infer", infer, "inference", methods=["POST"]),
        Route("/ready", ready, "health"),
    ]
    return Table(
        routes, core, send_error=tiny_error, not_found=lambda scope, path: NotFound(f"tiny: no {path}"), **options
    )


def tiny_wire(core: ServerCore, **options: Any) -> WireApp:
    return WireApp(tiny_table(core, **options))


def double(x: np.ndarray) -> np.ndarray:
    return x * 2


MODELS = {"double": Model(double, inputs=[TensorSpec("x", "FP32", [-1])], outputs=[TensorSpec("y", "FP32", [-1])])}


async def call(app: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://wire") as client:
        return await client.request(method, path, **kwargs)


async def test_a_tiny_wire_on_the_router_and_the_core_answers_health_and_inference() -> None:
    wire = tiny_wire(ServerCore(MODELS))
    assert (await call(wire, "GET", "/ready")).json() == {"ready": True}
    assert (await call(wire, "GET", "/ready/")).json() == {"ready": True}
    answer = await call(wire, "POST", "/models/double/infer", json={"x": [1, 2.5]})
    assert (answer.status_code, answer.json()) == (200, {"y": [2.0, 5.0]})
    # Its errors, in its own format: the core's, the wire's own, and the router's 404 and 405.
    unknown = await call(wire, "POST", "/models/nothing/infer", json={"x": [1]})
    assert unknown.status_code == 404 and "'nothing' is not found" in unknown.json()["tiny_error"]
    assert (await call(wire, "POST", "/models/double/infer", json={})).status_code == 400
    assert (await call(wire, "GET", "/nowhere")).json() == {"tiny_error": "tiny: no /nowhere"}
    wrong = await call(wire, "GET", "/models/double/infer")
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
    assert wrong.json() == {"tiny_error": "method GET is not allowed here; use POST"}


async def test_a_tiny_wire_s_groups_are_restricted_as_the_protocol_s() -> None:
    wire = tiny_wire(ServerCore(MODELS), restrictions=restrictions(["inference:key=k"]))
    refused = await call(wire, "GET", "/models/double/infer")  # before the method: 403, not 405
    assert refused.status_code == 403
    assert refused.json() == {"tiny_error": "This API is restricted, expecting header 'key'"}
    allowed = await call(wire, "POST", "/models/double/infer", json={"x": [1]}, headers={"key": "k"})
    assert allowed.json() == {"y": [2.0]}
    assert (await call(wire, "GET", "/ready")).status_code == 200  # health is open


async def test_an_endpoint_s_own_error_goes_through_the_one_boundary() -> None:
    async def broken(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        raise RuntimeError("a bug")

    core = ServerCore({})
    router = Router([("", Table([Route("/x", broken, "health")], core, send_error=tiny_error, not_found=NotFound))])
    answer = await call(router, "GET", "/x")
    assert answer.status_code == 500 and answer.json()["tiny_error"].startswith("internal server error")


async def test_a_table_s_first_request_hook_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The REST app's (its logging, its Starlette mount) included: the app is a Router with hooks of its own."""
    followed: list[None] = []
    monkeypatch.setattr(rest_app, "follow_the_host", lambda: followed.append(None))
    app = oip_app(MODELS)
    for _ in range(3):
        assert (await call(app, "GET", "/health/live")).status_code == 200
    seen: list[str] = []
    router = Router([("", tiny_table(ServerCore(MODELS), first_request=lambda scope: seen.append(scope["path"])))])
    for path in ("/ready", "/nowhere"):
        await call(router, "GET", path)
    assert (len(followed), seen) == (1, ["/ready"])


async def test_an_app_s_table_keeps_the_rules_given_after_it_was_built() -> None:
    """As the serve command gives --http-restricted-api's rules to an app built already."""
    app = oip_app(MODELS)
    app.restrictions = restrictions(["inference:key=k"])
    assert (await call(app, "POST", "/models/double/infer", json={"x": [1]})).status_code == 403
    both = Served(app, openai=True)
    assert (await call(both, "POST", "/v2/models/double/infer", json={"x": [1]})).status_code == 403
    # /v1 refuses as Triton's OpenAI frontend does: 401, the openai client's AuthenticationError.
    assert (await call(both, "POST", "/v1/completions", json={"model": "double"})).status_code == 401


# -- Several wires under one prefix ------------------------------------------------------------------------


async def test_wires_mounted_under_one_prefix_each_answer_their_own_paths() -> None:
    """OpenAI's table and the tiny one both at /v1, the protocol at /v2. A request goes to the first route
    that takes its path and method, in mount order; the first table mounted at a prefix owns its 404s."""
    oip = oip_app(MODELS)
    both = Router([("/v2", oip), ("/v1", openai_app(oip)), ("/v1", tiny_table(oip.core))])
    assert [prefix for prefix, _ in both.mounts] == ["/v2", "/v1", "/v1"]
    listed = await call(both, "GET", "/v1/models")
    assert [model["id"] for model in listed.json()["data"]] == ["double"]
    # OpenAI's /models/{id} takes GET only: a POST below it is the tiny wire's inference.
    assert (await call(both, "POST", "/v1/models/double/infer", json={"x": [3]})).json() == {"y": [6.0]}
    assert (await call(both, "GET", "/v1/ready")).json() == {"ready": True}
    assert (await call(both, "GET", "/v2/models/double")).json()["name"] == "double"
    # A path neither table has: OpenAI's 404, as the first mounted at /v1.
    nowhere = await call(both, "GET", "/v1/nowhere")
    assert nowhere.status_code == 404
    assert nowhere.json()["error"]["message"].startswith("Invalid URL (GET /v1/nowhere)")
    # A path some route takes with other methods: 405, naming the methods of every route that takes it.
    put = await call(both, "PUT", "/v1/models/double/infer")
    assert (put.status_code, put.headers["allow"]) == (405, "GET, POST")
    # Under no prefix: the fallback's 404 (the first table's, unless the router is given one).
    outside = await call(both, "GET", "/v3")
    assert outside.json() == {"error": "no such path '/v3'; see the Open Inference Protocol for the endpoints"}


async def test_the_serve_command_composes_the_protocol_and_openai_by_prefix() -> None:
    served = Served(oip_app(MODELS), openai=True)
    assert [prefix for prefix, _ in served.mounts] == ["/v2", "/v1", ""]  # "": the probes beside /v1 (/health/ready)
    assert (await call(served, "GET", "/v2/health/ready")).json() == {"ready": True}
    assert [model["id"] for model in (await call(served, "GET", "/v1/models")).json()["data"]] == ["double"]
    assert (await call(served, "GET", "/v1/nothing")).json()["error"]["message"].startswith("Invalid URL")
    assert (await call(served, "GET", "/v2/nothing")).json()["error"].startswith("no such path '/v2/nothing'")
    assert (await call(served, "GET", "/v20")).json() == {
        "error": "no such path '/v20': this server serves the Open Inference Protocol at /v2 and OpenAI's API at /v1"
    }


async def test_a_prefix_holds_its_own_path_and_those_below_it_only() -> None:
    router = Router([("/v1", tiny_table(ServerCore(MODELS)))])
    assert (await call(router, "GET", "/v1/ready")).status_code == 200
    assert (await call(router, "GET", "/v1ready")).json() == {"tiny_error": "tiny: no /v1ready"}  # the fallback's
    with pytest.raises(ValueError, match="prefix must"):
        Router([("v1/", tiny_table(ServerCore({})))])


# -- Patterns ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [
        (
            "/models/{name}[/versions/{version}]/infer",
            r"/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?/infer/?",
        ),
        ("", "/?"),
        ("/systemsharedmemory[/{rest:path}]", r"/systemsharedmemory(?:/(?P<rest>.+))?/?"),
        ("[/models/{name}]/trace/setting", r"(?:/models/(?P<name>[^/]+))?/trace/setting/?"),
    ],
)
def test_a_pattern_is_one_regular_expression(pattern: str, regex: str) -> None:
    assert compile_pattern(pattern).pattern == regex


def test_a_pattern_s_paths_as_openapi_writes_them() -> None:
    assert path_templates("/models/{name}[/versions/{version}]/infer") == [
        "/models/{name}/infer",
        "/models/{name}/versions/{version}/infer",
    ]
    assert path_templates("") == ["/"]
    assert path_templates("/models/{id:path}") == ["/models/{id}"]
    assert compile_pattern("/openapi.json", trailing_slash=False).fullmatch("/openapi.json/") is None
