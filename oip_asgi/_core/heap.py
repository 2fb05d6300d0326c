"""The heap a server keeps for life, kept out of the garbage collector's full passes.

CPython's full (generation 2) collection walks every tracked object, and a server that has imported
its libraries and loaded its models holds hundreds of thousands that live as long as it does
(numpy's, scikit-learn's, the models' own). Under load, the objects of requests in flight survive
the young collections and are promoted, which triggers a full pass every second or so: measured on
W8 (docs/benchmarks.md, issue 31), each paused the event loop and every request in flight for
30-200 ms, which was the whole of its p99. Once the models have loaded, `settle` collects once and
freezes what survives (`gc.freeze`): later full passes walk only what came after. An unload thaws
first, so that the cycles of a model let go are collected, then settles again.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect what loading left behind, then keep every survivor out of later collections."""
    gc.collect()
    gc.freeze()


def release() -> None:
    """After an unload: what it let go may be cyclic garbage among the frozen objects; collect it, then settle."""
    gc.unfreeze()
    settle()
