from __future__ import annotations

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
