"""docs/deploy.md: each recipe is its file in the repository, every option is documented, and the
worker-process recipes run as written (with a free port, and two workers rather than four)."""

from __future__ import annotations

import argparse
import ast
import re
import shlex
import signal

import pytest

from oip_asgi._hosts.cli import parser
from tests.support.servers import HOST, ROOT, free_port, serving, triton_round_trip

DOC = ROOT / "docs" / "deploy.md"
RECIPE = re.compile(r"<!-- recipe: (?P<name>\S+) -->\n```(?P<language>[a-z]*)\n(?P<code>.*?)```", re.DOTALL)
FILES = [
    "Dockerfile",
    "deploy/kserve/servingruntime.yaml",
    "deploy/kserve/inferenceservice.yaml",
    "deploy/kserve/servingruntime-models.yaml",
    "deploy/kserve/inferenceservice-sklearn.yaml",
    "examples/ray_serve.py",
    "deploy/ray/serve.yaml",
    "examples/lambda_handler.py",
    "deploy/lambda/Dockerfile",
    "deploy/lambda/template-image.yaml",
]
COMMANDS = ["sh:workers", "sh:gunicorn"]


def recipes() -> dict[str, str]:
    return {match["name"]: match["code"] for match in RECIPE.finditer(DOC.read_text())}


def without_docstring(source: str) -> str:
    if ast.get_docstring(ast.parse(source), clean=False) is None:
        return source
    end = source.index('"""', source.index('"""') + 3) + 3
    return source[end:].lstrip("\n")


def test_every_target_has_its_recipes() -> None:
    assert sorted(recipes()) == sorted([*FILES, *COMMANDS])


@pytest.mark.parametrize("name", FILES)
def test_recipe_is_its_file(name: str) -> None:
    text = (ROOT / name).read_text()
    assert recipes()[name] == (without_docstring(text) if name.endswith(".py") else text)


def test_every_option_of_the_command_is_in_the_table() -> None:
    text = DOC.read_text()
    (subcommands,) = [action for action in parser()._actions if isinstance(action, argparse._SubParsersAction)]
    options = [option for action in subcommands.choices["serve"]._actions for option in action.option_strings]
    assert [option for option in options if option not in ("-h", "--help") and f"| `{option}" not in text] == []


def test_the_page_is_finished() -> None:
    assert "COLD_START_TABLE" not in DOC.read_text()


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.slow
def test_worker_recipe_serves_tritonclient_and_stops_cleanly(name: str) -> None:
    if name == "sh:gunicorn":
        pytest.importorskip("gunicorn")
        pytest.importorskip("uvicorn_worker")
    (line,) = recipes()[name].strip().splitlines()
    port = free_port()
    local = {"0.0.0.0": HOST, "8080": str(port), "0.0.0.0:8080": f"{HOST}:{port}", "4": "2"}
    program, *arguments = [local.get(word, word) for word in shlex.split(line)]
    module = {"oip-asgi": "oip_asgi", "gunicorn": "gunicorn"}[program]
    with serving(["-m", module, *arguments], port, timeout=60) as server:
        triton_round_trip(server.address)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(15) == 0
