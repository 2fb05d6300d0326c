"""Lines a user turned on reach stderr even where the host configured no logging, and under uvicorn as uvicorn's do.

uvicorn configures its own loggers and leaves the root one bare, so a record of an ``oip_asgi``
logger finds no handler: Python's last resort prints warnings only, without their level, and
``access_log=True`` or a model's load printed nothing. `follow_the_host` gives the ``oip_asgi``
logger a handler of its own, and `show_unless_configured` one of the loggers whose INFO lines a user
asked for: it stands aside whenever another handler would take the record (a host that configures
logging, before or after the app is built, keeps its own); else it hands the record to uvicorn's
handlers, where uvicorn's are configured (its format), or writes it to stderr.
"""

from __future__ import annotations

import logging
import sys

from .log_settings import TritonFormat

FORMAT = "%(levelname)s:%(name)s:%(message)s"  # logging.basicConfig's
ROOT = "oip_asgi"
# uvicorn's handlers hang on "uvicorn"; its --log-level is set on "uvicorn.error" (uvicorn.Config.configure_logging).
UVICORN, UVICORN_LEVEL = "uvicorn", "uvicorn.error"


class _Fallback(logging.Handler):
    """uvicorn's handlers or stderr, for the records that no other handler on their way up would take."""

    def emit(self, record: logging.LogRecord) -> None:
        if _taken_elsewhere(record, self):
            return
        host = logging.getLogger(UVICORN).handlers
        if host:
            for handler in host:
                if record.levelno >= handler.level:
                    handler.handle(record)
            return
        try:
            stream = sys.stderr  # looked up at each record, as the last resort does: it may be replaced
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def _taken_elsewhere(record: logging.LogRecord, fallback: logging.Handler) -> bool:
    """Whether a handler of the host's takes `record` on its way up, or a fallback nearer its logger does."""
    nearest: logging.Handler | None = None
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None:
        for handler in logger.handlers:
            if isinstance(handler, _Fallback):
                nearest = nearest or handler
            elif record.levelno >= handler.level:
                return True
        if not logger.propagate:
            break
        logger = logger.parent
    return nearest is not fallback


def _configured(logger: logging.Logger) -> bool:
    """Whether a handler other than ours is on `logger`'s way up (`Logger.hasHandlers`, ours left out)."""
    current: logging.Logger | None = logger
    while current is not None:
        if any(not isinstance(handler, _Fallback) for handler in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def _fallback_of(logger: logging.Logger) -> _Fallback | None:
    """`logger`'s fallback, added now where nothing in its hierarchy has a handler; None where something does."""
    for handler in logger.handlers:
        if isinstance(handler, _Fallback):
            return handler
    if _configured(logger):  # the host configured logging: its choice stands
        return None
    fallback = _Fallback()
    fallback.setFormatter(TritonFormat(logging.Formatter(FORMAT)))  # the logging extension's log_format
    logger.addHandler(fallback)
    return fallback


def show_unless_configured(logger: logging.Logger) -> None:
    """`logger`'s INFO lines shown (in uvicorn's log, or on stderr) when nothing in its hierarchy has a handler."""
    if _fallback_of(logger) is not None and logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)  # else the root logger's WARNING would drop them before any handler


def follow_the_host() -> None:
    """The ``oip_asgi`` records where the host configured nothing for them: under uvicorn in its format and at
    its ``--log-level`` (INFO lines included), elsewhere on stderr with their level. Called as the app is
    built, starts and first serves: uvicorn configures its logging before it imports the app, a program
    that runs uvicorn itself may do so after."""
    logger = logging.getLogger(ROOT)
    if _fallback_of(logger) is None:
        return
    if logging.getLogger(UVICORN).handlers and logger.level == logging.NOTSET:
        logger.setLevel(logging.getLogger(UVICORN_LEVEL).getEffectiveLevel())
