"""The OpenAPI document at <mount>/openapi.json, and schemathesis fuzzing a live server from it."""

from __future__ import annotations

import json
from typing import Any

import anyio
import hypothesis
import pytest
import schemathesis
from schemathesis import BaseSchema
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.applications import Starlette
from starlette.routing import Mount

import oip_asgi._rest.openapi
from examples.app import app as example_app
from examples.models import models as example_models
from oip_asgi import Model, TensorSpec, mount, oip_app
from tests.support.client import client

pytestmark = pytest.mark.anyio

PATHS = {
    "/": "get",
    "/health/live": "get",
    "/health/ready": "get",
    "/openapi.json": "get",
    "/models/{model_name}": "get",
    "/models/{model_name}/ready": "get",
    "/models/{model_name}/infer": "post",
    "/models/{model_name}/generate": "post",
    "/models/{model_name}/generate_stream": "post",
    "/models/{model_name}/versions/{model_version}": "get",
    "/models/{model_name}/versions/{model_version}/ready": "get",
    "/models/{model_name}/versions/{model_version}/infer": "post",
    "/models/{model_name}/versions/{model_version}/generate": "post",
    "/models/{model_name}/versions/{model_version}/generate_stream": "post",
}
# Bounded and derandomized: the same requests on every run, about 10 s against a live server.
CONFIG = schemathesis.Config.from_dict(
    {"seed": 5, "generation": {"mode": "all", "max-examples": 50, "deterministic": True}}
)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


async def fetch(app: Any, path: str) -> Any:
    async with client(app) as http:
        response = await http.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        return response.json()


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [node["$ref"]] if "$ref" in node else [ref for value in node.values() for ref in refs(value)]
    return [ref for value in node for ref in refs(value)] if isinstance(node, list) else []


@pytest.fixture(scope="module")
def document() -> Any:
    # Built in-process; the requests go to a live server, which serves this same document
    # (test_live_server_serves_the_document).
    return anyio.run(fetch, example_app, "/v2/openapi.json")


@pytest.fixture(scope="module")
def schema(document: Any) -> BaseSchema:
    return schemathesis.openapi.from_dict(document, config=CONFIG)


@pytest.fixture
def node_id_for_schemathesis(request: pytest.FixtureRequest) -> None:
    # schemathesis 4.32's lazy schemas read Node._nodeid, which pytest 9.2 no longer has.
    request.node._nodeid = request.node.nodeid


# One test, its operations run as subtests: a failure's heading names the operation ("label='GET /'").
@schemathesis.pytest.from_fixture("schema").parametrize()
@hypothesis.settings(deadline=None)
@pytest.mark.usefixtures("node_id_for_schemathesis")
@pytest.mark.slow
# Bounded work (the same 700 requests every run), about 10 s on a quiet machine, several minutes on one
# loaded ten times over: the run's 120 s would be a speed limit here, not a hang detector.
@pytest.mark.timeout(900)
def test_schemathesis_finds_no_fault(case: Any, example_server: str) -> None:
    # No 5xx, and every status, content type, header and body is one the document declares.
    case.call_and_validate(base_url=f"http://{example_server}/v2", checks=CHECKS)


@pytest.mark.slow
def test_live_server_serves_the_document(example_server: str, document: Any) -> None:
    loaded = schemathesis.openapi.from_url(f"http://{example_server}/v2/openapi.json")
    loaded.validate()
    assert loaded.raw_schema == document


def test_document_is_valid_and_lists_every_endpoint(document: Any, schema: BaseSchema) -> None:
    schema.validate()  # against the OpenAPI 3.1 meta-schema
    assert document["openapi"] == "3.1.0"
    assert document["servers"] == [{"url": "/v2"}]
    assert {path: list(item.keys() - {"parameters"}) for path, item in document["paths"].items()} == {
        path: [method] for path, method in PATHS.items()
    }
    labels = sorted(result.ok().label for result in schema.get_all_operations())
    assert labels == sorted(f"{method.upper()} {path}" for path, method in PATHS.items())
    components = document["components"]["schemas"]
    assert {ref.removeprefix("#/components/schemas/") for ref in refs(document)} <= components.keys()
    # Triton-only endpoints the app does not serve are not promised.
    triton_only = ("repository", "stats", "sharedmemory", "trace", "logging", "config")
    assert not any(word in path for path in document["paths"] for word in triton_only)


