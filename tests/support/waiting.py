"""Waiting for what a server or a model does: the tests decide on the event, never on how long it took.

A busy machine (CI beside other work, two CPU burners) can make anything take seconds, so the limits
here only stop a test that would otherwise hang: they are far beyond what a loaded machine needs and
say nothing about speed. Speed lives in bench/.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

HANG = 60.0  # seconds: only a server that is stuck takes this long


def wait_until(condition: Callable[[], object], what: str, *, within: float = HANG) -> None:
    """Return once `condition()` is true; fail, saying `what` never happened, if it is stuck."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {within} s"
        time.sleep(0.01)


async def until(condition: Callable[[], object], what: str = "the condition", *, within: float = HANG) -> None:
    """`wait_until` on the event loop: the loop keeps running what the condition waits for."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {within} s"
        await asyncio.sleep(0.001)


def has_text(path: Path) -> bool:
    """Whether another process has written `path`: it exists and holds text (created is not yet written)."""
    return path.exists() and bool(path.read_text())


def written(path: Path, what: str = "", *, within: float = HANG) -> str:
    """The text of `path` once another process (a model's `finally`, say) has written it.

    A file is created before its text is written, so "it exists" is not yet "it is written": this waits
    for text (`has_text`; on the event loop, `await until(lambda: has_text(path))`). The writers here write
    one short line with one call, which a reader sees whole or not at all.
    """
    wait_until(lambda: has_text(path), what or f"{path.name} was not written", within=within)
    return path.read_text()


def whole_lines(path: Path) -> list[str]:
    """The lines another process has written to `path` so far, each whole: a line still being written is left out."""
    text = path.read_text() if path.exists() else ""
    return text[: text.rfind("\n") + 1].splitlines()
