"""`oip-asgi serve`: options, errors in the user's module, and the command as real processes."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import pytest

from oip_asgi import Model, OIPApp, oip_app
from oip_asgi._hosts.cli import Served, load_target, main, parser
from tests.apps.cli import recorded
from tests.support.servers import HOST, ROOT, Server, child_env, free_port, serving, triton_round_trip
from tests.support.waiting import HANG, wait_until

pytest.importorskip("uvicorn")


def command(*arguments: str) -> list[str]:
    return ["-m", "oip_asgi", "serve", "--host", HOST, "--log-level", "warning", *arguments]  # a test's own win


@contextlib.contextmanager
def served(target: str, *options: str, events: Path | None = None, **kwargs: Any) -> Iterator[Server]:
    port = free_port()
    env = {"OIP_TEST_EVENTS": str(events)} if events else {}
    with serving(
        command(target, "--port", str(port), *options), port, env={**env, **kwargs.pop("env", {})}, **kwargs
    ) as server:
        try:
            yield server
        except BaseException:
            print(server.output())  # pytest shows it beside the failure
            raise


def run(*arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oip_asgi", *arguments],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def post(address: str, model: str, request: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
    http_request = urllib.request.Request(
        f"http://{address}/v2/models/{model}/infer",
        data=json.dumps(request).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(http_request, timeout=timeout) as response:
        result: dict[str, Any] = json.load(response)
        return result


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


# The command's surface


def test_the_console_script_runs_the_command() -> None:
    (script,) = [
        entry for entry in importlib.metadata.entry_points(group="console_scripts") if entry.name == "oip-asgi"
    ]
    assert script.value == "oip_asgi._hosts.cli:main"


@pytest.mark.slow
def test_help_documents_every_option() -> None:
    help_text = run("serve", "--help").stdout
    (subcommands,) = [action for action in parser()._actions if isinstance(action, argparse._SubParsersAction)]
    for action in subcommands.choices["serve"]._actions:
        assert action.help, action.dest
        for option in action.option_strings:
            assert option in help_text
    assert "MODULE:ATTR" in help_text and "8080" in help_text and "exit status" in help_text


@pytest.mark.slow
def test_importing_oip_asgi_does_not_import_the_command_or_uvicorn() -> None:
    probe = "import sys, oip_asgi; print(sorted({'oip_asgi._hosts.cli', 'uvicorn', 'argparse'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], env=child_env(), capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


BROKEN = {
    "no module": ("nosuch_module:models", "no module named 'nosuch_module'"),
    "raises": ("raises:models", "importing raises failed: RuntimeError: no weights here ("),
    "syntax": ("syntax:models", "importing syntax failed: SyntaxError:"),
    "library raises": ("decodes:models", "importing decodes failed: JSONDecodeError: "),
    "missing name": ("fine:modles", "module fine has no attribute 'modles'"),
    "not a model": ("fine:NAMES", "fine:NAMES is a list, not a models mapping, a Model or an OIPApp"),
    "a function": ("fine:double", "is a function, not a models mapping, a Model or an OIPApp (wrap a bare callable"),
    "bad mapping": ("fine:bad", "model name 'a/b' must be a non-empty string with no '/'"),
}


@pytest.fixture
def modules(tmp_path: Path) -> Path:
    (tmp_path / "raises.py").write_text("models = {}\n\nraise RuntimeError('no weights here')\n")
    (tmp_path / "syntax.py").write_text("models = {\n")
    (tmp_path / "decodes.py").write_text("import json\n\nmodels = json.loads('{')\n")
    (tmp_path / "fine.py").write_text(
        "NAMES = ['a']\ndef double(x):\n    return 2 * x\nbad = {'a/b': double}\nmodels = {'double': double}\n"
    )
    return tmp_path


@pytest.mark.parametrize("case", list(BROKEN))
@pytest.mark.slow
def test_a_broken_target_exits_3_with_one_line_and_no_traceback(modules: Path, case: str) -> None:
    target, message = BROKEN[case]
    result = run("serve", target, "--app-dir", str(modules))
    assert result.returncode == 3
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("oip-asgi: error: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    if case in ("raises", "library raises"):  # the line in the user's module, not in the library's
        assert f"{target.partition(':')[0]}.py, line 3)" in result.stderr


@pytest.mark.parametrize("case", ["no module", "missing name"])
@pytest.mark.slow
def test_a_broken_target_stops_every_worker_and_exits_3(modules: Path, case: str) -> None:
    target, message = BROKEN[case]
    result = run("serve", target, "--app-dir", str(modules), "--workers", "2", "--port", str(free_port()))
    assert result.returncode == 3
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    if case == "no module":  # found out in the parent, before any worker starts
        assert (
            result.stderr
            == f"oip-asgi: error: {message} (run from the directory that holds it, or name it with --app-dir)\n"
        )


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.slow
def test_a_port_in_use_exits_3(workers: str) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", "examples.models:models", "--host", HOST, "--port", str(port), "--workers", workers)
    assert result.returncode == 3
    assert "address already in use" in result.stderr.lower()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["serve", "mymodels"], "'mymodels' is neither MODULE:ATTR (for example mymodels:models) nor a model file"),
        (["serve", "m:a", "--workers", "0"], "must be at least 1"),
        (["serve"], "name what to serve: MODULE:ATTR, model files, or --model-repository DIR"),
        (["serve", "--model-repository", "/nonexistent"], "--model-repository '/nonexistent' is not a directory"),
        (
            ["serve", "m:a", "--load-model", "x"],
            "oip-asgi: error: --load-model goes with --model-repository DIR\n",  # only the options given
        ),
        (
            ["serve", "--model-repository", ".", "--model-control-mode", "explicit", "--workers", "2"],
            "--model-control-mode explicit serves from one process",
        ),
        ([], "the following arguments are required: COMMAND"),
    ],
)
@pytest.mark.slow
def test_usage_errors_exit_2(arguments: list[str], message: str) -> None:
    result = run(*arguments)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("option", "module", "message"),
    [
        (
            "--grpc-port",
            "grpc",
            "--grpc-port needs grpcio, which the grpc extra brings: pip install -e '.[grpc]' in a clone of oip-asgi "
            "(pip install 'oip-asgi[grpc]' once it is on PyPI)",
        ),
        (
            "--metrics-port",
            "prometheus_client",
            "--metrics-port needs prometheus_client: pip install -e '.[metrics]' in a clone of oip-asgi "
            "(pip install 'oip-asgi[metrics]' once it is on PyPI)",
        ),
    ],
)
def test_an_option_without_its_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], option: str, module: str, message: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it raises ImportError
    for imported in [name for name in sys.modules if name.startswith("oip_asgi.grpc.")]:
        monkeypatch.delitem(sys.modules, imported)  # the modules that import grpcio, as if never imported
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command adds --app-dir to it
    assert main(["serve", "examples.models:models", option, "8081"]) == 2
    assert message in capsys.readouterr().err


# Targets, in-process


def test_a_model_is_served_under_its_attribute_name(modules: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (modules / "cli_target.py").write_text(
        "from oip_asgi import Model, oip_app\ndoubler = Model(lambda x: 2 * x)\napp = oip_app({})\n"
    )
    monkeypatch.syspath_prepend(str(modules))
    try:
        assert load_target("cli_target:doubler").core.served.names() == ["doubler"]
        assert load_target("cli_target:app") is sys.modules["cli_target"].app
    finally:
        sys.modules.pop("cli_target", None)


def test_the_docs_serve_commands_name_targets_that_load_from_the_repository_root() -> None:
    targets = {
        target
        for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
        for target in re.findall(r"oip-asgi serve ([a-z][\w.]*:[\w.]+)", doc.read_text())
    }
    runnable = {target for target in targets if not target.startswith("mymodels")}  # the reader's module, named so
    assert "examples.models:models" in runnable
    for target in sorted(runnable):  # as the command imports them from the repository root
        assert load_target(target).core.served.names(), target


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[list[dict[str, Any]]]:
    """Startup before the block, shutdown after it; yields what the app sent."""
    inbox = [{"type": "lifespan.startup"}]
    sent: list[dict[str, Any]] = []
    stop = anyio.Event()

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop()
        await stop.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async with anyio.create_task_group() as group:
        group.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
        with anyio.fail_after(HANG):
            while not sent:
                await anyio.sleep(0.01)
        yield sent
        stop.set()


def fake_grpc(monkeypatch: pytest.MonkeyPatch, steps: list[str], fail: bool = False) -> None:
    @contextlib.asynccontextmanager
    async def serving(app: OIPApp, *, address: str) -> AsyncIterator[None]:
        if fail:
            raise OSError("address already in use")
        steps.append(f"grpc up on {address}")
        yield
        steps.append("grpc down")

    monkeypatch.setitem(sys.modules, "oip_asgi.grpc", types.SimpleNamespace(serving=serving))


@pytest.mark.anyio
async def test_grpc_starts_after_the_app_and_stops_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[str] = []
    fake_grpc(monkeypatch, steps)
    app = oip_app({"m": Model(lambda X: X, load=lambda: steps.append("loaded"))})
    async with lifespan(Served(app, grpc_address="127.0.0.1:8081")) as sent:
        assert sent == [{"type": "lifespan.startup.complete"}]
        assert steps[0] == "grpc up on 127.0.0.1:8081"
        with anyio.fail_after(HANG):
            while not app.ready:
                await anyio.sleep(0.01)
    assert steps == ["grpc up on 127.0.0.1:8081", "loaded", "grpc down"]
    assert sent[-1] == {"type": "lifespan.shutdown.complete"}


@pytest.mark.anyio
async def test_grpc_that_cannot_serve_fails_startup(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_grpc(monkeypatch, [], fail=True)
    async with lifespan(Served(oip_app({}), grpc_address="127.0.0.1:8081")) as sent:
        assert sent == [
            {
                "type": "lifespan.startup.failed",
                "message": "gRPC could not serve on 127.0.0.1:8081: OSError: address already in use",
            }
        ]


@pytest.mark.anyio
async def test_served_answers_at_v2_only() -> None:
    transport = httpx.ASGITransport(app=Served(oip_app({"echo": lambda **inputs: inputs})))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        assert (await client.get("/v2")).json()["name"] == "oip-asgi"
        assert (await client.get("/v2/models/echo")).json()["name"] == "echo"
        outside = await client.get("/v3/models/echo")
        assert outside.status_code == 404
        assert outside.json() == {
            "error": "no such path '/v3/models/echo': this server serves the Open Inference Protocol at /v2"
        }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--openai-api-key", "k"], "--openai-api-key goes with --openai"),
        (["--openai", "--openai-api-key", ""], "--openai-api-key KEY must not be empty"),
    ],
)
def test_the_openai_options_usage_errors_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command adds --app-dir to it
    assert main(["serve", "examples.models:models", *arguments]) == 2
    assert message in capsys.readouterr().err


def test_the_input_size_is_the_largest_body_of_v2_and_v1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    app = load_target("examples.openai:models", max_body_size=5000)
    assert (app.core.max_body_size, app.max_json_size) == (5000, 5000)
    assert Served(app, openai=True, max_body_size=5000).openai.max_body_size == 5000  # type: ignore[union-attr]
    assert Served(load_target("examples.openai:models"), openai=True).openai.max_body_size == 64 * 2**20  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_the_openai_port_serves_the_probes_beside_v1_and_the_key_guards_v1_alone() -> None:
    app = oip_app({"echo": lambda **inputs: inputs})
    served = Served(app, openai=True, openai_api_key="sk-1")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=served), base_url="http://testserver") as client:
        assert (await client.get("/v1/models")).status_code == 401
        assert (await client.get("/v1/models", headers={"Authorization": "Bearer sk-1"})).status_code == 200
        assert (await client.get("/v2/models/echo")).status_code == 200
        ready, live = await client.get("/health/ready"), await client.get("/health")
        assert (ready.status_code, ready.content, live.status_code) == (200, b"", 200)
        assert (await client.get("/metrics")).status_code == 404  # without metrics: nothing to serve there
        outside = await client.get("/v3")
        assert outside.json()["error"].endswith("the Open Inference Protocol at /v2 and OpenAI's API at /v1")
    restricted = load_target("examples.openai:models", restricted_apis=["health:probe=yes"])
    transport = httpx.ASGITransport(app=Served(restricted, openai=True))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        assert (await client.get("/health/ready")).status_code == 403  # the health group, as /v2/health/ready
        assert (await client.get("/health/ready", headers={"probe": "yes"})).status_code in (200, 400)


# The command as a real process


@pytest.mark.slow
def test_serves_tritonclient_with_binary_tensors_and_classification() -> None:
    import tritonclient.http as httpclient

    with served("examples.models:models") as server:
        triton_round_trip(server.address)
        client = httpclient.InferenceServerClient(server.address)
        try:
            features = httpclient.InferInput("FEATURES", [1, 4], "FP32")
            features.set_data_from_numpy(np.array([[0, 1, 0, 0]], dtype=np.float32), binary_data=True)
            scores = httpclient.InferRequestedOutput("SCORES", binary_data=False, class_count=1)
            result = client.infer("animals", [features], outputs=[scores])
            assert result.as_numpy("SCORES").tolist() == [["2.0:1:dog"]]
        finally:
            client.close()
        assert status(f"http://{server.address}/") == 404


@pytest.mark.slow
def test_a_model_attribute_serves_that_one_model() -> None:
    with served("tests.apps.cli:pid") as server:
        assert status(f"http://{server.address}/v2/models/pid/ready") == 200
        assert status(f"http://{server.address}/v2/models/slow") == 404


@pytest.mark.slow
def test_readiness_is_400_while_a_slow_load_runs(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with served("tests.apps.cli:gated", ready_path="/v2/health/live", env={"OIP_TEST_GATE": str(gate)}) as server:
        base = f"http://{server.address}/v2"
        # Answered, and not held until the load ends: it cannot end before the gate opens.
        assert status(f"{base}/health/ready") == 400
        assert status(f"{base}/models/gated/ready") == 400
        gate.touch()
        wait_until(lambda: status(f"{base}/health/ready") == 200, "the server became ready")
        assert status(f"{base}/models/gated/ready") == 200


def pids(address: str, count: int = 4) -> set[int]:
    request = {"inputs": [{"name": "X", "datatype": "INT64", "shape": [1], "data": [0]}]}
    with ThreadPoolExecutor(count) as pool:
        results = list(pool.map(lambda _: post(address, "pid", request), range(count)))
    return {result["outputs"][0]["data"][0] for result in results}


@pytest.mark.slow
def test_two_workers_each_load_once_serve_both_and_survive_a_kill(tmp_path: Path) -> None:
    log = tmp_path / "events"
    with served("tests.apps.cli:models", "--workers", "2", events=log, timeout=60) as server:
        workers: set[int] = set()
        deadline = time.monotonic() + HANG
        while len(workers) < 2 and time.monotonic() < deadline:
            workers |= pids(server.address)
        assert len(workers) == 2, workers
        # Each worker would hold its own shared-memory regions: none offers them, and each says why.
        assert "system_shared_memory" not in httpx.get(f"http://{server.address}/v2").json()["extensions"]
        refused = httpx.post(f"http://{server.address}/v2/systemsharedmemory/region/r/register", json={})
        assert refused.status_code == 501 and "--workers N runs N processes" in refused.json()["error"]
        wait_until(lambda: len(recorded(log, "load")) == 2, "both workers loaded")
        # The parent never imported the module; each worker imported it and loaded its model once.
        assert server.pid not in workers
        assert sorted(recorded(log, "import")) == sorted(workers)
        assert sorted(recorded(log, "load")) == sorted(workers)

        killed, survivor = sorted(workers)
        os.kill(killed, signal.SIGKILL)
        seen: set[int] = set()
        deadline = time.monotonic() + HANG
        while not seen - workers and time.monotonic() < deadline:  # until the replacement answers
            seen |= pids(server.address)  # every request succeeds meanwhile
        replacement = seen - workers
        assert len(replacement) == 1 and killed not in seen, seen
        wait_until(lambda: sorted(recorded(log, "load")) == sorted({*workers, *replacement}), "the replacement loaded")
    assert server.process.returncode == 0


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.slow
def test_sigterm_lets_a_slow_request_finish_then_exits_0(tmp_path: Path, workers: str) -> None:
    log, gate = tmp_path / "events", tmp_path / "gate"
    # At INFO, uvicorn's "Shutting down" tells when the server has begun to stop.
    options = ("--workers", workers, "--log-level", "info")
    with served("tests.apps.cli:models", *options, events=log, env={"OIP_TEST_GATE": str(gate)}) as server:
        request = {"inputs": [{"name": "SECONDS", "datatype": "FP32", "shape": [1], "data": [30]}]}
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(post, server.address, "slow", request, timeout=30)
            wait_until(lambda: recorded(log, "start"), "the slow request started")
            os.kill(server.pid, signal.SIGTERM)
            # The request is still in flight: now let it end.
            wait_until(lambda: "Shutting down" in server.output(), "the server began to stop")
            gate.touch()
            assert answer.result(timeout=30)["outputs"][0]["data"] == [30]
        assert server.process.wait(10) == 0
        assert "Traceback" not in server.output()


@pytest.mark.parametrize(("workers", "level", "lines"), [("1", "info", 1), ("2", "info", 1), ("1", "warning", 0)])
@pytest.mark.slow
def test_an_apps_access_log_goes_to_uvicorns_log_at_its_level(workers: str, level: str, lines: int) -> None:
    with served("tests.apps.cli:logged", "--workers", workers, "--log-level", level) as server:
        request = {"inputs": [{"name": "X", "datatype": "INT64", "shape": [1], "data": [7]}]}
        assert post(server.address, "echo", request)["outputs"][0]["data"] == [7]
        os.kill(server.pid, signal.SIGTERM)  # every line written once the server is gone
        assert server.process.wait(15) == 0
        output = server.output()
    # uvicorn's handler and format, and no second copy from the app's own fallback handler.
    assert output.count("model=echo version=1 status=200 bytes_in=") == lines, output
    assert output.count("INFO:     model=echo version=1 status=200 bytes_in=") == lines, output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--trace-config", "triton,file=/tmp/t.json"], "it writes no Triton JSON trace file"),
        (["--trace-config", "opentelemetry,url=http://collector"], "its exporter is the process's OpenTelemetry SDK"),
        (["--trace-config", "level=LOUD"], "--trace-config: invalid value for trace level option: LOUD"),
        (["--trace-config", "mode=triton"], "--trace-config: trace mode 'triton' is not served"),
        (["--trace-config", "rate"], "--trace-config option format is '<trace mode>,<setting>=<value>'. Got rate"),
        (["--trace-config", ",rate=1"], "No trace mode specified."),
        (["--trace-config", "rate=0", "--trace-config", "level=TIMESTAMPS"], "sample rate must be non-zero"),
    ],
)
def test_trace_config_is_checked_before_serving(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    assert main(["serve", "tests.apps.guard:models", *arguments]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "arguments",
    [["--log-verbose", "-1"], ["--log-verbose", "loud"], ["--log-info", "maybe"], ["--log-format", "iso8601"]],
)
def test_triton_s_log_options_refuse_what_triton_refuses(arguments: list[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["serve", "tests.apps.guard:models", *arguments])
    assert usage.value.code == 2


def test_triton_s_log_options_read_as_triton_reads_them_over_the_log_level() -> None:
    from oip_asgi._hosts.cli.logs import LogOptions

    def options(*arguments: str) -> LogOptions:
        return LogOptions.of(parser().parse_args(["serve", "m:a", *arguments]))

    assert options() == LogOptions()
    assert options("--log-level", "debug") == LogOptions(verbose=1)
    assert options("--log-level", "error", "--log-info", "true") == LogOptions(warning=False)
    assert options("--log-verbose", "true", "--log-warning", "0", "--log-format", "ISO8601") == LogOptions(
        verbose=1, warning=False, format="ISO8601"
    )
    assert options("--log-verbose", "2").level == 9


def test_trace_config_without_the_opentelemetry_api_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)  # as if not installed
    assert main(["serve", "tests.apps.guard:models", "--trace-config", "level=TIMESTAMPS"]) == 2
    assert "--trace-config needs the OpenTelemetry API: pip install -e '.[tracing]'" in capsys.readouterr().err


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.slow
def test_each_worker_logs_as_triton_s_options_say(tmp_path: Path, workers: str) -> None:
    """--log-format ISO8601 lays out every line, uvicorn's too; --log-info false drops INFO lines, in each worker."""
    log = tmp_path / "server.log"
    argv = ("--workers", workers, "--log-level", "info", "--log-format", "ISO8601", "--log-file", str(log))
    with served("tests.apps.cli:logged", *argv) as server:
        request = {"inputs": [{"name": "X", "datatype": "INT64", "shape": [1], "data": [7]}]}
        assert post(server.address, "echo", request)["outputs"][0]["data"] == [7]
        os.kill(server.pid, signal.SIGTERM)  # every line written once the server is gone
        assert server.process.wait(15) == 0
        console = server.output()
    lines = log.read_text().splitlines()
    (access,) = [line for line in lines if '"model=echo version=1 status=200' in line]
    assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ responding\.py:\d+\] "model=echo .*"', access), access
    assert any('"Application startup complete."' in line for line in lines)  # uvicorn's own, in Triton's layout
    assert not console.strip()  # nothing on the console: every line went to the file
    with served("tests.apps.cli:logged", "--workers", workers, "--log-info", "false", "--log-file", str(log)) as quiet:
        assert post(quiet.address, "echo", request)["outputs"][0]["data"] == [7]
        os.kill(quiet.pid, signal.SIGTERM)
        assert quiet.process.wait(15) == 0
    assert log.read_text().splitlines() == lines  # appended nothing: every line it had was INFO


