from __future__ import annotations

import dataclasses
import logging
import subprocess
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from tests.support.servers import uvicorn


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def example_server() -> Iterator[str]:
    """The README's example app (examples.app:app) in a real uvicorn process; its "127.0.0.1:<port>"."""
    with uvicorn("examples.app:app") as server:
        yield server.address


@pytest.fixture(autouse=True)
def _log_settings_kept() -> Iterator[None]:
    """Each test starts from the same logging: the logging extension changes the process's loggers (as Triton's
    changes its log), and a test that calls it must not change what the next one logs."""
    from oip_asgi._core import log_settings

    names = (*log_settings.LOGGERS, "uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
    levels = {name: logging.getLogger(name).level for name in names}
    switches = dict(vars(log_settings.SWITCHES))
    governed = dataclasses.replace(log_settings._governed, filtered=set(log_settings._governed.filtered))
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    for name in log_settings._governed.filtered - governed.filtered:
        logging.getLogger(name).removeFilter(log_settings.SWITCHES)
    vars(log_settings.SWITCHES).update(switches)
    log_settings._governed = governed


# A test that starts a process (a server, a build, a fresh interpreter), itself or through its fixtures,
# must be marked slow, so that `pytest -m "not slow"` runs the in-process suite in seconds: an unmarked
# one fails here rather than quietly making that run slow.
_running: list[pytest.Item] = []
_start_process = subprocess.Popen.__init__


def _start_in_slow_tests_only(self: subprocess.Popen[Any], args: Any, *more: Any, **options: Any) -> None:
    if _running and _running[-1].get_closest_marker("slow") is None:
        raise AssertionError(f"{_running[-1].nodeid} starts a process ({args!r}): mark it @pytest.mark.slow")
    _start_process(self, args, *more, **options)


subprocess.Popen.__init__ = _start_in_slow_tests_only  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()
