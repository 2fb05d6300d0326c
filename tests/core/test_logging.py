"""oip_asgi._core.logs: lines reach stderr where the host configured no logging, and only there."""

from __future__ import annotations

import logging
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from oip_asgi._core.logs import show_unless_configured
from tests.support.servers import HOST, free_port, serving


class Kept(logging.Handler):
    """A host's own handler: it keeps the messages it takes."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def bare_logger() -> logging.Logger:
    """A logger whose hierarchy has no handler: its parent does not propagate to the root (pytest's).

    Made in the test itself: pytest gives its capture handlers to the loggers that do not propagate
    when each phase of a test starts.
    """
    parent = logging.getLogger(f"oip-test-{uuid.uuid4().hex}")
    parent.propagate = False
    return parent.getChild("access")


def test_an_unconfigured_logger_prints_info_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    bare = bare_logger()
    show_unless_configured(bare)
    show_unless_configured(bare)  # a second app: still one handler
    bare.info("model=m status=%d", 200)
    assert capsys.readouterr().err == f"INFO:{bare.name}:model=m status=200\n"
    assert len(bare.handlers) == 1 and bare.level == logging.INFO


def test_a_handler_configured_later_takes_the_lines_alone(capsys: pytest.CaptureFixture[str]) -> None:
    bare = bare_logger()
    show_unless_configured(bare)
    host = Kept()
    assert bare.parent is not None
    bare.parent.addHandler(host)
    bare.info("once")
    assert host.messages == ["once"] and capsys.readouterr().err == ""
    host.setLevel(logging.ERROR)  # a handler that would not take the record does not count
    bare.info("twice")
    assert host.messages == ["once"] and capsys.readouterr().err.endswith(":twice\n")


def test_a_configured_hierarchy_is_left_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    bare = bare_logger()
    assert bare.parent is not None
    bare.parent.addHandler(logging.NullHandler())
    show_unless_configured(bare)
    bare.info("dropped")
    assert bare.handlers == [] and bare.level == logging.NOTSET and capsys.readouterr().err == ""


# The oip_asgi logger under uvicorn (issue 35): uvicorn's format and level, where nothing else is configured.


class Uvicorns(logging.Handler):
    """uvicorn's "default" handler, as its log configuration makes it: uvicorn's formatter."""

    def __init__(self) -> None:
        super().__init__()
        from uvicorn.logging import DefaultFormatter

        self.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s", use_colors=False))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def under_uvicorn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Uvicorns]:
    """uvicorn's loggers as `uvicorn module:app --log-level warning` leaves them, the root and oip_asgi bare."""
    pytest.importorskip("uvicorn")
    handler = Uvicorns()
    monkeypatch.setattr(logging.getLogger("uvicorn"), "handlers", [handler])
    monkeypatch.setattr(logging.getLogger("uvicorn.error"), "level", logging.WARNING)
    ours = logging.getLogger("oip_asgi")
    monkeypatch.setattr(ours, "handlers", [])
    monkeypatch.setattr(ours, "level", logging.NOTSET)
    for name in ("oip_asgi.access", "oip_asgi.grpc"):
        monkeypatch.setattr(logging.getLogger(name), "handlers", [])
    yield handler


def bare_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The root logger as uvicorn leaves it: pytest's capture handlers (added as each test's call starts) set aside."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])


