"""The Lambda handler driven with the events AWS sends, one per source, in-process and offline."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mangum")

import oip_asgi_lambda
from examples.models import models
from oip_asgi import Model, TensorSpec, oip_app
from tests.support.servers import ROOT, child_env

Event = dict[str, Any]
LAMBDA_EVENT_LIMIT = 6 * 2**20  # what Lambda accepts for a synchronous invocation
TEXT = {"content-type": "application/json"}


class Context:
    """What the Lambda runtime passes as `context` (the parts anyone reads)."""

    function_name = "OIPFunction"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:OIPFunction"
    memory_limit_in_mb = 1024
    aws_request_id = "6bc28136-xmpl-4365-b021-0ce6b2e64ab0"
    log_group_name = "/aws/lambda/OIPFunction"
    log_stream_name = "2026/11/22/[$LATEST]6bc28136"
    identity = None
    client_context = None

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


CONTEXT = Context()


def _headers(extra: dict[str, str] | None) -> dict[str, str]:
    return {
        "Host": "abc123.execute-api.eu-west-1.amazonaws.com",
        "User-Agent": "tritonclient",
        "X-Forwarded-For": "203.0.113.7",
        "X-Forwarded-Port": "443",
        "X-Forwarded-Proto": "https",
        **(extra or {}),
    }


def _body(body: bytes | None, encode: bool) -> tuple[str | None, bool]:
    if body is None:
        return None, False
    if encode:
        return base64.b64encode(body).decode(), True
    return body.decode(), False


def rest_event(method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> Event:
    """API Gateway REST API (payload 1.0), `BinaryMediaTypes: ["*/*"]`: every body arrives base64."""
    all_headers = _headers(headers)
    text, encoded = _body(body, encode=True)
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": {key: [value] for key, value in all_headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": "abc123.execute-api.eu-west-1.amazonaws.com",
            "httpMethod": method,
            "identity": {"sourceIp": "203.0.113.7", "userAgent": "tritonclient"},
            "path": f"/Prod{path}",
            "protocol": "HTTP/1.1",
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "resourcePath": "/{proxy+}",
            "stage": "Prod",
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


def http_api_event(
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    *,
    stage: str = "$default",
    domain: str = "abc123.execute-api.eu-west-1.amazonaws.com",
    route_key: str = "ANY /{proxy+}",
) -> Event:
    """API Gateway HTTP API (payload 2.0): a named stage shows in the path, binary bodies arrive base64."""
    raw_path = path if stage == "$default" else f"/{stage}{path}"
    binary = (headers or {}).get("Content-Type", "application/json") != "application/json"
    text, encoded = _body(body, encode=binary)
    return {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": "",
        "headers": {key.lower(): value for key, value in _headers(headers).items()},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": domain,
            "domainPrefix": domain.split(".")[0],
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "tritonclient",
            },
            "requestId": "JKJaXmPLvHcESHA=",
            "routeKey": route_key,
            "stage": stage,
            "time": "22/Nov/2026:15:04:13 +0000",
            "timeEpoch": 1795446253000,
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


def function_url_event(
    method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Event:
    event = http_api_event(
        method, path, body, headers, domain="a1b2c3d4e5f6g7h8.lambda-url.eu-west-1.on.aws", route_key="$default"
    )
    event["requestContext"].pop("domainPrefix")
    return event


def http_api_v1_event(
    method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Event:
    """An HTTP API integration set to payload format 1.0."""
    event = rest_event(method, path, body, headers)
    event["version"] = "1.0"
    del event["resource"]
    event["requestContext"]["stage"] = "$default"
    event["requestContext"]["path"] = path
    return event


def _alb_event(method: str, path: str, body: bytes | None, headers: dict[str, str] | None) -> Event:
    binary = (headers or {}).get("Content-Type", "application/json") != "application/json"
    text, encoded = _body(body, encode=binary)
    return {
        "requestContext": {
            "elb": {
                "targetGroupArn": "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/oip/6d0ecf831eec9f09"
            }
        },
        "httpMethod": method,
        "path": path,
        "queryStringParameters": {},
        "headers": {key.lower(): value for key, value in _headers(headers).items()},
        "body": text or "",
        "isBase64Encoded": encoded,
    }


def alb_event(method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> Event:
    return _alb_event(method, path, body, headers)


def alb_multi_value_event(
    method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Event:
    """An ALB target group with multi-value headers on: headers and query come as lists."""
    event = _alb_event(method, path, body, headers)
    event["multiValueHeaders"] = {key: [value] for key, value in event.pop("headers").items()}
    event["multiValueQueryStringParameters"] = event.pop("queryStringParameters")
    return event


SOURCES: dict[str, Callable[..., Event]] = {
    "rest": rest_event,
    "http-api": http_api_event,
    "http-api-v1": http_api_v1_event,
    "function-url": function_url_event,
    "alb": alb_event,
    "alb-multi-value": alb_multi_value_event,
}


@pytest.fixture(scope="module")
def handler() -> oip_asgi_lambda.OIPHandler:
    from examples.lambda_handler import handler

    return handler


def response_headers(response: dict[str, Any]) -> dict[str, str]:
    if "multiValueHeaders" in response and "headers" not in response:
        return {key.lower(): values[-1] for key, values in response["multiValueHeaders"].items()}
    headers = {key.lower(): value for key, value in response.get("headers", {}).items()}
    headers.update({key.lower(): values[-1] for key, values in response.get("multiValueHeaders", {}).items()})
    return headers


def response_body(response: dict[str, Any]) -> bytes:
    body: str = response.get("body", "")
    return base64.b64decode(body) if response.get("isBase64Encoded") else body.encode()


def response_json(response: dict[str, Any]) -> Any:
    assert response_headers(response)["content-type"].startswith("application/json"), response
    return json.loads(response_body(response))


def simple_json_request() -> bytes:
    a, b = list(range(16)), [1] * 16
    return json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a},
                {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": b},
            ]
        }
    ).encode()


def binary_request(inputs: dict[str, np.ndarray], datatype: str, outputs: list[str]) -> tuple[bytes, dict[str, str]]:
    header = {
        "inputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": datatype,
                "parameters": {"binary_data_size": array.nbytes},
            }
            for name, array in inputs.items()
        ],
    }
    if outputs:
        header["outputs"] = [{"name": name, "parameters": {"binary_data": True}} for name in outputs]
    head = json.dumps(header).encode()
    body = head + b"".join(array.tobytes() for array in inputs.values())
    return body, {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}


def binary_outputs(response: dict[str, Any]) -> tuple[dict[str, Any], dict[str, bytes]]:
    body = response_body(response)
    length = int(response_headers(response)["inference-header-content-length"])
    header = json.loads(body[:length])
    parts, position = {}, length
    for output in header["outputs"]:
        size = output.get("parameters", {}).get("binary_data_size")
        if size is not None:
            parts[output["name"]] = body[position : position + size]
            position += size
    assert position == len(body)
    return header, parts


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_server_metadata_at_the_exact_prefix(handler: oip_asgi_lambda.OIPHandler, source: Callable[..., Event]) -> None:
    response = handler(source("GET", "/v2"), CONTEXT)
    assert response["statusCode"] == 200
    assert response_json(response)["name"] == "oip-asgi"
    assert "binary_tensor_data" in response_json(response)["extensions"]


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_json_inference(handler: oip_asgi_lambda.OIPHandler, source: Callable[..., Event]) -> None:
    response = handler(source("POST", "/v2/models/simple/infer", simple_json_request(), TEXT), CONTEXT)
    assert response["statusCode"] == 200, response
    outputs = {output["name"]: output for output in response_json(response)["outputs"]}
    assert outputs["OUTPUT0"]["data"] == [value + 1 for value in range(16)]
    assert outputs["OUTPUT1"]["data"] == [value - 1 for value in range(16)]
    assert not response["isBase64Encoded"]


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_binary_inference_round_trips_base64(handler: oip_asgi_lambda.OIPHandler, source: Callable[..., Event]) -> None:
    a = np.arange(32, dtype=np.int32).reshape(2, 16) - 7
    b = np.full((2, 16), 2**30, dtype=np.int32)
    body, headers = binary_request({"INPUT0": a, "INPUT1": b}, "INT32", ["OUTPUT0", "OUTPUT1"])
    event = source("POST", "/v2/models/simple/infer", body, headers)
    assert event["isBase64Encoded"]

    response = handler(event, CONTEXT)

    assert response["statusCode"] == 200, response
    assert response["isBase64Encoded"]
    assert response_headers(response)["content-type"] == "application/octet-stream"
    header, parts = binary_outputs(response)
    assert header["model_name"] == "simple"
    np.testing.assert_array_equal(np.frombuffer(parts["OUTPUT0"], np.int32).reshape(2, 16), a + b)
    np.testing.assert_array_equal(np.frombuffer(parts["OUTPUT1"], np.int32).reshape(2, 16), a - b)


def test_alb_multi_value_headers_answer_in_kind(handler: oip_asgi_lambda.OIPHandler) -> None:
    response = handler(alb_multi_value_event("GET", "/v2/models/simple"), CONTEXT)
    assert response["statusCode"] == 200
    assert "headers" not in response
    assert response["multiValueHeaders"]["content-type"] == ["application/json"]
    assert json.loads(response["body"])["name"] == "simple"


def test_bytes_tensors_round_trip(handler: oip_asgi_lambda.OIPHandler) -> None:
    words = ["héllo".encode(), b"", b"\x00\xff"]
    tensor = b"".join(len(word).to_bytes(4, "little") + word for word in words)
    header = {
        "inputs": [
            {"name": "TEXT", "shape": [3], "datatype": "BYTES", "parameters": {"binary_data_size": len(tensor)}}
        ],
        "outputs": [{"name": "UPPER", "parameters": {"binary_data": True}}, {"name": "LENGTH"}],
    }
    head = json.dumps(header).encode()
    headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}

    response = handler(http_api_event("POST", "/v2/models/text/infer", head + tensor, headers), CONTEXT)

    assert response["statusCode"] == 200, response
    out_header, parts = binary_outputs(response)
    upper = [word.upper() for word in words]
    assert parts["UPPER"] == b"".join(len(word).to_bytes(4, "little") + word for word in upper)
    length = next(output for output in out_header["outputs"] if output["name"] == "LENGTH")
    assert length["data"] == [len(word) for word in words]


@pytest.mark.parametrize(
    ("method", "path", "status", "words"),
    [
        ("GET", "/v2/models/nope", 404, "nope"),
        ("GET", "/v2/models/simple/infer", 405, "POST"),
        ("GET", "/", 404, "/v2"),
        ("GET", "/v2x", 404, "/v2"),
        ("GET", "/api/v2/models/simple", 404, "/v2"),
    ],
    ids=["unknown-model", "wrong-method", "root", "prefix-lookalike", "unknown-base-path"],
)
@pytest.mark.parametrize("source", [rest_event, http_api_event], ids=["rest", "http-api"])
def test_errors_are_json(
    handler: oip_asgi_lambda.OIPHandler, source: Callable[..., Event], method: str, path: str, status: int, words: str
) -> None:
    response = handler(source(method, path), CONTEXT)
    assert response["statusCode"] == status
    assert words in response_json(response)["error"]


def test_invalid_json_is_a_400(handler: oip_asgi_lambda.OIPHandler) -> None:
    response = handler(rest_event("POST", "/v2/models/simple/infer", b'{"inputs": [', TEXT), CONTEXT)
    assert response["statusCode"] == 400
    assert response_json(response)["error"]


def test_a_model_that_raises_is_a_json_500() -> None:
    def broken(INPUT0: np.ndarray) -> np.ndarray:
        raise RuntimeError("out of cheese")

    handler = oip_asgi_lambda.handler({"broken": broken})
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1.0]}]}).encode()
    response = handler(http_api_event("POST", "/v2/models/broken/infer", body, TEXT), CONTEXT)
    assert response["statusCode"] == 500
    assert response_json(response)["error"]


def test_on_lambda_system_shared_memory_says_there_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "oip")  # as Lambda's runtime sets it
    handler = oip_asgi_lambda.handler(models)
    assert "system_shared_memory" not in response_json(handler(http_api_event("GET", "/v2"), CONTEXT))["extensions"]
    body = json.dumps({"key": "/input_simple", "byte_size": 64}).encode()
    response = handler(http_api_event("POST", "/v2/systemsharedmemory/region/r/register", body, TEXT), CONTEXT)
    assert response["statusCode"] == 501
    assert response_json(response)["error"].startswith(
        "system shared memory is not available here: AWS Lambda shares no memory with its clients"
    )


@pytest.mark.parametrize("stage", ["prod", "v2"], ids=["stage-prod", "stage-named-like-the-prefix"])
def test_http_api_named_stage_prefix(handler: oip_asgi_lambda.OIPHandler, stage: str) -> None:
    event = http_api_event("GET", "/v2/models/simple", stage=stage)
    assert event["rawPath"] == f"/{stage}/v2/models/simple"
    response = handler(event, CONTEXT)
    assert response["statusCode"] == 200, response
    assert response_json(response)["name"] == "simple"

    # A custom domain maps to the stage: the same function then sees paths without it.
    event = http_api_event("GET", "/v2/models/simple", stage=stage, domain="models.example.com")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/v2/models/simple"
    assert handler(event, CONTEXT)["statusCode"] == 200


def test_rest_stage_exact_prefix_is_not_redirected(handler: oip_asgi_lambda.OIPHandler) -> None:
    # https://abc123.execute-api.eu-west-1.amazonaws.com/Prod/v2: a redirect to /v2/ would drop the stage.
    event = rest_event("GET", "/v2")
    assert event["requestContext"]["path"] == "/Prod/v2"
    response = handler(event, CONTEXT)
    assert response["statusCode"] == 200
    assert "location" not in response_headers(response)


@pytest.mark.parametrize("base_path", ["/inference", "inference", "/inference/"])
def test_api_gateway_base_path_of_a_custom_domain(base_path: str) -> None:
    handler = oip_asgi_lambda.handler(models, api_gateway_base_path=base_path, preload=False)
    # https://api.example.com/inference/v2/... through a base path mapping
    response = handler(rest_event("GET", "/inference/v2/models/simple"), CONTEXT)
    assert response["statusCode"] == 200, response
    assert response_json(response)["name"] == "simple"
    # the same function reached on its execute-api endpoint, without the mapping
    assert handler(rest_event("GET", "/v2/models/simple"), CONTEXT)["statusCode"] == 200
    assert handler(rest_event("GET", "/inference/models/simple"), CONTEXT)["statusCode"] == 404


def test_root_path_names_what_was_stripped() -> None:
    seen: list[tuple[str, str]] = []

    async def spy(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append((scope["root_path"], scope["path"]))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    handler = oip_asgi_lambda.OIPHandler(spy, preload=False, api_gateway_base_path="/inference/")  # type: ignore[arg-type]
    handler(http_api_event("GET", "/v2/models/x", stage="prod"), CONTEXT)
    handler(rest_event("GET", "/inference/v2"), CONTEXT)
    handler(alb_event("GET", "/v2/health/live"), CONTEXT)
    assert seen == [
        ("/prod/v2", "/prod/v2/models/x"),
        ("/inference/v2", "/inference/v2"),
        ("/v2", "/v2/health/live"),
    ]


def test_prefix_is_configurable() -> None:
    handler = oip_asgi_lambda.handler(models, prefix="")
    assert handler(http_api_event("GET", "/models/simple"), CONTEXT)["statusCode"] == 200
    assert handler(http_api_event("GET", "/models/simple", stage="prod"), CONTEXT)["statusCode"] == 200
    with pytest.raises(ValueError, match="prefix"):
        oip_asgi_lambda.handler(models, prefix="v2/")


def _uint8_request(size: int) -> tuple[bytes, dict[str, str]]:
    """A binary request to identity_uint8 whose body is exactly `size` bytes."""
    head_length = 0
    for _ in range(3):  # the header's length depends on the tensor size written in it
        tensor = np.full(size - head_length, 7, np.uint8)
        body, headers = binary_request({"INPUT0": tensor}, "UINT8", ["OUTPUT0"])
        head_length = int(headers["Inference-Header-Content-Length"])
    assert len(body) == size
    return body, headers


@pytest.mark.parametrize(
    "source", [rest_event, http_api_event, function_url_event], ids=["rest", "http-api", "function-url"]
)
def test_the_default_limit_fits_lambdas_event_and_one_byte_more_is_a_413(
    handler: oip_asgi_lambda.OIPHandler, source: Callable[..., Event]
) -> None:
    body, headers = _uint8_request(oip_asgi_lambda.MAX_BODY_SIZE)
    event = source("POST", "/v2/models/identity_uint8/infer", body, headers)
    assert len(json.dumps(event)) < LAMBDA_EVENT_LIMIT  # AWS would deliver it

    response = handler(event, CONTEXT)

    assert response["statusCode"] == 200, response_body(response)[:500]
    assert len(json.dumps(response)) < LAMBDA_EVENT_LIMIT  # and take the answer back
    _, parts = binary_outputs(response)
    assert parts["OUTPUT0"] == body[-len(parts["OUTPUT0"]) :]

    body, headers = _uint8_request(oip_asgi_lambda.MAX_BODY_SIZE + 1)
    response = handler(source("POST", "/v2/models/identity_uint8/infer", body, headers), CONTEXT)
    assert response["statusCode"] == 413
    error = response_json(response)["error"]
    for words in ["6 MB", "base64", "already binary", "split the batch", "S3"]:
        assert words in error
    assert "send tensors in binary" not in error  # advice the request already follows


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_a_json_request_over_the_limit_is_told_to_go_binary(
    handler: oip_asgi_lambda.OIPHandler, source: Callable[..., Event]
) -> None:
    count = oip_asgi_lambda.MAX_BODY_SIZE // 4
    tensor = {"name": "INPUT0", "shape": [count], "datatype": "UINT8", "data": [255] * count}
    body = json.dumps({"inputs": [tensor]}).encode()
    assert len(body) > oip_asgi_lambda.MAX_BODY_SIZE

    response = handler(source("POST", "/v2/models/identity_uint8/infer", body, TEXT), CONTEXT)

    assert response["statusCode"] == 413
    error = response_json(response)["error"]
    for words in ["6 MB", "send tensors in binary", "3-4x smaller", "split the batch"]:
        assert words in error
    assert "already binary" not in error


@pytest.mark.parametrize("name", ["Inference-Header-Content-Length", "INFERENCE-HEADER-CONTENT-LENGTH"])
def test_binary_is_recognised_by_its_header_in_any_case(name: str) -> None:
    handler = oip_asgi_lambda.handler({"identity_uint8": models["identity_uint8"]}, max_body_size=1000)
    body, headers = _uint8_request(1001)
    headers[name] = headers.pop("Inference-Header-Content-Length")
    for source in [rest_event, http_api_event, alb_multi_value_event]:
        response = handler(source("POST", "/v2/models/identity_uint8/infer", body, headers), CONTEXT)
        assert response["statusCode"] == 413
        assert "already binary" in response_json(response)["error"]


def test_a_configured_limit_is_exact() -> None:
    handler = oip_asgi_lambda.handler({"identity_uint8": models["identity_uint8"]}, max_body_size=1000)
    for size, status in [(1000, 200), (1001, 413)]:
        body, headers = _uint8_request(size)
        response = handler(alb_event("POST", "/v2/models/identity_uint8/infer", body, headers), CONTEXT)
        assert response["statusCode"] == status
    assert "1000 bytes" in response_json(response)["error"]


@pytest.mark.parametrize(
    ("source", "size"),
    [(rest_event, 3 * 2**20), (alb_event, 2**19)],
    ids=["rest-6MiB", "alb-1MB"],
)
def test_a_response_too_large_for_lambda_is_a_clear_error(
    handler: oip_asgi_lambda.OIPHandler, source: Callable[..., Event], size: int
) -> None:
    # A small binary request whose JSON answer ("255,255,...") is 4x larger: over the limit.
    tensor = np.full(size, 255, np.uint8)
    body, headers = binary_request({"INPUT0": tensor}, "UINT8", [])
    response = handler(source("POST", "/v2/models/identity_uint8/infer", body, headers), CONTEXT)
    assert response["statusCode"] == 500
    error = response_json(response)["error"]
    assert "binary_data_output" in error and "smaller batches" in error

    # The same answer in binary fits.
    body, headers = binary_request({"INPUT0": tensor}, "UINT8", ["OUTPUT0"])
    response = handler(source("POST", "/v2/models/identity_uint8/infer", body, headers), CONTEXT)
    assert response["statusCode"] == 200
    assert binary_outputs(response)[1]["OUTPUT0"] == tensor.tobytes()


def _counting_model(loads: list[str]) -> Model:
    return Model(
        lambda X: X,
        inputs=[TensorSpec("X", "FP32", [-1])],
        outputs=[TensorSpec("Y", "FP32", [-1])],
        load=lambda: loads.append("loaded"),
    )


def test_models_load_once_at_init_not_per_invocation() -> None:
    loads: list[str] = []
    handler = oip_asgi_lambda.handler({"m": _counting_model(loads)})
    assert loads == ["loaded"]  # in Lambda's init phase
    for _ in range(3):
        assert handler(http_api_event("GET", "/v2/models/m/ready"), CONTEXT)["statusCode"] == 200
    assert loads == ["loaded"]


def test_models_load_lazily_once_without_preload() -> None:
    loads: list[str] = []
    handler = oip_asgi_lambda.handler({"m": _counting_model(loads)}, preload=False)
    assert loads == []
    body = json.dumps({"inputs": [{"name": "X", "shape": [2], "datatype": "FP32", "data": [1, 2]}]}).encode()
    for _ in range(3):
        response = handler(http_api_event("POST", "/v2/models/m/infer", body, TEXT), CONTEXT)
        assert response_json(response)["outputs"][0]["data"] == [1.0, 2.0]
    assert loads == ["loaded"]


def test_an_existing_oip_app_is_served_as_is() -> None:
    app = oip_app(models, name="mine")
    handler = oip_asgi_lambda.handler(app, preload=False)
    assert handler.oip_app is app
    assert response_json(handler(function_url_event("GET", "/v2"), CONTEXT))["name"] == "mine"


def test_still_serves_after_asyncio_run_in_init_code(handler: oip_asgi_lambda.OIPHandler) -> None:
    # asyncio.run() leaves the thread without a current event loop, which Mangum relies on.
    asyncio.run(asyncio.sleep(0))
    assert handler(http_api_event("GET", "/v2/health/ready"), CONTEXT)["statusCode"] == 200


@pytest.mark.slow
def test_import_pulls_in_no_web_framework() -> None:
    # A fresh interpreter, as in Lambda's init phase: what `import oip_asgi_lambda` loads.
    code = "import json, sys, oip_asgi_lambda; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    modules = set(json.loads(result.stdout))
    loaded = {name.split(".")[0] for name in modules}
    assert {"oip_asgi", "oip_asgi_lambda", "mangum", "numpy"} <= loaded
    # Starlette's app and router are for mounting; the Lambda handler serves the bare OIP app.
    assert modules & {"starlette.applications", "starlette.routing", "oip_asgi._hosts.mount"} == set()
    heavy = {"django", "flask", "werkzeug", "a2wsgi", "fastapi", "pydantic", "uvicorn", "httpx", "boto3", "botocore"}
    heavy |= {"oip_asgi_django", "oip_asgi_flask", "pandas", "tritonclient", "gevent"}
    assert loaded & heavy == set()


@pytest.mark.slow
def test_import_time_bench_runs() -> None:
    result = subprocess.run(
        [sys.executable, "bench/lambda_import_time.py", "--runs", "1", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["oip_asgi_lambda"]["median_ms"] > 0
    assert "numpy" in report["oip_asgi_lambda"]["heaviest_ms"]  # by far the heaviest: no machine's load reorders it
    # The example's own import (its models built and loaded) is counted: whether it is among the heaviest
    # depends on the machine's load, so its presence is what is checked.
    assert "examples" in report["examples.lambda_handler"]["packages"]
    assert report["examples.lambda_repository"]["median_ms"] > 0


def test_a_packed_model_repository_is_read_and_loaded_in_the_init_phase() -> None:
    import examples.lambda_repository as packed

    handler = packed.handler
    index = response_json(handler(http_api_event("POST", "/v2/repository/index", b"{}", TEXT), CONTEXT))
    assert {(entry["name"], entry["state"]) for entry in index} == {("animals", "READY"), ("simple", "READY")}
    a = list(range(16))
    body = {
        "inputs": [{"name": name, "shape": [1, 16], "datatype": "INT32", "data": a} for name in ("INPUT0", "INPUT1")]
    }
    answer = response_json(
        handler(http_api_event("POST", "/v2/models/simple/infer", json.dumps(body).encode(), TEXT), CONTEXT)
    )
    assert {output["name"]: output["data"] for output in answer["outputs"]} == {
        "OUTPUT0": [2 * x for x in a],
        "OUTPUT1": [0] * 16,
    }
    body = {
        "inputs": [{"name": "FEATURES", "shape": [1, 4], "datatype": "FP32", "data": [0, 0, 0, 1]}],
        "outputs": [{"name": "SCORES", "parameters": {"classification": 1}}],
    }
    answer = response_json(
        handler(http_api_event("POST", "/v2/models/animals/infer", json.dumps(body).encode(), TEXT), CONTEXT)
    )
    assert answer["outputs"][0]["data"][0].endswith(":2:bird")  # the label file's names, through classification
    config = response_json(handler(http_api_event("GET", "/v2/models/animals/config"), CONTEXT))
    assert config["output"][0]["label_filename"] == "labels.txt" and config["max_batch_size"] == 32
