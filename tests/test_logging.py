"""oip_asgi._core.logs: lines reach stderr where the host configured no logging, and only there."""

from __future__ import annotations

import logging
import uuid

import pytest

from oip_asgi._core.logs import show_unless_configured


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
