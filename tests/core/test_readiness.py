"""Server readiness, strict (Triton's default: every model serves) or not (Triton's --strict-readiness=false:
ready once the loads at start have ended, even where one failed), and Triton's --http-port (issue 30)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from oip_asgi import Model, ModelRepository, TensorSpec, oip_app
from oip_asgi._hosts.cli.arguments import parser
from oip_asgi._hosts.cli.target import load_target
from tests.core.test_repository import broken_model, write_model
from tests.support.client import client

pytestmark = pytest.mark.anyio

SPECS: dict[str, Any] = {"inputs": [TensorSpec("x", "INT32", [-1])], "outputs": [TensorSpec("y", "INT32", [-1])]}


def broken() -> None:
    raise RuntimeError("weights missing")


def models() -> dict[str, Model]:
    return {"good": Model(lambda x: x, **SPECS), "broken": Model(lambda x: x, load=broken, **SPECS)}


async def readiness(app: Any, path: str = "/health/ready") -> tuple[int, bool]:
    async with client(app) as http:
        response = await http.get(path)
        return response.status_code, response.json()["ready"]


async def test_a_model_that_failed_to_load_keeps_a_strict_server_not_ready() -> None:
    app = oip_app(models())
    await app.load()
    assert await readiness(app) == (400, False)


async def test_without_strict_readiness_the_server_is_ready_once_the_loads_at_start_have_ended() -> None:
    app = oip_app(models(), strict_readiness=False)
    await app.load()
    assert await readiness(app) == (200, True)
    assert await readiness(app, "/models/broken/ready") == (400, False)  # each model still tells its own
    assert await readiness(app, "/models/good/ready") == (200, True)


async def test_without_strict_readiness_a_load_still_running_is_not_ready() -> None:
    release = threading.Event()
    app = oip_app({"slow": Model(lambda x: x, load=lambda: release.wait(30), **SPECS)}, strict_readiness=False)
    assert await readiness(app) == (400, False)  # the probe starts the loads; they wait on the event
    release.set()
    await app.load()
    assert await readiness(app) == (200, True)


async def test_a_repository_with_a_broken_model_in_mode_none(tmp_path: Path) -> None:
    write_model(tmp_path, "a")
    broken_model(tmp_path, "broken")
    strict = oip_app(model_repository=tmp_path)
    await strict.load()
    assert await readiness(strict) == (400, False)
    lenient = oip_app(model_repository=ModelRepository(tmp_path), strict_readiness=False)
    assert await readiness(lenient) == (400, False)  # its models are not even listed yet
    await lenient.load()
    assert await readiness(lenient) == (200, True)
    assert await readiness(lenient, "/models/broken/ready") == (400, False)


def test_the_command_line_takes_tritons_names() -> None:
    args = parser().parse_args(["serve", "m:a", "--http-port", "9100", "--strict-readiness=false"])
    assert (args.port, args.strict_readiness) == (9100, False)
    args = parser().parse_args(["serve", "m:a", "--strict-readiness", "1"])
    assert (args.port, args.strict_readiness) == (8000, True)
    assert parser().parse_args(["serve", "m:a"]).strict_readiness is None  # the app's own (Triton's default: true)


def test_the_command_line_refuses_a_readiness_that_is_not_a_boolean(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        parser().parse_args(["serve", "m:a", "--strict-readiness", "maybe"])
    assert usage.value.code == 2
    assert "--strict-readiness: must be true or false, got 'maybe'" in capsys.readouterr().err


async def test_the_serve_commands_choice_reaches_the_app(tmp_path: Path) -> None:
    broken_model(tmp_path, "broken")
    app = load_target(None, repository=ModelRepository(tmp_path), strict_readiness=False)
    await app.load()
    assert await readiness(app) == (200, True)
    built = load_target("tests.apps.guard:models")
    assert built.core.strict_readiness
