"""Triton's extensions this server does not offer (registering CUDA shared memory) say so on both wires, with what
to do instead: Triton's UNSUPPORTED, HTTP 501 and gRPC UNIMPLEMENTED (issue 30). CUDA shared memory's status and
unregister answer as a Triton without GPUs does (tests/rest/test_shared_memory.py); the trace and log settings are
served since issue 39 (tests/core/test_trace_settings.py, tests/core/test_log_settings.py)."""

from __future__ import annotations

import asyncio

import grpc
import httpx
import pytest

from oip_asgi import oip_app
from oip_asgi.grpc._service import GROUPS, SERVICE, UNOFFERED
from tests.apps.guard import models
from tests.support.grpc import grpc_server

# Triton's paths of each (its clients' calls, as tritonclient.http sends them), and what the answer must name.
PATHS = [
    ("POST", "/v2/cudasharedmemory/region/output0/register", "CUDA shared memory"),
]
# What each tells a client to do instead.
INSTEAD = {
    "CUDA shared memory": "use system shared memory (tritonclient.utils.shared_memory",
}


def request(app: object, method: str, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://oip") as client:  # type: ignore[arg-type]
            return await client.request(method, path, json={}, headers=headers)

    return asyncio.run(call())


@pytest.mark.parametrize(("method", "path", "what"), PATHS, ids=[f"{m} {p}" for m, p, _ in PATHS])
def test_rest_says_the_extension_is_not_offered_and_what_instead(method: str, path: str, what: str) -> None:
    response = request(oip_app(models), method, path.removeprefix("/v2"))
    assert response.status_code == 501
    message = response.json()["error"]
    assert message.startswith(f"this server does not offer Triton's {what}")
    assert INSTEAD[what] in message


def test_rest_another_method_on_such_a_path_is_405() -> None:
    response = request(oip_app(models), "DELETE", "/cudasharedmemory/status")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"


def test_rest_such_paths_are_behind_their_restricted_group() -> None:
    app = oip_app(models, restricted_apis=["shared-memory:admin-key=k"])
    assert request(app, "GET", "/cudasharedmemory/register").status_code == 403
    assert request(app, "GET", "/cudasharedmemory/register", {"admin-key": "k"}).status_code == 501


def test_grpc_answers_triton_s_rpcs_unimplemented_saying_what_instead() -> None:
    assert set(UNOFFERED) == {"CudaSharedMemoryRegister"}
    with grpc_server(oip_app(models)) as address, grpc.insecure_channel(address) as channel:
        for name, (group, _) in UNOFFERED.items():
            with pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary(f"/{SERVICE}/{name}")(b"", timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED, name
            details = refused.value.details()
            assert details is not None and details.startswith("this server does not offer Triton's"), name
            assert "shared memory" in details, name
            assert GROUPS[name] == group
        with pytest.raises(grpc.RpcError) as unknown:  # an RPC Triton does not have either stays grpcio's
            channel.unary_unary(f"/{SERVICE}/NoSuchCall")(b"", timeout=10)
        assert unknown.value.details() == "Method not found!"


def test_grpc_such_rpcs_are_behind_their_restricted_group() -> None:
    with grpc_server(oip_app(models), restricted_protocols=["shared-memory:k=v"]) as address:
        with grpc.insecure_channel(address) as channel:
            call = channel.unary_unary(f"/{SERVICE}/CudaSharedMemoryRegister")
            with pytest.raises(grpc.RpcError) as refused:
                call(b"", timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            with pytest.raises(grpc.RpcError) as answered:
                call(b"", metadata=[("triton-grpc-protocol-k", "v")], timeout=10)
            assert answered.value.code() == grpc.StatusCode.UNIMPLEMENTED


@pytest.mark.slow
def test_tritonclients_own_calls_get_the_answer_from_the_serve_command() -> None:
    """tritonclient's CUDA shared-memory register, over both wires, against `oip-asgi serve --http-port`."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    from tests.support.servers import HOST, free_port, serving

    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "tests.apps.guard:models", "--host", HOST, "--http-port", str(port)]
    with serving([*argv, "--grpc-port", str(grpc_port), "--log-level", "warning"], port) as server:
        http = httpclient.InferenceServerClient(server.address)
        rpc = grpcclient.InferenceServerClient(f"{HOST}:{grpc_port}")
        try:
            calls = {
                "CUDA shared memory": [
                    lambda: http.register_cuda_shared_memory("r", "AAAA", 0, 8),
                    lambda: rpc.register_cuda_shared_memory("r", b"\0" * 64, 0, 8),
                ],
            }
            for what, clients in calls.items():
                for call in clients:
                    with pytest.raises(InferenceServerException) as refused:
                        call()
                    assert f"this server does not offer Triton's {what}" in str(refused.value), what
                    assert INSTEAD[what] in str(refused.value), what
        finally:
            http.close()
            rpc.close()
