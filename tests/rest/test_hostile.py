"""The bad-input catalogue (tests/rest/hostile_cases.py): each case's exact status and message, then a valid request."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.rest.hostile_cases import (
    CASES,
    VALID_PATH,
    VALID_REQUEST,
    VALID_SUM,
    Case,
    app,
    document,
    send,
    valid_inference,
)
from tests.support.client import client
from tests.support.servers import uvicorn
from tests.support.waiting import HANG

pytestmark = pytest.mark.anyio

DOC = Path(__file__).resolve().parents[2] / "docs" / "bad-input.md"


@pytest.mark.parametrize("case", [case for case in CASES if not case.over_socket], ids=lambda case: case.id)
async def test_bad_input_is_a_clear_error_and_the_next_request_is_served(case: Case) -> None:
    async with client(app) as http:
        with anyio.fail_after(HANG):
            response = await send(http, case)
            assert response.status_code == case.status, response.text
            assert response.headers["content-type"] == "application/json"
            body = response.json()
            assert list(body) == ["error"] and case.message in body["error"], body
            assert await valid_inference(http) == VALID_SUM


@pytest.fixture(scope="module")
def hostile_server() -> Iterator[str]:
    with uvicorn("tests.rest.hostile_cases:app") as server:
        yield server.address


def _exchange(address: str, case: Case) -> bytes:
    """Send `case` with its lying Content-Length over a raw socket; everything the server sends until it closes."""
    host, port = address.split(":")
    head = (
        f"{case.method} {case.path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {case.content_length}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + case.body)
        if case.status is None:
            # A short body looks like a slow one: the server waits for the rest, answering nothing...
            sock.settimeout(0.5)
            with pytest.raises(TimeoutError):
                sock.recv(1)
            # ...until the client says it has sent everything.
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(10)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


@pytest.mark.parametrize("case", [case for case in CASES if case.over_socket], ids=lambda case: case.id)
@pytest.mark.slow
def test_content_length_lies_over_a_real_server(hostile_server: str, case: Case) -> None:
    received = _exchange(hostile_server, case)
    if case.status is None:
        assert received == b""  # closed cleanly, no half-written answer
    else:
        # uvicorn (httptools) answers the framing error itself, once, and closes the connection.
        assert received.startswith(f"HTTP/1.1 {case.status} ".encode()), received
        assert received.count(b"HTTP/1.1 ") == 1 and case.message.encode() in received
    response = httpx.post(f"http://{hostile_server}{VALID_PATH}", json=VALID_REQUEST, timeout=10)
    assert response.status_code == 200 and response.json()["outputs"][0]["data"] == VALID_SUM


def test_case_ids_are_unique() -> None:
    assert len({case.id for case in CASES}) == len(CASES)


async def test_the_document_is_generated_from_the_cases() -> None:
    assert DOC.read_text() == await document(), "regenerate: python -m tests.rest.hostile_cases > docs/bad-input.md"