def test_under_uvicorn_oip_asgis_records_take_its_format_and_level(
    under_uvicorn: Uvicorns, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from oip_asgi import oip_app

    bare_root(monkeypatch)
    oip_app({})  # as uvicorn imports the app: it configured its logging before
    oip_app({})  # a second app: still one handler
    logger = logging.getLogger("oip_asgi")
    logger.info("a load")  # under uvicorn's --log-level warning: not shown
    logger.warning("a plain mount")
    logger.error("a model failed")
    assert under_uvicorn.lines == ["WARNING:  a plain mount", "ERROR:    a model failed"]
    assert len(logger.handlers) == 1 and logger.level == logging.WARNING
    assert capsys.readouterr().err == ""  # never twice


def test_under_uvicorn_an_access_log_asked_for_shows_at_info_once(
    under_uvicorn: Uvicorns, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oip_asgi import oip_app

    bare_root(monkeypatch)
    oip_app({}, access_log=True)
    logging.getLogger("oip_asgi.access").info("model=m status=200")
    assert under_uvicorn.lines == ["INFO:     model=m status=200"]


def test_a_host_that_configures_logging_after_the_app_takes_the_records_alone(
    under_uvicorn: Uvicorns, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oip_asgi import oip_app

    bare_root(monkeypatch)
    oip_app({})
    host = Kept()
    logging.getLogger().addHandler(host)  # logging.basicConfig(), Django's LOGGING, ...
    logging.getLogger("oip_asgi").warning("once")
    assert host.messages == ["once"] and under_uvicorn.lines == []


@pytest.mark.anyio
async def test_the_first_startup_under_uvicorn_follows_it_when_the_app_was_built_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from oip_asgi import oip_app

    bare_root(monkeypatch)
    ours = logging.getLogger("oip_asgi")
    monkeypatch.setattr(ours, "handlers", [])
    monkeypatch.setattr(ours, "level", logging.NOTSET)
    monkeypatch.setattr(logging.getLogger("uvicorn"), "handlers", [])
    app = oip_app({})  # built before uvicorn.run(app) configures its logging
    assert ours.level == logging.NOTSET
    handler = Uvicorns()
    monkeypatch.setattr(logging.getLogger("uvicorn"), "handlers", [handler])
    monkeypatch.setattr(logging.getLogger("uvicorn.error"), "level", logging.INFO)
    await app.load()  # the lifespan's startup
    ours.info("successfully loaded")
    assert handler.lines == ["INFO:     successfully loaded"]


PLAIN_MOUNT = """
from fastapi import FastAPI

import oip_asgi
from oip_asgi import Model

app = FastAPI()
app.mount("/v2", oip_asgi.oip_app({"m": Model(lambda x: x, load=lambda: None)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("level", ["info", "warning"])
def test_mounted_under_uvicorn_the_records_have_its_format_and_level(tmp_path: Path, level: str) -> None:
    pytest.importorskip("fastapi")
    (tmp_path / "plain_mount.py").write_text(PLAIN_MOUNT)
    port = free_port()
    argv = ["-m", "uvicorn", "plain_mount:app", "--app-dir", str(tmp_path), "--port", str(port), "--log-level", level]
    with serving(argv, port, ready_path="/v2/models/m/ready") as server:
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(30)
        output = server.output()
    assert "WARNING:  oip_asgi: mounted with a plain Starlette Mount at /v2" in output
    assert ("INFO:     successfully loaded 'm' version 1" in output) == (level == "info")
    assert "\noip_asgi: " not in output and not output.startswith("oip_asgi: ")  # never the last resort's bare line


@pytest.mark.slow
def test_serve_says_once_what_it_serves_where() -> None:
    pytest.importorskip("grpc")
    pytest.importorskip("jinja2")
    pytest.importorskip("prometheus_client")
    port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "examples.openai:models", "--openai", "--port", str(port)]
    argv += ["--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port)]
    with serving(argv, port) as server:
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(30)
        output = server.output()
    line = (
        f"INFO:     oip-asgi serves the Open Inference Protocol at http://{HOST}:{port}/v2, OpenAI's API at "
        f"http://{HOST}:{port}/v1, the protocol's gRPC service at {HOST}:{grpc_port}, Prometheus metrics at "
        f"http://{HOST}:{metrics_port}/metrics (process {server.pid})\n"
    )
    assert output.count(line) == 1, output
    assert output.count("oip-asgi serves ") == 1