def scrape(port: int) -> dict[str, float]:
    """The Triton-named samples at http://127.0.0.1:`port`/metrics, by their full text before the value."""
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("nv_")
    }


SUCCESS = 'nv_inference_request_success{model="pid",version="1"}'


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.slow
def test_metrics_port_serves_each_workers_own_figures(workers: int) -> None:
    pytest.importorskip("prometheus_client")
    first = free_ports(workers)
    with served("tests.apps.cli:pid", "--workers", str(workers), "--metrics-port", str(first)) as server:
        for _ in range(3):
            pids(server.address, count=2)
        ports = range(first, first + workers)
        # A worker may start its port after the first answers.
        wait_until(lambda: all(serves(port) for port in ports), "every worker serves metrics")
        # Each port is one worker's: their sum is every request served.
        assert sum(scrape(port)[SUCCESS] for port in ports) == 6


def serves(port: int) -> bool:
    try:
        return SUCCESS in scrape(port)
    except OSError:
        return False


def free_ports(count: int) -> int:
    """The first of `count` consecutive free ports, below the ephemeral range: there, no client
    connection of another process can take one of them between this look and the server's bind."""
    import random
    import socket

    low = (
        int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]) if Path("/proc").exists() else 32768
    )
    for _ in range(100):
        first = random.randrange(20000, low - count)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(first, first + count):
                    stack.enter_context(socket.socket()).bind((HOST, port))
            except OSError:
                continue
            return first
    raise RuntimeError(f"no {count} consecutive free ports below {low}")


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.slow
def test_grpc_port_serves_the_grpc_half_from_every_worker(workers: str) -> None:
    pytest.importorskip("oip_asgi.grpc", reason="the gRPC half is not installed")
    grpcclient = pytest.importorskip("tritonclient.grpc")
    grpc_port = free_port()
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    options = ("--workers", workers, "--grpc-port", str(grpc_port), "--log-level", "info")
    with served("examples.models:models", *options) as server:
        # Each worker says where it listens, as uvicorn does.
        wait_until(
            lambda: server.output().count(f"INFO:     oip-asgi gRPC running on {HOST}:{grpc_port}\n") == int(workers),
            "every worker serves gRPC",
        )
        for _ in range(4):  # a client per round: a new connection, which any worker may take
            client = grpcclient.InferenceServerClient(f"{HOST}:{grpc_port}")
            try:
                wait_until(lambda: client.is_server_ready(), "gRPC is ready")  # noqa: B023  # called before the next round
                inputs = [grpcclient.InferInput(name, [1, 16], "INT32") for name in ("INPUT0", "INPUT1")]
                for tensor in inputs:
                    tensor.set_data_from_numpy(a)
                np.testing.assert_array_equal(client.infer("simple", inputs).as_numpy("OUTPUT0"), 2 * a)
            finally:
                client.close()
        # Every worker bound the gRPC port beside the others': one that could not would have stopped them all.
        with pytest.raises(subprocess.TimeoutExpired):
            server.process.wait(1)
