"""One lock per model name, for as long as someone holds or waits for it.

A name's puts, removals, loads and unloads run one at a time; different names proceed in parallel.
An entry lives while a task holds or waits for it, so names that come and go leave nothing behind.
The task that holds a name's lock may take it again (a repository's load holds it around its read
and the core's put, which takes it too).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio


def _new_lock() -> anyio.Lock:
    # `anyio.Lock` loads anyio's synchronization modules on first access: when a name's lock is first taken
    # (model control, a model's replacement), not at import.
    return anyio.Lock()


@dataclass
class _Entry:
    lock: anyio.Lock = field(default_factory=_new_lock)
    users: int = 0  # tasks holding or waiting for it
    owner: asyncio.Task[object] | None = None
    depth: int = 0  # how many times its owner took it


class NameLocks:
    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        """The names with a lock now (held or waited for)."""
        return len(self._entries)

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        entry = self._entries.get(name)
        if entry is None:
            entry = self._entries[name] = _Entry()
        task = asyncio.current_task()
        if entry.owner is not None and entry.owner is task:
            entry.depth += 1
            try:
                yield
            finally:
                entry.depth -= 1
            return
        entry.users += 1
        try:
            async with entry.lock:
                entry.owner, entry.depth = task, 1
                try:
                    yield
                finally:
                    entry.owner, entry.depth = None, 0
        finally:
            entry.users -= 1
            if not entry.users:
                del self._entries[name]
