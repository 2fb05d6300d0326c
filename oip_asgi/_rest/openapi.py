"""The OpenAPI 3.1 document of an app: the paths of its route table, relative to where it is mounted.

Each route whose operation is described here (by its name) is in the document, at each path its pattern
stands for. Wire schemas are written by msgspec from the Structs in `_schemas`. The document is built
once, on first request; only `servers` (the mount point, the request's root_path) changes per request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .._core.metadata import ModelMetadata, ServerMetadata
from .._core.served import ServedModels
from .._core.server import ServerCore
from .._http.routing import Route, path_templates
from .schemas import InferenceResponse, encoder, nested_request_type

REF = "#/components/schemas/{name}"


# The small bodies _app.py sends as dicts, as Structs so that msgspec writes their schemas too.
class Error(msgspec.Struct):
    error: str


class Live(msgspec.Struct):
    live: bool


class Ready(msgspec.Struct):
    ready: bool


class ModelReady(msgspec.Struct):
    name: str
    ready: bool


BINARY = {"type": "string", "format": "binary"}
HEADER_LENGTH = {
    "description": "Binary tensor data extension: the length of the JSON header that starts the body, with "
    "binary tensor data after it; 0 makes the whole body the raw data of a single-input model.",
    "schema": {"type": "integer", "minimum": 0},
}
ERRORS = {
    400: "Invalid request (or version), naming the problem",
    404: "Unknown model or version",
    413: "Request body over the size limit",
    415: "Unsupported Content-Encoding",
    500: "The model raised, or its outputs do not fit its declaration",
    503: "The model failed to load or is saturated",
}


def _json(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": REF.format(name=name)}}}}


def _get(operation_id: str, name: str, description: str, *errors: int, not_ready: bool = False) -> dict[str, Any]:
    responses = {"200": _json(name, description)}
    responses.update({str(status): _json("Error", ERRORS[status]) for status in errors})
    if not_ready:  # health probes answer "no" with a 400 and the same body (or an error, for a bad version)
        schema: dict[str, Any] = {"$ref": REF.format(name=name)}
        if 400 in errors:
            schema = {"anyOf": [schema, {"$ref": REF.format(name="Error")}]}
        responses["400"] = {"description": "Not ready", "content": {"application/json": {"schema": schema}}}
    return {"get": {"operationId": operation_id, "responses": responses}}


def _infer(operation_id: str) -> dict[str, Any]:
    ok = _json("InferenceResponse", "Inference result, JSON or (with binary outputs) a JSON header and binary data")
    ok["content"]["application/octet-stream"] = {"schema": BINARY}
    ok["headers"] = {"Inference-Header-Content-Length": HEADER_LENGTH}
    errors = {str(status): _json("Error", text) for status, text in ERRORS.items()}
    return {
        "post": {
            "operationId": operation_id,
            "parameters": [{"name": "Inference-Header-Content-Length", "in": "header", **HEADER_LENGTH}],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": REF.format(name="InferenceRequest")}},
                    "application/octet-stream": {"schema": BINARY},
                },
            },
            "responses": {"200": ok, **errors},
        }
    }


GENERATE_REQUEST = {
    "type": "object",
    "description": "Triton's generate extension: keys that name the model's inputs are those inputs (a value or "
    "a flat list), the others (and those of `parameters`) are parameters.",
    "properties": {
        "id": {"type": "string"},
        "parameters": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
    },
    "additionalProperties": True,
}
ERROR = {"$ref": REF.format(name="Error")}
GENERATE_RESPONSE = {
    "type": "object",
    "description": "model_name, model_version, the request's id, the response's parameters, and each output "
    "by name (one element as that value, more as a flat list).",
    "properties": {"id": {"type": "string"}, "model_name": {"type": "string"}, "model_version": {"type": "string"}},
    "required": ["model_name", "model_version"],
    "additionalProperties": True,
}


def _event(data: dict[str, Any]) -> dict[str, Any]:
    """A server-sent event whose data is JSON of the schema `data` (as OpenAPI 3.2 describes an event stream)."""
    text = {"type": "string", "contentMediaType": "application/json", "contentSchema": data}
    return {"type": "object", "properties": {"data": text}, "required": ["data"]}


def _generate(operation_id: str, streaming: bool) -> dict[str, Any]:
    if streaming:
        ok: dict[str, Any] = {
            "description": "One server-sent event (`data: {json}`) per response, as the model yields them; a "
            'failure after the first as an event `{"error": ...}`',
            "content": {"text/event-stream": {"schema": _event({"anyOf": [GENERATE_RESPONSE, ERROR]})}},
        }
    else:
        ok = {"description": "The model's one response", "content": {"application/json": {"schema": GENERATE_RESPONSE}}}
    errors = {str(status): _json("Error", text) for status, text in ERRORS.items()}
    if streaming:  # an error the model raises before its first response: one event holding it, under its status
        for status in (500, 503):
            errors[str(status)]["content"]["text/event-stream"] = {"schema": _event(ERROR)}
    request = {"required": False, "content": {"application/json": {"schema": GENERATE_REQUEST}}}
    return {"post": {"operationId": operation_id, "requestBody": request, "responses": {"200": ok, **errors}}}


def _parameter(name: str, values: list[str]) -> dict[str, Any]:
    # An enum of what the app serves, so that generated requests reach real models.
    schema: dict[str, Any] = {"type": "string", "enum": values} if values else {"type": "string"}
    return {"name": name, "in": "path", "required": True, "schema": schema}


# Each operation described, by its route's name: its path item (without parameters) from its operationId and
# the errors its parameters add. Routes of other operations are served, and left out of the document.
OPERATIONS: dict[str, Callable[[str, tuple[int, ...]], dict[str, Any]]] = {
    "server_metadata": lambda operation, errors: _get(operation, "ServerMetadata", "Server metadata"),
    "server_live": lambda operation, errors: _get(operation, "Live", "Live"),
    "server_ready": lambda operation, errors: _get(operation, "Ready", "Every model is ready", not_ready=True),
    "openapi": lambda operation, errors: {
        "get": {"operationId": operation, "responses": {"200": {"description": "This document"}}}
    },
    "model_metadata": lambda operation, errors: _get(operation, "ModelMetadata", "Model metadata", *errors),
    "model_ready": lambda operation, errors: _get(
        operation, "ModelReady", "The model is ready", *errors, not_ready=True
    ),
    "model_infer": lambda operation, errors: _infer(operation),
    "model_generate": lambda operation, errors: _generate(operation, False),
    "model_generate_stream": lambda operation, errors: _generate(operation, True),
}
# A route's parameters, as the document names them.
PARAMETERS = {"name": "model_name", "version": "model_version"}


def build_document(server: ServerMetadata, served: ServedModels, routes: Sequence[Route]) -> dict[str, Any]:
    """The document of `routes` without `servers`, which depends on the request."""
    _, components = msgspec.json.schema_components(
        [nested_request_type(), InferenceResponse, ModelMetadata, ServerMetadata, Error, Live, Ready, ModelReady],
        ref_template=REF,
    )
    names = served.names()
    values = {
        "model_name": names,
        "model_version": sorted({version for name in names for version in served.versions(name)}),
    }
    paths: dict[str, Any] = {}
    for route in routes:
        describe = OPERATIONS.get(route.name)
        if describe is None:
            continue
        for template in path_templates(route.pattern):
            for name, documented in PARAMETERS.items():
                template = template.replace(f"{{{name}}}", f"{{{documented}}}")
            errors: tuple[int, ...]
            if "{model_version}" in template:
                # 400: a version that is not an integer, of a model whose versions all are
                operation, errors = route.name.replace("model_", "model_version_", 1), (400, 404)
            else:
                operation, errors = route.name, (404,) if "{model_name}" in template else ()
            item = describe(operation, errors)
            parameters = [_parameter(name, values[name]) for name in values if f"{{{name}}}" in template]
            paths[template] = {"parameters": parameters, **item} if parameters else item
    return {
        "openapi": "3.1.0",
        "info": {
            "title": server.name,
            "version": server.version,
            "description": "The Open Inference Protocol (KServe V2) REST API, with the extensions "
            + " and ".join(server.extensions),
        },
        "paths": paths,
        "components": {"schemas": components},
    }


class OpenAPI:
    """Serves the document of one app: built on first use and when its models change, then only
    `servers` is written per request."""

    def __init__(self, core: ServerCore, routes: Sequence[Route]) -> None:
        self._core = core
        self._routes = routes
        self._rest = b""
        self._generation = -1  # of the served models the document was built from

    def render(self, root_path: str) -> bytes:
        served = self._core.served
        if self._generation != served.generation:
            self._rest = encoder.encode(build_document(self._core.server_metadata, served, self._routes))
            self._generation = served.generation
        servers = encoder.encode([{"url": root_path or "/"}])
        return b'{"servers":' + servers + b"," + self._rest[1:]
