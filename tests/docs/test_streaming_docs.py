"""docs/streaming.md: its recipes run as written (ports made free ones), against `oip-asgi serve`."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.servers import HOST, ROOT, Server, child_env, free_port, serving

pytest.importorskip("oip_asgi.grpc")
pytestmark = pytest.mark.slow

DOC = (ROOT / "docs" / "streaming.md").read_text()
RECIPE = re.compile(r"<!-- recipe: (?P<name>\S+) -->\n```(?P<kind>\w+)\n(?P<code>.*?)```", re.DOTALL)
RECIPES = {match["name"]: match["code"] for match in RECIPE.finditer(DOC)}
PRINTED = re.search(r"<!-- recipe: curl -->.*?prints\n\n```\n(?P<out>.*?)```", DOC, re.DOTALL)


def test_the_page_has_its_recipes() -> None:
    assert set(RECIPES) == {"install", "models", "serve", "curl", "start_stream", "cancellation", "lambda-web-adapter"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, int]]:
    """The serve recipe, in a directory holding the models recipe: the server and its gRPC port."""
    folder = tmp_path_factory.mktemp("streaming")
    (folder / "mymodels.py").write_text(RECIPES["models"])
    port, grpc_port = free_port(), free_port()
    command = shlex.split(RECIPES["serve"].replace("8000", str(port)).replace("8001", str(grpc_port)))
    assert command[:2] == ["oip-asgi", "serve"]
    with serving(["-m", "oip_asgi", *command[1:], "--app-dir", str(folder)], port) as server:
        yield server, grpc_port


def test_the_curl_recipe_prints_what_the_page_says(served: tuple[Server, int]) -> None:
    assert PRINTED is not None
    printed = b""
    for line in RECIPES["curl"].strip().splitlines():
        command = shlex.split(line.replace("localhost:8000", served[0].address))
        printed += subprocess.run(command, check=True, capture_output=True, timeout=30).stdout
    assert printed.decode().replace("\n\n", "\n").strip() == PRINTED["out"].replace("\n\n", "\n").strip()


def test_the_start_stream_recipe_prints_each_token(served: tuple[Server, int]) -> None:
    code = RECIPES["start_stream"].replace("localhost:8001", f"{HOST}:{served[1]}")
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, "docs/streaming.md (start_stream)", "exec"), {"__name__": "recipe"})
    assert output.getvalue().splitlines() == ["1 streams", "1 answer", "1 over", "1 time"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe's RUN line, its build context the source tree: what it installs, in a fresh target folder.

    No Docker engine runs here: pip installs the same requirement from the same source, without the
    dependencies this environment already has (--no-deps), with the hatchling it has (offline)."""
    lines = RECIPES["lambda-web-adapter"].splitlines()
    (copy,) = [line for line in lines if line.startswith("COPY . ")]
    context = shlex.split(copy)[2]  # where the build context (the clone's root) goes in the image
    (run,) = [line for line in lines if line.startswith("RUN ")]
    install = shlex.split(run.removeprefix("RUN ").split("&&")[0])
    assert install[:2] == ["pip", "install"] and install[-1].startswith(context + "["), install
    target = tmp_path_factory.mktemp("image") / "site-packages"
    requirement = str(ROOT) + install[-1].removeprefix(context)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target"]
    subprocess.run([*pip, str(target), *install[2:-1], requirement], check=True, capture_output=True, timeout=300)
    (metadata,) = target.glob("oip_asgi-*.dist-info/METADATA")
    extras = re.search(r"\[(.*)\]$", requirement)
    assert extras is not None
    provided = re.findall(r"^Provides-Extra: (\S+)$", metadata.read_text(), re.MULTILINE)
    assert set(extras[1].split(",")) <= set(provided)
    # The command needs uvicorn, which the serve extra brings: without it `oip-asgi serve` exits 2.
    assert re.search(r"^Requires-Dist: uvicorn.*extra == ['\"]serve['\"]", metadata.read_text(), re.MULTILINE)
    assert "serve" in extras[1].split(",")
    return target


def test_the_lambda_web_adapter_recipes_cmd_streams_events_from_what_its_run_line_installed(
    tmp_path: Path, installed: Path
) -> None:
    # Run the image's command as the Lambda Web Adapter runs it: on AWS_LWA_PORT, ready at its check path,
    # from WORKDIR holding mymodels.py, with oip-asgi as the RUN line installed it (not this checkout).
    recipe = RECIPES["lambda-web-adapter"]
    (env_line,) = [line for line in recipe.splitlines() if line.startswith("ENV ")]
    env = dict(item.split("=", 1) for item in shlex.split(env_line)[1:])
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    (cmd_line,) = [line for line in recipe.splitlines() if line.startswith("CMD ")]
    command = json.loads(cmd_line.removeprefix("CMD "))
    assert command[:2] == ["oip-asgi", "serve"]
    assert command[command.index("--port") + 1] == env["AWS_LWA_PORT"]
    workdir = tmp_path / "srv"
    workdir.mkdir()
    (workdir / "mymodels.py").write_text(RECIPES["models"])
    image = {**env, "PYTHONPATH": str(installed)}  # the image's Python: the installed package, not the tree
    probe = [sys.executable, "-c", "import oip_asgi; print(oip_asgi.__file__)"]
    where = subprocess.run(probe, cwd=workdir, env={**child_env(), **image}, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(installed)
    port = free_port()  # the adapter's port, free here: the tests may run beside something on 8080
    command[command.index("--port") + 1] = str(port)
    command[command.index("--host") + 1] = HOST
    argv = [str(installed / "bin" / command[0]), *command[1:]]  # the console script pip wrote
    ready = env["AWS_LWA_READINESS_CHECK_PATH"]
    with serving(argv, port, ready_path=ready, env={**image, "AWS_LWA_PORT": str(port)}, cwd=workdir):
        url = f"http://{HOST}:{port}/v2/models/countdown/generate_stream"
        with httpx.stream("POST", url, json={"start": 3}, timeout=30) as response:
            assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
            values = [json.loads(line[6:])["value"] for line in response.iter_lines() if line]
    assert values == [3, 2, 1]
