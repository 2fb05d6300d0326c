from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._servers import uvicorn


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def example_server() -> Iterator[str]:
    """The README's example app (examples.app:app) in a real uvicorn process; its "127.0.0.1:<port>"."""
    with uvicorn("examples.app:app") as server:
        yield server.address
