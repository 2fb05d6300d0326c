"""Triton's extensions from their one registry (`_core/extensions.py`): each entry's paths on REST, its RPCs on
gRPC, its name in server metadata and its paths in the OpenAPI document, together; and offering one is a
change of its entry plus its handlers (docs/architecture.md, "A new Triton extension")."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import types
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from oip_asgi import oip_app
from oip_asgi._core.extensions import REGISTRY, Extension, RestPath
from oip_asgi._declarations.errors import NotFound
from oip_asgi._http.routing import Router, Table, path_templates
from oip_asgi._rest import app as rest_app
from oip_asgi._rest.openapi import OPERATIONS, PARAMETERS
from oip_asgi._rest.responses import send_error, send_json

grpc = pytest.importorskip("grpc")

from oip_asgi.grpc._service import GROUPS, SERVICE, UNOFFERED, InferenceService  # noqa: E402

MODELS = {"m": lambda **inputs: inputs}
EXAMPLE = {"{name}": "m", "{version}": "1", "{region}": "r", "{rest}": "region/r/register"}


def request(app: Any, method: str, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://oip") as client:
            return await client.request(method, path, json={}, headers=headers)

    return asyncio.run(call())


def example(template: str) -> str:
    for parameter, value in EXAMPLE.items():
        template = template.replace(parameter, value)
    return "" if template == "/" else template


@pytest.mark.parametrize("extension", [entry for entry in REGISTRY if entry.paths], ids=lambda entry: entry.name)
def test_rest_serves_each_path_of_an_entry_behind_its_group(extension: Extension) -> None:
    app = oip_app(MODELS, restricted_apis={extension.group: ("key", "k")})
    for path in extension.paths:
        name = path.operation or extension.name
        (route,) = [route for route in app.routes if (route.pattern, route.name) == (path.pattern, name)]
        assert (route.group, route.methods, route.name) == (
            extension.group,
            path.methods,
            path.operation or extension.name,
        )
        for template in path_templates(path.pattern):
            for method in path.methods:
                url = example(template)
                assert request(app, method, url).status_code == 403, (method, url)
                answer = request(app, method, url, {"key": "k"})
                if path.operation:  # an offered one's, or the answering part of one not offered (CUDA's status)
                    assert answer.status_code not in (403, 405, 501), (method, url)
                    assert "no such path" not in answer.text, (method, url)
                else:
                    assert (answer.status_code, answer.json()) == (501, {"error": extension.not_offered}), (method, url)


def test_grpc_groups_its_rpcs_and_refuses_the_unoffered_as_the_registry_says() -> None:
    handler = InferenceService(oip_app(MODELS)).handler()
    for extension in REGISTRY:
        for name in extension.rpcs:
            assert GROUPS[name] == extension.group
            assert handler.service(types.SimpleNamespace(method=f"/{SERVICE}/{name}")) is not None, name
            if extension.offered or name in extension.answering:
                assert name not in UNOFFERED
                continue
            assert UNOFFERED[name] == (extension.group, extension.name)
            call = handler.service(types.SimpleNamespace(method=f"/{SERVICE}/{name}")).unary_unary
            context = AbortingContext()
            with pytest.raises(Aborted):
                asyncio.run(call(b"", context))
            assert context.aborted == (grpc.StatusCode.UNIMPLEMENTED, extension.not_offered)
    named = {name for extension in REGISTRY for name in extension.rpcs}
    assert set(UNOFFERED) <= named <= set(GROUPS)


class Aborted(Exception):
    pass


class AbortingContext:
    aborted: tuple[Any, str] | None = None

    def invocation_metadata(self) -> tuple[()]:
        return ()

    async def abort(self, code: Any, details: str) -> None:
        self.aborted = (code, details)
        raise Aborted


def test_server_metadata_lists_the_offered_entries(tmp_path: Path) -> None:
    always = sorted(entry.name for entry in REGISTRY if entry.offered and entry.listed == "always")
    without = oip_app(MODELS, shared_memory_unavailable="no /dev/shm here")
    assert request(without, "GET", "").json()["extensions"] == always
    with_memory = sorted([*always, *(entry.name for entry in REGISTRY if entry.listed == "with shared memory")])
    assert with_memory == sorted([*always, "system_shared_memory"])
    assert request(oip_app(MODELS), "GET", "").json()["extensions"] == with_memory
    with_repository = sorted([*with_memory, *(entry.name for entry in REGISTRY if entry.listed == "with a repository")])
    assert request(oip_app(MODELS, model_repository=tmp_path), "GET", "").json()["extensions"] == with_repository


def test_the_openapi_document_s_paths_are_those_of_the_routes_it_describes() -> None:
    app = oip_app(MODELS)
    document = request(app, "GET", "/openapi.json").json()
    described = [route for route in app.routes if route.name in OPERATIONS]
    expected = set()
    for route in described:
        for template in path_templates(route.pattern):
            for name, documented in PARAMETERS.items():
                template = template.replace(f"{{{name}}}", f"{{{documented}}}")
            expected.add(template)
    assert set(document["paths"]) == expected
    generate = next(entry for entry in REGISTRY if entry.name == "generate")  # an extension's, described
    assert "/models/{model_name}/versions/{model_version}/generate_stream" in document["paths"]
    assert {path.operation for path in generate.paths} <= set(OPERATIONS)


def test_offering_an_extension_is_its_entry_and_its_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA shared memory, offered: its entry names its paths' operations and drops its text; REST routes them
    to the endpoints of those names (as the logging and trace extensions were offered, issue 39)."""
    core = oip_app(MODELS).core
    cuda = next(entry for entry in REGISTRY if entry.name == "cuda_shared_memory")
    offered = dataclasses.replace(
        cuda,
        paths=(
            RestPath("/cudasharedmemory/status", "cuda_status"),
            RestPath("/cudasharedmemory/unregister", "cuda_unregister", ("POST",)),
        ),
        not_offered="",
    )
    monkeypatch.setattr(rest_app, "REGISTRY", (offered,))
    regions = {"r": 64}

    async def cuda_status(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        await send_json(send, 200, regions)

    async def cuda_unregister(scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        regions.clear()
        await send_json(send, 200, regions)

    routes = rest_app.extension_routes({"cuda_status": cuda_status, "cuda_unregister": cuda_unregister})
    router = Router([("", Table(routes, core, send_error=send_error, not_found=NotFound))])
    assert request(router, "GET", "/cudasharedmemory/status").json() == {"r": 64}
    assert request(router, "POST", "/cudasharedmemory/unregister").json() == {}
    refused = request(router, "DELETE", "/cudasharedmemory/status")
    assert (refused.status_code, refused.headers["allow"]) == (405, "GET")
