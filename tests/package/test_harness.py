"""The test helpers' own promises, where a wrong one would fail other tests for the wrong reason."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.support.servers import _sigint_heard

SHOW = "import signal; print(signal.getsignal(signal.SIGINT))"


@pytest.mark.slow
def test_a_server_hears_sigint_even_where_the_run_ignores_it() -> None:
    # As a run started with `pytest &` from a non-interactive shell is: its children inherit the ignored SIGINT.
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True).stdout == "1\n"
        with _sigint_heard():
            heard = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True).stdout
        assert heard == "<built-in function default_int_handler>\n"
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # the run's own, as it was
    finally:
        signal.signal(signal.SIGINT, before)
