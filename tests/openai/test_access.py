"""Who may call /v1, and what it loads (issue 38), in-process: API keys as OpenAI's clients send them, model
control as Triton's OpenAI frontend has it, and the request body's limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import oip_asgi
from oip_asgi import ModelRepository
from tests.core.test_repository import write_model
from tests.openai.test_openai import MODELS, error

pytest.importorskip("jinja2")
pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789"
UPPER = """
import numpy as np

from oip_asgi import Model, TensorSpec


def upper(text_input):
    return {"text_output": np.char.upper(text_input.astype(bytes)).astype(object)}


model = Model(upper, inputs=[TensorSpec("text_input", "BYTES", [1])], outputs=[TensorSpec("text_output", "BYTES", [1])])
"""


def client_of(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


# -- API keys


@pytest.fixture()
async def keyed() -> AsyncIterator[httpx.AsyncClient]:
    v2 = oip_asgi.oip_app(MODELS)
    app = Starlette(routes=[Mount("/v2", v2), Mount("/v1", oip_asgi.openai_app(v2, api_key=KEY))])
    async with client_of(app) as client:
        yield client


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/completions"), ("GET", "/v1/models"), ("GET", "/v1/models/echo"), ("GET", "/v1/nothing")],
)
async def test_an_api_key_is_required_of_every_request_to_v1(keyed: httpx.AsyncClient, method: str, path: str) -> None:
    body = {"model": "echo", "prompt": "x"} if method == "POST" else None
    missing = error(await keyed.request(method, path, json=body), 401)
    assert (missing["type"], missing["code"]) == ("invalid_request_error", "invalid_api_key")
    assert "You didn't provide an API key" in missing["message"]
    for wrong in (f"Bearer {KEY}x", KEY, f"bearer {KEY}", f"Bearer {KEY[:-1]}"):
        refused = error(await keyed.request(method, path, json=body, headers={"Authorization": wrong}), 401)
        assert refused["code"] == "invalid_api_key" and KEY not in refused["message"]
    allowed = await keyed.request(method, path, json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert allowed.status_code == (404 if path == "/v1/nothing" else 200)


async def test_the_api_key_is_v1s_alone(keyed: httpx.AsyncClient) -> None:
    assert (await keyed.get("/v2/health/ready")).status_code == 200
    assert (await keyed.get("/v2/models/echo")).status_code == 200


def test_an_empty_api_key_is_refused_when_the_app_is_built() -> None:
    with pytest.raises(ValueError, match="api_key must not be empty"):
        oip_asgi.openai_app(oip_asgi.oip_app(MODELS), api_key="")


# -- model control, as Triton's OpenAI frontend has it


@pytest.fixture()
async def explicit(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    write_model(tmp_path, "upper", body=UPPER)
    write_model(tmp_path, "lower", body=UPPER)
    v2 = oip_asgi.oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    app = oip_asgi.openai_app(v2)
    async with v2.lifespan(app), client_of(app) as client:
        yield client


async def test_a_model_is_loaded_and_unloaded_on_v1_in_explicit_mode(explicit: httpx.AsyncClient) -> None:
    assert (await explicit.get("/models")).json()["data"] == []
    loaded = await explicit.post("/models/upper/load")
    assert loaded.status_code == 200 and loaded.json()["id"] == "upper" and loaded.json()["object"] == "model"
    assert [model["id"] for model in (await explicit.get("/models")).json()["data"]] == ["upper"]
    answer = await explicit.post("/completions", json={"model": "upper", "prompt": "hi"})
    assert answer.json()["choices"][0]["text"] == "HI"
    again = error(await explicit.post("/models/upper/load"), 400)
    assert "already loaded" in again["message"]
    unloaded = await explicit.post("/models/upper/unload")
    assert unloaded.json() == {"status": "success", "model": "upper"}
    gone = await explicit.post("/completions", json={"model": "upper", "prompt": "hi"})
    assert gone.status_code == 404
    assert error(await explicit.post("/models/upper/unload"), 404)["code"] == "model_not_found"


async def test_a_model_not_in_the_repository_is_not_found_naming_those_that_are(explicit: httpx.AsyncClient) -> None:
    found = error(await explicit.post("/models/nope/load"), 404)
    assert found["code"] == "model_not_found"
    assert found["message"] == "The model 'nope' does not exist (the model repository holds: lower, upper)"


async def test_model_control_is_refused_in_other_modes_and_without_a_repository(tmp_path: Path) -> None:
    write_model(tmp_path, "upper", body=UPPER)
    v2 = oip_asgi.oip_app(model_repository=ModelRepository(tmp_path))  # mode none
    app = oip_asgi.openai_app(v2)
    async with v2.lifespan(app), client_of(app) as client:
        refused = error(await client.post("/models/upper/unload"), 400)
        assert "requires --model-control-mode=explicit" in refused["message"] and "mode is 'none'" in refused["message"]
        assert (await client.post("/completions", json={"model": "upper", "prompt": "a"})).status_code == 200
    async with client_of(oip_asgi.openai_app(oip_asgi.oip_app(MODELS))) as client:
        refused = error(await client.post("/models/echo/load"), 400)
        assert "serves no model repository" in refused["message"]


async def test_loads_and_unloads_are_the_model_repository_group(tmp_path: Path) -> None:
    write_model(tmp_path, "upper", body=UPPER)
    v2 = oip_asgi.oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    app = oip_asgi.openai_app(v2, restricted_apis=["model-repository:admin=yes"])
    async with v2.lifespan(app), client_of(app) as client:
        assert error(await client.post("/models/upper/load"), 401)["type"] == "authentication_error"
        assert (await client.post("/models/upper/load", headers={"admin": "yes"})).status_code == 200
        got = await client.get("/models/upper/load", headers={"admin": "yes"})  # a GET: a model's name
        assert error(got, 404)["code"] == "model_not_found"


# -- the request body's limit


def test_the_body_limit_is_tritons_64_mib_unless_told() -> None:
    v2 = oip_asgi.oip_app(MODELS)
    assert v2.core.max_body_size > 64 * 2**20  # the protocol's own is larger
    assert oip_asgi.openai_app(v2).max_body_size == 64 * 2**20
    assert oip_asgi.openai_app(v2, max_body_size=100 * 2**20).max_body_size == 100 * 2**20
    assert oip_asgi.openai_app(oip_asgi.oip_app(MODELS, max_body_size=1000)).max_body_size == 1000


async def test_a_body_over_the_limit_is_a_413_however_it_comes() -> None:
    app = oip_asgi.openai_app(oip_asgi.oip_app(MODELS), max_body_size=100)
    async with client_of(app) as client:
        body = b'{"model": "echo", "prompt": "' + b"x" * 100 + b'"}'
        declared = error(await client.post("/completions", content=body), 413)
        assert declared["code"] == "content_too_large" and f"Request size of {len(body)} bytes" in declared["message"]

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
            yield body[:60]
            yield body[60:]

        chunked = error(await client.post("/completions", content=chunks()), 413)
        assert (
            chunked["code"] == "content_too_large"
            and "exceeds the maximum allowed input size of 100" in chunked["message"]
        )
        assert (await client.post("/completions", json={"model": "echo", "prompt": "x"})).status_code == 200
