"""Start-up imports what it serves (issue 40): a server of plain models, having answered an inference, has not
imported the wires, extensions and readers it does not serve; serving one of them imports it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.servers import child_env

# What a server of plain function models over REST never needs: other wires, a batcher, Triton's instances,
# decoupled models, the repository and its control, the Python backend, generate, the OpenAPI document, the
# metrics port, restricted APIs' hmac, and the libraries behind them.
NOT_SERVED = (
    "grpc",
    "oip_asgi.grpc",
    "oip_asgi._openai",
    "oip_asgi._core.batching",
    "oip_asgi._core.lanes",
    "oip_asgi._core.streaming",
    "oip_asgi._core.control",
    "oip_asgi._core.python_host",
    "oip_asgi._declarations.python_backend",
    "oip_asgi._declarations.repository",
    "oip_asgi._rest.generate",
    "oip_asgi._rest.openapi",
    "oip_asgi._hosts.cli.metrics_server",
    "prometheus_client",
    "hmac",
    "secrets",
    # Loading the models and taking no name's lock: anyio's asyncio backend and its synchronization modules
    # (about 20 modules) are for the threads and task groups of model control, load steps and shutdown.
    "anyio._backends",
    "anyio._core._synchronization",
    # The model files' modules (and zipfile) are for files; sysconfig for an error's message.
    "oip_asgi._declarations.files",
    "zipfile",
    "sysconfig",
)

PROBE = """
import asyncio, json, sys
import httpx
import oip_asgi
from oip_asgi._hosts.cli.served import Served

app = Served(oip_asgi.oip_app({"double": lambda x: x * 2}), openai=sys.argv[1] == "openai")

async def started():  # the ASGI lifespan's startup, as uvicorn runs it (the models loaded), left running
    messages, done = asyncio.Queue(), asyncio.get_running_loop().create_future()
    await messages.put({"type": "lifespan.startup"})

    async def send(message):  # startup's answer, then shutdown's
        if not done.done():
            done.set_result(message["type"])

    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    lifespan = asyncio.create_task(app(scope, messages.get, send))
    assert await done == "lifespan.startup.complete"
    return messages, lifespan

async def main():
    messages, lifespan = await started()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://server") as http:
        body = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}]}
        answer = await http.post("/v2/models/double/infer", json=body)
        assert answer.json()["outputs"][0]["data"] == [2, 4], answer.text
    modules = sorted(sys.modules)  # before the shutdown, which may import what stopping needs
    await messages.put({"type": "lifespan.shutdown"})
    await lifespan
    return modules

print(json.dumps(asyncio.run(main())))
"""


def imported(served: str) -> set[str]:
    """The modules a fresh process has imported once it has started (its lifespan's startup: the models
    loaded) and served a plain model (and `served`) an inference."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, served], env=child_env(), capture_output=True, text=True, check=True
    )
    return set(json.loads(result.stdout))


def loaded(modules: set[str], name: str) -> bool:
    return any(module == name or module.startswith(name + ".") for module in modules)


@pytest.mark.slow
def test_a_server_of_plain_models_imports_nothing_it_does_not_serve() -> None:
    modules = imported("rest")
    assert "oip_asgi._rest.app" in modules  # the probe served
    assert [name for name in NOT_SERVED if loaded(modules, name)] == []


@pytest.mark.slow
def test_serving_openai_imports_its_wire() -> None:
    assert loaded(imported("openai"), "oip_asgi._openai")
