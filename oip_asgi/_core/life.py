"""A model's life in the server log, in Triton's words: a line when each version loads and unloads.

Triton logs ``successfully loaded 'simple' version 1`` and ``successfully unloaded 'simple' version 1``;
operators grep for them, so the lines start with those words, and add how long the load took (the
read of its folder and its load step) and whether it replaced versions served before.
"""

from __future__ import annotations

import logging
import time

from .._declarations.errors import quoted

logger = logging.getLogger("oip_asgi")

clock = time.perf_counter


def loaded(name: str, version: str, since: float, *, reload: bool = False) -> None:
    """`name` `version` serves, having started to load at `since` (a `clock` reading)."""
    again = " (a reload: the versions served before unload)" if reload else ""
    logger.info("successfully loaded %s version %s in %.3f s%s", quoted(name), version, clock() - since, again)


def unloaded(name: str, version: str) -> None:
    logger.info("successfully unloaded %s version %s", quoted(name), version)
