"""Restricted APIs (Triton's --http-restricted-api and --grpc-restricted-protocol) over both wires, in process."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import httpx
import pytest

from oip_asgi import oip_app
from oip_asgi._declarations.restricted import GROUPS, restrictions
from oip_asgi._hosts.cli import main
from oip_asgi.grpc import inference_pb2 as pb
from tests.apps.guard import models
from tests.support.grpc import grpc_server

# One request of each group this server has, on each wire.
REST = {
    "health": ("GET", "/health/ready", None),
    "metadata": ("GET", "/models/identity", None),
    "inference": (
        "POST",
        "/models/identity/infer",
        {"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [1.0]}]},
    ),
    "model-config": ("GET", "/models/identity/config", None),
    "model-repository": ("POST", "/repository/index", {}),
    "statistics": ("GET", "/models/stats", None),
    "trace": ("GET", "/trace/setting", None),
    "logging": ("POST", "/logging", {"log_info": True}),
    # An extension this server does not offer: its endpoints answer 501 saying so, behind their guard.
    "shared-memory": ("GET", "/systemsharedmemory/status", None),
}
GRPC: dict[str, tuple[str, Any]] = {
    "health": ("ServerLive", pb.ServerLiveRequest()),
    "metadata": ("ModelMetadata", pb.ModelMetadataRequest(name="identity")),
    "inference": ("ModelInfer", pb.ModelInferRequest(
        model_name="identity",
        inputs=[pb.ModelInferRequest.InferInputTensor(
            name="X", datatype="FP32", shape=[1], contents=pb.InferTensorContents(fp32_contents=[1.0])
        )],
    )),
    "model-config": ("ModelConfig", pb.ModelConfigRequest(name="identity")),
    "model-repository": ("RepositoryIndex", pb.RepositoryIndexRequest()),
    "statistics": ("ModelStatistics", pb.ModelStatisticsRequest()),
    "trace": ("TraceSetting", pb.TraceSettingRequest(model_name="identity")),
    "logging": ("LogSettings", pb.LogSettingsRequest()),
    # An empty message: this proto has none of the extension the server does not offer.
    "shared-memory": ("CudaSharedMemoryRegister", pb.ServerLiveRequest()),
}  # fmt: skip
RESPONSES = {
    "ServerLive": pb.ServerLiveResponse,
    "ModelMetadata": pb.ModelMetadataResponse,
    "ModelInfer": pb.ModelInferResponse,
    "ModelConfig": pb.ModelConfigResponse,
    "RepositoryIndex": pb.RepositoryIndexResponse,
    "ModelStatistics": pb.ModelStatisticsResponse,
    "TraceSetting": pb.TraceSettingResponse,
    "LogSettings": pb.LogSettingsResponse,
}


def rest(app: Any, group: str, headers: dict[str, str] | None = None) -> httpx.Response:
    method, path, body = REST[group]

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://oip") as client:
            return await client.request(method, path, json=body, headers=headers)

    return asyncio.run(call())


def served(response: httpx.Response) -> bool:
    """Answered by the endpoint: 200, the 404 of the repository extension on an app with no repository, or the
    501 of an extension the server does not offer."""
    if response.status_code == 501:
        return b"this server does not offer" in response.content
    return response.status_code == 200 or (response.status_code == 404 and b"restricted" not in response.content)


@pytest.mark.parametrize("group", sorted(REST))
def test_rest_refuses_a_restricted_group_as_triton_does(group: str) -> None:
    app = oip_app(models, restricted_apis=[f"{group}:admin-key=s3cret"])
    for headers in (None, {"admin-key": "wrong"}, {"admin-key": "s3cret "}, {"other-key": "s3cret"}):
        response = rest(app, group, headers)
        assert response.status_code == 403
        assert response.content == b'{"error":"This API is restricted, expecting header \'admin-key\'"}'
    assert served(rest(app, group, {"Admin-Key": "s3cret"}))
    for other in set(REST) - {group}:  # other groups are not touched
        assert served(rest(app, other)), other


def test_rest_refuses_a_restricted_path_whatever_the_method() -> None:
    app = oip_app(models, restricted_apis={"model-repository": ("admin-key", "s3cret")})

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://oip") as client:
            return await client.get("/repository/index")

    assert asyncio.run(call()).status_code == 403


def test_several_keys_guard_their_own_groups() -> None:
    app = oip_app(models, restricted_apis=["model-repository,statistics:admin-key=a", "inference:infer-key=i"])
    assert served(rest(app, "statistics", {"admin-key": "a"}))
    assert rest(app, "statistics", {"infer-key": "i"}).status_code == 403
    assert served(rest(app, "inference", {"infer-key": "i"}))
    assert json.loads(rest(app, "inference", {"admin-key": "a"}).content) == {
        "error": "This API is restricted, expecting header 'infer-key'"
    }


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (["inferences:k=v"], "unknown restricted API 'inferences'"),
        (["health:k=v", "health,metadata:k2=v"], "restricted API 'health' is named twice"),
        (["health,health:k=v"], "restricted API 'health' is named twice"),
        (["health"], "is not <API>[,<API>...]:<key>=<value>"),
        (["health:k"], "is not <API>[,<API>...]:<key>=<value>"),
        ([":k=v"], "is not <API>[,<API>...]:<key>=<value>"),
        (["health:bad key=v"], "is not a header name"),
    ],
)
def test_malformed_rules_are_refused(rules: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(".", r"\.")):
        restrictions(rules)


def test_every_triton_group_is_accepted_and_a_value_may_hold_colons() -> None:
    found = restrictions([",".join(GROUPS) + ":key=a:b=c"])
    assert set(found) == set(GROUPS)
    assert found["health"].value == "a:b=c"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--http-restricted-api", "inferencing:k=v"], "--http-restricted-api: unknown restricted API 'inferencing'"),
        (
            ["--http-restricted-api", "health:k=v", "--http-restricted-api", "health:j=w"],
            "--http-restricted-api: restricted API 'health' is named twice",
        ),
        (
            ["--grpc-port", "0", "--grpc-restricted-protocol", "stats:k=v"],
            "--grpc-restricted-protocol: unknown restricted API 'stats'",
        ),
        (["--grpc-restricted-protocol", "health:k=v"], "--grpc-restricted-protocol goes with --grpc-port"),
        (["--grpc-port", "0", "--grpc-use-ssl"], "--grpc-server-cert FILE is needed"),
        (["--grpc-port", "0", "--grpc-use-ssl=1"], "--grpc-server-cert FILE is needed"),
        (["--grpc-server-cert", "x.pem"], "go with --grpc-use-ssl"),
        (["--ssl-certfile", "x.pem"], "--ssl-certfile and --ssl-keyfile go together"),
        (["--ssl-certfile", "x.pem", "--ssl-keyfile", "y.pem"], "--ssl-certfile 'x.pem' is not a file"),
    ],
)
def test_security_usage_errors_exit_2(arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "tests.apps.guard:models", *arguments]) == 2
    assert message in capsys.readouterr().err


def test_grpc_use_ssl_0_is_plaintext(capsys: pytest.CaptureFixture[str]) -> None:
    # =0 drops the flag, so the cert options beside it are refused as going without --grpc-use-ssl.
    assert main(["serve", "tests.apps.guard:models", "--grpc-use-ssl=0", "--grpc-server-cert", "x"]) == 2
    assert "go with --grpc-use-ssl" in capsys.readouterr().err


def _unary(channel: grpc.Channel, group: str, metadata: list[tuple[str, str]] | None) -> Any:
    method, message = GRPC[group]
    call = channel.unary_unary(
        f"/inference.GRPCInferenceService/{method}",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=RESPONSES.get(method, pb.ServerLiveResponse).FromString,
    )
    return call(message, metadata=metadata, timeout=10)


def grpc_served(channel: grpc.Channel, group: str, metadata: list[tuple[str, str]] | None) -> bool:
    """Answered by the RPC: a response, the UNIMPLEMENTED of the repository extension with no repository, or
    that of an extension the server does not offer."""
    try:
        _unary(channel, group, metadata)
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.UNIMPLEMENTED:  # type: ignore[attr-defined]
            return False
        return group == "model-repository" or "this server does not offer" in error.details()  # type: ignore[attr-defined]
    return True


@pytest.mark.parametrize("group", sorted(GRPC))
def test_grpc_refuses_a_restricted_group_as_triton_does(group: str) -> None:
    app = oip_app(models)
    with grpc_server(app, restricted_protocols=[f"{group}:admin-key=s3cret"]) as address:
        with grpc.insecure_channel(address) as channel:
            for metadata in (None, [("triton-grpc-protocol-admin-key", "no")], [("admin-key", "s3cret")]):
                with pytest.raises(grpc.RpcError) as refused:
                    _unary(channel, group, metadata)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
                assert refused.value.details() == (
                    "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"
                )
            assert grpc_served(channel, group, [("triton-grpc-protocol-admin-key", "s3cret")])
            for other in set(GRPC) - {group}:
                assert grpc_served(channel, other, None), other


def test_a_restricted_stream_ends_before_a_request_is_read() -> None:
    app = oip_app(models)

    async def calls(address: str) -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            stream = channel.stream_stream(
                "/inference.GRPCInferenceService/ModelStreamInfer",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=pb.ModelStreamInferResponse.FromString,
            )
            # Nothing written and the client's half left open: only a server that decides before reading ends it.
            refused = stream(timeout=10)
            assert await refused.code() == grpc.StatusCode.UNAVAILABLE
            assert await refused.details() == (
                "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'"
            )
            allowed = stream(metadata=(("triton-grpc-protocol-infer-key", "k"),), timeout=10)
            await allowed.write(GRPC["inference"][1])
            answer = await allowed.read()
            assert not answer.error_message and answer.infer_response.model_name == "identity"
            await allowed.done_writing()
            assert await allowed.code() == grpc.StatusCode.OK

    with grpc_server(app, restricted_protocols=["inference:infer-key=k"]) as address:
        asyncio.run(calls(address))


def test_the_serve_command_lets_slow_and_idle_clients_go_by_default() -> None:
    from oip_asgi._hosts.cli.arguments import parser, triton_booleans

    args = parser().parse_args(["serve", "m:models"])
    assert (args.timeout_request_read, args.grpc_stream_first_request_timeout) == (30.0, 60.0)
    assert triton_booleans(["--grpc-use-ssl=1", "--grpc-use-ssl-mutual=true", "--grpc-use-ssl=0", "x=1"]) == [
        "--grpc-use-ssl",
        "--grpc-use-ssl-mutual",
        "x=1",
    ]
