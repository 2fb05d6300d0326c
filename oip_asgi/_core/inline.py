"""Which calls of a model file run on the event loop: those measured cheaper than the hop to a thread.

A sync model runs on a worker thread so that the event loop keeps serving while it computes, and the
hop there and back costs CPU of its own: 30-40 µs at one request at a time (two wake-ups), a few at
sixteen (bench/handoff.py). A model file's call is a library's computation, with no I/O and no thread
of its own to keep, and some cost less than the hop (an ONNX MLP on a row: 11 µs). For those, the
hop is most of the request's model cost and blocking the loop for the call costs the other requests
no more than the hop would have.

Only while a request is the model's one in flight, though: with others in flight, the loop has their
work to do during the call, and a batch forms behind it (measured on W9's ONNX file at sixteen
clients: inline calls cost 1.2-1.4x the CPU per request of calls on a thread, in the same rounds).

So each model file's calls are timed (they are anyway, for the statistics), and a request runs on the
loop when calls of its size (elements in) or larger were measured under `BUDGET_NS`: larger requests
cost more, so the size measured under the budget bounds what may run inline. A call over the budget,
wherever it ran, lowers that bound below its size: a library whose cost grows (a new input shape, a
busy machine) goes back to the threads after one call.
"""

from __future__ import annotations

BUDGET_NS = 30_000  # the hop's CPU at one request at a time (bench/handoff.py): no inline call may cost more


class InlineCalls:
    """The size (elements in) up to which a model's calls run on the event loop; 0 until one was measured."""

    __slots__ = ("size",)

    def __init__(self) -> None:
        self.size = 0

    def measured(self, size: int, ns: int) -> None:
        if ns <= BUDGET_NS:
            if size > self.size:
                self.size = size
        elif size <= self.size:
            self.size = size - 1