def test_schemas_come_from_the_wire_structs(document: Any) -> None:
    components = document["components"]["schemas"]
    assert components["InferenceRequest"]["required"] == ["inputs"]
    # One input schema per datatype, told apart by the datatype tag, each typing its elements.
    inputs = components["InferenceRequest"]["properties"]["inputs"]["items"]
    assert inputs["discriminator"]["propertyName"] == "datatype"
    assert len(inputs["anyOf"]) == 14
    int8 = components["INT8Input"]["properties"]
    assert int8["datatype"]["enum"] == ["INT8"]
    assert int8["shape"]["items"]["minimum"] == 0
    assert int8["data"]["anyOf"][0]["items"]["anyOf"][0] == {"type": "integer", "minimum": -128, "maximum": 127}
    assert components["OutputParameters"]["properties"]["classification"]["anyOf"][0]["minimum"] == 1
    assert components["Error"]["required"] == ["error"]
    infer = document["paths"]["/models/{model_name}/infer"]["post"]
    assert set(infer["requestBody"]["content"]) == {"application/json", "application/octet-stream"}
    assert [parameter["name"] for parameter in infer["parameters"]] == ["Inference-Header-Content-Length"]
    errors = {status for status in infer["responses"] if status != "200"}
    assert errors == {"400", "404", "413", "415", "500", "503"}
    assert {json.dumps(infer["responses"][status]["content"]) for status in errors} == {
        json.dumps({"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}})
    }
    (name,) = document["paths"]["/models/{model_name}"]["parameters"]
    assert name["schema"]["enum"] == list(example_models)


@pytest.mark.parametrize(
    ("mounted", "prefix"),
    [
        (lambda app: Starlette(routes=[Mount("/inference", app=app)]), "/inference"),
        (lambda app: Starlette(routes=[Mount("/a", routes=[Mount("/b", app=app)])]), "/a/b"),
        (lambda app: app, ""),
    ],
    ids=["starlette-mount", "nested-mount", "root"],
)
def test_document_follows_the_mount(mounted: Any, prefix: str) -> None:
    app = mounted(oip_app({"m": lambda **inputs: inputs}))
    loaded = schemathesis.openapi.from_asgi(f"{prefix}/openapi.json", app)
    loaded.validate()
    assert loaded.raw_schema["servers"] == [{"url": prefix or "/"}]
    # A client that follows the document reaches the app.
    response = loaded["/models/{model_name}/ready"]["GET"].Case(path_parameters={"model_name": "m"}).call()
    assert response.status_code == 200
    assert response.json() == {"name": "m", "ready": True}


async def test_versions_and_names_are_enums_and_the_document_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[object] = []
    build = oip_asgi._rest.openapi.build_document
    monkeypatch.setattr(oip_asgi._rest.openapi, "build_document", lambda *args: builds.append(args) or build(*args))
    app = oip_app({"m": [Model(abs, version="1"), Model(abs, version="2")], "n": abs})
    host = Starlette(routes=[Mount("/x", app=app), Mount("/y", app=app)])
    x, y = [await fetch(host, f"{prefix}/openapi.json") for prefix in ("/x", "/y")]
    assert len(builds) == 1
    assert (x["servers"], y["servers"]) == ([{"url": "/x"}], [{"url": "/y"}])
    assert {**x, "servers": None} == {**y, "servers": None}
    name, version = x["paths"]["/models/{model_name}/versions/{model_version}"]["parameters"]
    assert (name["schema"]["enum"], version["schema"]["enum"]) == (["m", "n"], ["1", "2"])


def test_every_declared_failure_conforms_to_the_document() -> None:
    def fail(**inputs: Any) -> None:
        raise RuntimeError("model bug")

    def no_weights() -> None:
        raise FileNotFoundError("weights.bin")

    models = {
        "raw": Model(lambda x: x, inputs=[TensorSpec("x", "UINT8", [-1])]),
        "fails": fail,
        "unloaded": Model(abs, load=no_weights),
    }
    loaded = schemathesis.openapi.from_asgi("/openapi.json", oip_app(models, max_body_size=100))
    request = {"inputs": [{"name": "x", "shape": [1], "datatype": "UINT8", "data": [1]}]}
    cases = [
        ("/health/ready", "GET", {}, {}, 400),
        ("/models/{model_name}/ready", "GET", {"model_name": "unloaded"}, {}, 400),
        ("/models/{model_name}/infer", "POST", {"model_name": "unloaded"}, {"body": request}, 503),
        ("/models/{model_name}/infer", "POST", {"model_name": "fails"}, {"body": request}, 500),
        ("/models/{model_name}/infer", "POST", {"model_name": "raw"}, {"body": {"inputs": 1}}, 400),
        ("/models/{model_name}/infer", "POST", {"model_name": "raw"}, {"body": {"inputs": [request] * 9}}, 413),
        ("/models/{model_name}/infer", "POST", {"model_name": "raw"}, {"headers": {"Content-Encoding": "br"}}, 415),
        ("/models/{model_name}/versions/{model_version}", "GET", {"model_name": "raw", "model_version": "7"}, {}, 404),
        (
            "/models/{model_name}/infer",
            "POST",
            {"model_name": "raw"},
            {
                "body": b"\x01\x02",
                "media_type": "application/octet-stream",
                "headers": {"Inference-Header-Content-Length": "0"},
            },
            200,
        ),
    ]
    for path, method, parameters, extra, status in cases:
        if method == "POST":
            extra = {"body": request, "media_type": "application/json", **extra}
        case = loaded[path][method].Case(path_parameters=parameters, **extra)
        response = case.call_and_validate(checks=CHECKS[1:])  # the 500 is declared here, and is the point
        assert response.status_code == status, (path, parameters, response.text)
    assert response.headers["content-type"] == ["application/octet-stream"]


def test_an_app_without_models_still_has_a_valid_document() -> None:
    loaded = schemathesis.openapi.from_asgi("/openapi.json", oip_app({}))
    loaded.validate()
    assert loaded.raw_schema["paths"]["/models/{model_name}"]["parameters"][0]["schema"] == {"type": "string"}


async def test_only_get_serves_the_document() -> None:
    async with client(oip_app({})) as http:
        response = await http.post("/openapi.json")
    assert (response.status_code, response.headers["allow"]) == (405, "GET")


async def test_a_model_name_with_a_newline_reaches_the_mounted_app() -> None:
    # Found by schemathesis: Starlette's Mount pattern stopped at "\n", so the host answered its own 404.
    host = Starlette()
    mount(host, {"m": abs}, path="/v2")
    async with client(host) as http:
        response = await http.get("/v2/models/a%0Ab/ready")
    assert (response.status_code, response.json()) == (
        404,
        {"error": "Request for unknown model: 'a\nb' is not found; the models are m"},
    )
