"""The heap a server keeps for life, kept out of the garbage collector's full passes.

CPython's full (generation 2) collection walks every tracked object, and a server that has imported
its libraries and loaded its models holds hundreds of thousands that live as long as it does
(numpy's, scikit-learn's, the models' own). Under load, the objects of requests in flight survive
the young collections and are promoted, which triggers a full pass every second or so: measured on
W8 (docs/benchmarks.md, issue 31), each paused the event loop and every request in flight for
100-270 ms on a busy machine (30-60 ms on a quiet one), which was the whole of its p99. Once the
models have loaded, `settle` collects once and freezes what survives (`gc.freeze`): later full
passes walk only what came after.

A model loaded or unloaded later (a model repository's) changes the heap: an unload thaws it at once,
so that the cycles of the model let go are collected, and it is settled again once changes have stopped
for `SETTLE_AFTER` seconds (a full pass after each would cost a burst of a thousand changes a thousand
pauses).
"""

from __future__ import annotations

import asyncio
import gc

SETTLE_AFTER = 1.0  # seconds without a load or unload before the heap is settled again


def settle() -> None:
    """Collect what loading left behind, then keep every survivor out of later collections."""
    gc.collect()
    gc.freeze()


class Settler:
    """One server's settling of the heap after its loads and unloads."""

    def __init__(self) -> None:
        self._pending: asyncio.TimerHandle | None = None

    def settle(self) -> None:
        """Now: the start-up loads have ended."""
        self.cancel()
        settle()

    def changed(self, *, unloaded: bool) -> None:
        """A model was loaded or unloaded: settle once the changes have stopped."""
        if unloaded:
            gc.unfreeze()  # what it let go may be cyclic garbage among the frozen: collectable again
        self.cancel()
        self._pending = asyncio.get_running_loop().call_later(SETTLE_AFTER, self._settled)

    def _settled(self) -> None:
        self._pending = None
        settle()

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
