"""Which calls of a sync model run on the event loop: those measured cheaper than the hop to a thread.

A sync model runs on a worker thread so that the event loop keeps serving while it computes, and the
hop there and back costs CPU of its own: 30-40 µs at one request at a time (two wake-ups), a few at
sixteen (bench/handoff.py). Many calls cost less than the hop: a model file's library on a row (an
ONNX MLP: 11 µs), a plain `def` that reshapes, looks up or adds (an identity: a few µs). For those,
the hop is most of the request's model cost, and blocking the loop for the call costs the other
requests no more than the hop would have.

Only while a request is the model's one in flight, though: with others in flight, the loop has their
work to do during the call, and a batch forms behind it (measured on W9's ONNX file at sixteen
clients: inline calls cost 1.2-1.4x the CPU per request of calls on a thread, in the same rounds).

So each call is timed (it is anyway, for the statistics) in wall time, `time.perf_counter_ns`: a call
that sleeps, waits on a socket or a lock, or waits for the GIL is as slow as its wall clock says, never
judged cheap for using little CPU. A request runs on the loop when calls of its size (elements in) or
larger were measured under `BUDGET_NS`: larger requests cost more, so the size measured under the
budget bounds what may run inline. A call over the budget, wherever it ran, lowers that bound below its
size: a call whose cost grows (a new input shape, a busy machine) goes back to the threads after one call.

A model file's call is a library's computation, with no I/O and no thread of its own to keep: that
rule alone decides (`for_files`). A plain `def` is arbitrary code (`for_functions`), so it earns the
loop more slowly and loses it faster:
- it runs inline only once its last `FUNCTION_STREAK` calls in a row were all measured under the
  budget (on threads at first), so a cold start, a warm-up or a first call that happened to be cheap
  does not qualify it;
- any call over the budget starts the streak again, and one that ran inline (it held up the loop)
  within `FORGIVEN_AFTER` inline calls of the previous such call doubles the streak needed from then
  on: a function slow more often than that is inlined ever more rarely, until its slow calls no longer
  reach the loop (at most about log2(n) of its n calls do), and one that always sleeps or does I/O
  never runs there. A slow inline call after `FORGIVEN_AFTER` cheap ones is counted as the machine's
  noise (a preemption, a garbage collection: 1 to 5 calls in 10,000 of a cheap `def` here, on a
  loaded machine) and
  the streak needed goes back to `FUNCTION_STREAK`: without that, noise alone would double it without
  end and send every cheap function back to the threads within days. So a function slow once every
  `FORGIVEN_AFTER` calls or more rarely holds up the loop that often, no more;
- no rule can know a call's cost before it runs, so a function that can block for long, whose every
  call must run on a thread (one that waits on this server's own event loop: a deadlock there), or that
  keeps state per thread it must not share with the loop's thread, says ``Model(..., inline=False)``.
What ran inline behaves as on a thread: its exceptions reach the request alike (a SystemExit or
KeyboardInterrupt fails the call, not the loop), and it runs in a copy of the request's context
variables, so what it sets stays in the call. It never runs beside another call of its model (only
while its request is the model's one in flight), so a function that was safe on the threads stays so.
"""

from __future__ import annotations

BUDGET_NS = 30_000  # the hop's CPU at one request at a time (bench/handoff.py): no inline call may cost more
FUNCTION_STREAK = 4  # calls in a row under the budget before a plain `def` runs inline (doubled by slow inline calls)
FORGIVEN_AFTER = 1000  # inline calls under the budget after which a slow one counts as noise


class InlineCalls:
    """When a model's calls run on the event loop: up to `size` elements in, after `needed` cheap calls in a row."""

    __slots__ = ("size", "streak", "needed", "least", "clean")

    def __init__(self, needed: int) -> None:
        self.size = 0  # the largest request (elements in) measured under the budget since a slower one of its size
        self.streak = 0  # calls in a row measured under the budget
        self.needed = self.least = needed  # the streak a call needs before it runs inline, and its start
        self.clean = 0  # inline calls under the budget since the last one over it

    @classmethod
    def for_files(cls) -> InlineCalls:
        """A model file's runner: inline once its size was measured cheap (a library computes, no more)."""
        return cls(0)

    @classmethod
    def for_functions(cls) -> InlineCalls:
        """A plain `def`: inline once `FUNCTION_STREAK` calls in a row were cheap, a streak doubled by each
        slow inline call that follows another within `FORGIVEN_AFTER`."""
        return cls(FUNCTION_STREAK)

    def measured(self, size: int, ns: int, inline: bool) -> None:
        if ns <= BUDGET_NS:
            if size > self.size:
                self.size = size
            self.streak += 1
            if inline:
                self.clean += 1
            return
        if size <= self.size:
            self.size = size - 1
        self.streak = 0
        if inline:  # it held up the loop: twice the proof before the next time, unless it was rare (a file's 0 stays)
            self.needed = self.least if self.clean >= FORGIVEN_AFTER else self.needed * 2
            self.clean = 0
