"""uvicorn's log configuration, with the ``oip_asgi`` loggers beside its own and Triton's log options over it;
Triton's ``--trace-config`` read into the app's ``tracing=`` settings.

The serve command runs the whole process, so Triton's log settings (``--log-info``, ``--log-verbose``,
``--log-format``, ``--log-file``..., and the logging extension while it serves) govern uvicorn's lines
as well as ours: `log_config` makes every logger's level and every handler's format, and `LogOptions.start`
hands the rest to the core's log settings (`_core/log_settings.py`), in the process that serves.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import logging
from dataclasses import dataclass
from typing import Any

from ..._core import log_settings

# uvicorn's loggers, which its configuration and its --log-level set.
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
LEVELS = {"critical": 50, "error": 40, "warning": 30, "info": 20, "debug": 10, "trace": 5}  # uvicorn's


@dataclass(frozen=True)
class LogOptions:
    """Triton's log settings at start: what --log-level says, each of Triton's options over it."""

    info: bool = True
    warning: bool = True
    error: bool = True
    verbose: int = 0
    format: str = "default"
    file: str = ""

    @classmethod
    def of(cls, args: argparse.Namespace) -> LogOptions:
        level = LEVELS[args.log_level]
        return cls(
            info=level <= logging.INFO if args.log_info is None else args.log_info,
            warning=level <= logging.WARNING if args.log_warning is None else args.log_warning,
            error=level <= logging.ERROR if args.log_error is None else args.log_error,
            verbose=(logging.DEBUG + 1 - level if level <= logging.DEBUG else 0)
            if args.log_verbose is None
            else args.log_verbose,
            format=args.log_format or "default",
            file=args.log_file or "",
        )

    @property
    def level(self) -> int:
        return log_settings.threshold(info=self.info, warning=self.warning, error=self.error, verbose=self.verbose)

    def start(self) -> None:
        """In the process that serves, once its logging is configured: the logging extension takes over."""
        log_settings.start(
            info=self.info,
            warning=self.warning,
            error=self.error,
            verbose=self.verbose,
            format=self.format,
            file=self.file,
            loggers=UVICORN_LOGGERS,
        )


def log_config(options: LogOptions) -> dict[str, Any]:
    """uvicorn's own, plus the oip_asgi loggers on its stderr handler, every logger at `options.level`, each
    formatter able to lay lines out as Triton's ISO8601, every handler on `options.file` when given.

    Without the oip_asgi loggers, an app's ``access_log=True`` lines and a model's errors would go to a root
    logger that uvicorn leaves bare.
    """
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    for name, formatter in config["formatters"].items():
        config["formatters"][name] = {**formatter, "()": f"{__name__}.formatter", "inner": formatter["()"]}
    if options.file:
        for handler in config["handlers"].values():
            handler.pop("stream", None)
            handler.update({"class": "logging.FileHandler", "filename": options.file, "encoding": "utf-8"})
    for logger in config["loggers"].values():
        logger["level"] = options.level
    config["loggers"]["oip_asgi"] = {"handlers": ["default"], "level": options.level, "propagate": False}
    return config


def formatter(inner: str, **options: Any) -> logging.Formatter:
    """uvicorn's formatter (`inner`, a dotted name, built with `options`), or Triton's ISO8601 layout when the
    log settings say so."""
    module, _, name = inner.rpartition(".")
    return log_settings.TritonFormat(getattr(importlib.import_module(module), name)(**options))


def trace_config(values: list[str]) -> dict[str, object] | None:
    """Triton's ``--trace-config [MODE,]SETTING=VALUE`` options as `oip_app(tracing=...)`'s settings (None: none
    given). ValueError says what is wrong, in Triton's words where it has them."""
    if not values:
        return None
    settings: dict[str, Any] = {}
    for value in values:
        mode, comma, rest = value.partition(",")
        setting, equals, given = (rest if comma else value).partition("=")
        if comma and not mode:
            raise ValueError(f"No trace mode specified. --trace-config option format is <trace mode>,<setting>=<value> "
                             f"or <setting>=<value>. Got {value}")  # fmt: skip
        if not (equals and setting and given):
            raise ValueError(f"--trace-config option format is '<trace mode>,<setting>=<value>'. Got {value}")
        if comma:
            raise ValueError(
                f"--trace-config {value}: this server traces with OpenTelemetry through the API alone "
                + (
                    "(mode=opentelemetry): it writes no Triton JSON trace file"
                    if mode.lower() == "triton"
                    else "(mode=opentelemetry): its exporter is the process's OpenTelemetry SDK, configured by the "
                    "app or by opentelemetry-instrument and OTEL_* variables (docs/observability.md)"
                )
            )
        if setting == "level":
            settings.setdefault("level", []).append(given)
        else:
            settings[setting] = given
    return settings
