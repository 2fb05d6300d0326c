"""uvicorn's log configuration, with the ``oip_asgi`` loggers beside its own."""

from __future__ import annotations

import copy
from typing import Any


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's own, plus the oip_asgi loggers on its stderr handler at `level` (--log-level).

    Without them, an app's ``access_log=True`` lines and a model's errors would go to a root logger
    that uvicorn leaves bare.
    """
    from uvicorn.config import LOG_LEVELS, LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["oip_asgi"] = {"handlers": ["default"], "level": LOG_LEVELS[level], "propagate": False}
    return config
