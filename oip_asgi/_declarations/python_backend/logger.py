"""``pb_utils.Logger``: Triton's model logger, over the ``oip_asgi.python_backend`` logger.

Verbose lines are DEBUG, Triton's verbose level 1: they appear at a verbose level (the logging extension's
``log_verbose_level``, ``oip-asgi serve --log-verbose 1`` or ``--log-level debug``), as Triton's do. Each
line carries the model's file and line (``stacklevel``), as Triton's ISO8601 layout shows them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ClassVar

_logger = logging.getLogger("oip_asgi.python_backend")
_LEVELS = {0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.DEBUG}


def _at(level: int) -> Callable[[str], None]:
    def log(message: str) -> None:
        _logger.log(level, "%s", message, stacklevel=2)

    return log


class Logger:
    """Triton's model logger: lines go to the ``oip_asgi.python_backend`` logger at each level."""

    INFO: ClassVar[int] = 0
    WARNING: ClassVar[int] = 1
    ERROR: ClassVar[int] = 2
    VERBOSE: ClassVar[int] = 3

    @staticmethod
    def log(message: str, level: int = 0) -> None:
        _logger.log(_LEVELS.get(level, logging.INFO), "%s", message, stacklevel=2)

    log_info = staticmethod(_at(logging.INFO))
    log_warn = staticmethod(_at(logging.WARNING))
    log_error = staticmethod(_at(logging.ERROR))
    log_verbose = staticmethod(_at(logging.DEBUG))
