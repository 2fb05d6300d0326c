"""docs/openai.md: its recipes run as written (ports made free ones): the serve command with the openai
client and curl against a real server, the FastAPI mount and the Lambda handler in-process."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import ROOT, Server, free_port, serving

pytest.importorskip("jinja2")

DOC = (ROOT / "docs" / "openai.md").read_text()
RECIPE = re.compile(r"<!-- recipe: (?P<name>\S+) -->\n```(?P<kind>\w+)\n(?P<code>.*?)```", re.DOTALL)
RECIPES = {match["name"]: match["code"] for match in RECIPE.finditer(DOC)}


def printed(recipe: str) -> str:
    found = re.search(rf"<!-- recipe: {recipe} -->.*?prints[^\n]*\n\n```\n(?P<out>.*?)```", DOC, re.DOTALL)
    assert found is not None
    return found["out"]


def test_the_page_has_its_recipes() -> None:
    assert set(RECIPES) == {
        "install",
        "models",
        "serve",
        "client",
        "curl",
        "vllm-serve",
        "vllm-client",
        "fastapi",
        "lambda",
    }


@pytest.fixture()
def mymodels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory holding the models recipe as mymodels.py, importable."""
    (tmp_path / "mymodels.py").write_text(RECIPES["models"])
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("mymodels", None)


@pytest.fixture()
def served(mymodels: Path) -> Iterator[Server]:
    port = free_port()
    command = shlex.split(RECIPES["serve"].replace("8000", str(port)))
    assert command[:2] == ["oip-asgi", "serve"]
    with serving(["-m", "oip_asgi", *command[1:], "--app-dir", str(mymodels)], port) as server:
        yield server


@pytest.mark.slow
def test_the_client_and_curl_recipes_print_what_the_page_says(served: Server) -> None:
    pytest.importorskip("openai")
    code = RECIPES["client"].replace("localhost:8000", served.address)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, "docs/openai.md (client)", "exec"), {"__name__": "recipe"})
    assert output.getvalue().strip() == printed("client").strip()

    said = b""  # as a terminal shows it: each answer right after the one before (a JSON body ends with no newline)
    for line in RECIPES["curl"].strip().splitlines():
        said += subprocess.run(
            shlex.split(line.replace("localhost:8000", served.address)), check=True, capture_output=True, timeout=30
        ).stdout

    def varying(text: str) -> str:
        text = re.sub(r'"id":"(cmpl|chatcmpl)-[^"]*"', r'"id":"\1-…"', text)
        return re.sub(r'"created":\d+', '"created":…', text).replace("\n\n", "\n").strip()

    assert varying(said.decode()) == varying(printed("curl"))


@pytest.mark.slow
def test_the_vllm_recipe_prints_what_the_page_says() -> None:
    pytest.importorskip("openai")
    port = free_port()
    command = shlex.split(RECIPES["vllm-serve"].replace("8000", str(port)))
    assert command[:2] == ["oip-asgi", "serve"]
    with serving(["-m", "oip_asgi", *command[1:]], port) as server:
        code = RECIPES["vllm-client"].replace("localhost:8000", server.address)
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(compile(code, "docs/openai.md (vllm-client)", "exec"), {"__name__": "recipe"})
    assert output.getvalue().strip() == printed("vllm-client").strip()


def _row(kind: str) -> str:
    """The fields cells of the parameter table's rows of `kind` (served, passed on, refused, ignored), joined."""
    table = DOC[DOC.index("## Parameters: served, passed on, or refused") :]
    rows = [line.split(" | ")[1] for line in table.splitlines() if line.startswith(f"| {kind}")]
    assert rows, kind
    return "\n".join(rows)


def test_the_parameter_table_says_what_the_code_serves_passes_on_and_refuses() -> None:
    from oip_asgi._openai.refusals import NOT_SERVED
    from oip_asgi._openai.sampling import CHAT_BOUNDS, COMPLETION_BOUNDS, OPENAI_BOUNDS, VLLM_BOUNDS, VLLM_FIELDS

    served, passed, refused = _row("served"), _row("passed on"), _row("refused")
    named = re.compile(r"`([a-z_.]+)`")
    assert set(named.findall(passed)) - {"max_tokens"} == set(VLLM_FIELDS)  # min_tokens' bound names max_tokens
    assert set(NOT_SERVED) <= set(named.findall(refused))
    assert {*OPENAI_BOUNDS, *CHAT_BOUNDS, *COMPLETION_BOUNDS} <= set(named.findall(served))
    # Served and refused at once only where a value, or a kind of request, tells them apart: n (1 or above), echo
    # (a completion's, a chat's).
    assert set(named.findall(served)) & set(NOT_SERVED) == {"n", "echo"}
    # The ranges the page gives are the code's.
    for field, (low, high, low_open) in {**OPENAI_BOUNDS, **VLLM_BOUNDS}.items():
        if low is not None and high is not None and high < 2**62:
            assert f"{'(' if low_open else '['}{low:g}, {high:g}]" in served + passed, field
    assert "`top_logprobs` (0 to 20" in served and "`logprobs` (0 to 5)" in served


def test_the_fastapi_recipe_serves_both_apis_over_the_same_models(mymodels: Path) -> None:
    from fastapi.testclient import TestClient

    namespace: dict[str, Any] = {"__name__": "recipe"}
    exec(compile(RECIPES["fastapi"], "docs/openai.md (fastapi)", "exec"), namespace)
    with TestClient(namespace["app"]) as client:
        chat = client.post(
            "/v1/chat/completions", json={"model": "echo", "messages": [{"role": "user", "content": "x"}]}
        )
        assert chat.json()["choices"][0]["message"]["content"] == "x"
        assert client.get("/v2/models/echo/stats").json()["model_stats"][0]["inference_count"] == 1
        assert [model["id"] for model in client.get("/v1/models").json()["data"]] == ["echo", "embed"]


def test_the_lambda_recipe_answers_a_chat(mymodels: Path) -> None:
    pytest.importorskip("mangum")

    # Mangum runs on the thread's event loop and makes one when there is none, which nothing closes: give it
    # one this test closes (an unclosed loop's socket pair is a ResourceWarning in whichever test comes next).
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        _lambda_recipe_answers(mymodels)
    finally:
        loop.close()
        asyncio.set_event_loop(None)


def _lambda_recipe_answers(mymodels: Path) -> None:
    from tests.hosts.test_lambda import http_api_event

    namespace: dict[str, Any] = {"__name__": "recipe"}
    exec(compile(RECIPES["lambda"], "docs/openai.md (lambda)", "exec"), namespace)
    body = json.dumps({"model": "echo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
    response = namespace["handler"](http_api_event("POST", "/v1/chat/completions", body), None)
    text = base64.b64decode(response["body"]) if response["isBase64Encoded"] else response["body"].encode()
    assert response["statusCode"] == 200
    assert json.loads(text)["choices"][0]["message"]["content"] == "h"
    streamed = json.dumps({"model": "echo", "prompt": "ab", "stream": True}).encode()
    response = namespace["handler"](http_api_event("POST", "/v1/completions", streamed), None)
    text = base64.b64decode(response["body"]) if response["isBase64Encoded"] else response["body"].encode()
    assert text.endswith(b"data: [DONE]\n\n") and text.count(b"data: ") == 4  # whole, at once
