"""Lines a user turned on reach stderr even where the host configured no logging.

uvicorn configures its own loggers and leaves the root one bare, so a record of an ``oip_asgi``
logger finds no handler, and Python's last resort prints warnings only: ``access_log=True`` printed
nothing. `show_unless_configured` gives such a logger a stderr handler of its own, which stands
aside whenever another handler would take the record: a host that configures logging, before or
after the app is built, keeps its own.
"""

from __future__ import annotations

import logging
import sys

FORMAT = "%(levelname)s:%(name)s:%(message)s"  # logging.basicConfig's


class _Fallback(logging.Handler):
    """stderr, for the records that no other handler on their way up would take."""

    def emit(self, record: logging.LogRecord) -> None:
        if _taken_elsewhere(record, self):
            return
        try:
            stream = sys.stderr  # looked up at each record, as the last resort does: it may be replaced
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def _taken_elsewhere(record: logging.LogRecord, fallback: logging.Handler) -> bool:
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None:
        if any(handler is not fallback and record.levelno >= handler.level for handler in logger.handlers):
            return True
        if not logger.propagate:
            return False
        logger = logger.parent
    return False


def show_unless_configured(logger: logging.Logger) -> None:
    """Make `logger`'s INFO lines visible on stderr when nothing in its hierarchy has a handler."""
    if logger.hasHandlers():  # the host configured logging (or this ran before): its choice stands
        return
    fallback = _Fallback()
    fallback.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(fallback)
    if logger.level == logging.NOTSET:  # else the root logger's WARNING would drop them before any handler
        logger.setLevel(logging.INFO)
