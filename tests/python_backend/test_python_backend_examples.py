"""Triton's python_backend examples (examples/python_backend, written anew) served by `oip-asgi serve`.

docs/python-backend.md's recipes as written (ports made free ones): its serve command starts one real server,
and each client it lists runs as a subprocess over the wire the original uses (HTTP, or gRPC streaming for the
decoupled models) and must print its PASS line; the same clients print it against Triton 2.51 serving the same
folder. Then the add_sub model on the Lambda adapter.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.servers import ROOT, Server, child_env, free_port, serving
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples" / "python_backend"
MODELS = EXAMPLES / "models"
DOC = (ROOT / "docs" / "python-backend.md").read_text()
RECIPE = re.compile(r"<!-- recipe: (?P<name>\S+) -->\n```sh\n(?P<code>.*?)```", re.DOTALL)
RECIPES = {match["name"]: match["code"].strip() for match in RECIPE.finditer(DOC)}
PYTEST_RECIPE = re.search(r"<!-- recipe: pytest -->\n```python\n(?P<code>.*?)```", DOC, re.DOTALL)

# client script -> the line it prints when every check passed
CLIENTS = {
    "add_sub": "PASS: add_sub",
    "auto_complete": "PASS: auto_complete",
    "bls_sync": "PASS: BLS Sync",
    "bls_async": "PASS: BLS Async",
    "bls_decoupled_sync": "PASS: BLS Decoupled Sync",
    "bls_decoupled_async": "PASS: BLS Decoupled Async",
    "square_int32": "PASS: square_int32",
    "repeat_int32": "PASS: repeat_int32",
    "custom_metrics": "PASS: custom_metrics",
    "init_args": "PASS: init_args",
}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Server, list[str]]]:
    """The page's serve recipe on free ports: the server, and the options that point a client at it."""
    ports = {"8000": free_port(), "8001": free_port(), "8002": free_port()}
    command = shlex.split(RECIPES["serve"])
    assert command[:2] == ["oip-asgi", "serve"]
    argv = ["-m", "oip_asgi", *(str(ports.get(part, part)) for part in command[1:])]
    argv = [str(MODELS) if part == "examples/python_backend/models" else part for part in argv]
    argv = ["127.0.0.1" if part == "0.0.0.0" else part for part in argv]
    addresses = ["--url", f"127.0.0.1:{ports['8000']}", "--grpc-url", f"127.0.0.1:{ports['8001']}",
                 "--metrics-url", f"127.0.0.1:{ports['8002']}"]  # fmt: skip
    with serving(argv, ports["8000"], timeout=60) as running:
        yield running, addresses


def test_the_page_lists_every_client_and_every_model_folder_is_tritons_layout() -> None:
    clients = {path.stem for path in (EXAMPLES / "clients").glob("*.py") if not path.stem.startswith("_")}
    listed = [shlex.split(line) for line in RECIPES["clients"].splitlines()]
    assert clients == set(CLIENTS)
    assert listed == [["python", f"examples/python_backend/clients/{client}.py"] for client in CLIENTS]
    for folder in MODELS.iterdir():
        assert (folder / "1" / "model.py").is_file(), folder
        # config.pbtxt as Triton's examples ship it, except where auto_complete_config writes the configuration
        assert (folder / "config.pbtxt").is_file() != folder.name.endswith("auto_complete"), folder


@pytest.mark.parametrize("client", list(CLIENTS))
def test_the_examples_client_passes(server: tuple[Server, list[str]], client: str) -> None:
    running, addresses = server
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "clients" / f"{client}.py"), *addresses],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and CLIENTS[client] in done.stdout.splitlines(), (
        f"{client} exited {done.returncode}:\n{done.stdout}\n{done.stderr}\nserver:\n{running.output()[-3000:]}"
    )


def test_the_models_logger_and_prints_reach_the_servers_log(server: tuple[Server, list[str]]) -> None:
    running, addresses = server
    subprocess.run(
        [sys.executable, str(EXAMPLES / "clients" / "custom_metrics.py"), *addresses],
        env=child_env(), capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    logged = "ns spent processing requests so far"  # pb_utils.Logger.log_info
    wait_until(lambda: logged in running.output(), "the model's log line in the server's output")


def test_a_failed_bls_call_is_a_500_with_tritons_prefix_and_the_inner_reason(server: tuple[Server, list[str]]) -> None:
    import numpy as np
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    running, addresses = server
    inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32"),
              grpcclient.InferInput("MODEL_NAME", [1], "BYTES")]  # fmt: skip
    inputs[0].set_data_from_numpy(np.ones(4, np.float32))
    inputs[1].set_data_from_numpy(np.ones(4, np.float32))
    inputs[2].set_data_from_numpy(np.array([b"undefined_model"], dtype=np.object_))
    with grpcclient.InferenceServerClient(addresses[3]) as client, pytest.raises(InferenceServerException) as caught:
        client.infer("bls_sync", inputs)
    assert caught.value.status() == "StatusCode.INTERNAL"
    message = caught.value.message() or ""
    assert message.startswith("Failed to process the request(s) for model ") and "undefined_model" in message


def test_the_pages_pytest_recipe_runs_the_model_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    assert PYTEST_RECIPE is not None
    monkeypatch.chdir(ROOT)  # the recipe names the repository from the project's root
    namespace: dict[str, object] = {"__name__": "recipe"}
    exec(compile(PYTEST_RECIPE["code"], "docs/python-backend.md (pytest)", "exec"), namespace)
    test = namespace["test_add_sub"]
    assert callable(test)
    test()


def test_the_add_sub_repository_answers_on_lambda() -> None:
    """Triton cannot run there (no /dev/shm for its stub processes): a fresh interpreter, as Lambda's init is."""
    code = """
import json, sys
from tests.hosts.test_lambda import CONTEXT, TEXT, http_api_event, response_json
import examples.lambda_python_backend as packed

body = {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                   {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [0.5, 0.5, 0.5, 0.5]}]}
event = http_api_event("POST", "/v2/models/add_sub/infer", json.dumps(body).encode(), TEXT)
print(json.dumps(response_json(packed.handler(event, CONTEXT))))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    assert {output["name"]: output["data"] for output in answer["outputs"]} == {
        "OUTPUT0": [1.5, 2.5, 3.5, 4.5],
        "OUTPUT1": [0.5, 1.5, 2.5, 3.5],
    }
