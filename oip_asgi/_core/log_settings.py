"""Triton's logging extension: the server's log settings, read and changed while it runs (docs/observability.md).

Triton's settings are switches over its log: `log_info`, `log_warning` and `log_error` turn each level's
lines on or off, `log_verbose_level` N shows verbose lines up to level N (0: none), `log_format` lays a
line out ("default", or Triton's "ISO8601"), `log_file` is where lines go ("": the console). Here they act
on Python's logging, for the process (as Python's logging is the process's): on the ``oip_asgi`` loggers,
and on uvicorn's too where the serve command runs the process (`start`). Each of those loggers has a
threshold, the lowest line that is on, so that a line that is off costs no record; and `SWITCHES`, a filter
on each, drops the lines of a level turned off between two that are on. Verbose level N is Python's level
``DEBUG + 1 - N``: level 1 is DEBUG, where ``pb_utils.Logger.log_verbose`` writes, as Triton's Python
models write verbose lines at level 1. What is read back is what the loggers do: a host that set the
``oip_asgi`` logger to WARNING reads ``log_info: false``.

`log_format` lays out the lines of the handlers the server made (the serve command's, and the stderr of
a host that configured no logging; `TritonFormat`): a host's own handlers keep their format. `log_file`
is the serve command's ``--log-file``; a request never names a file: as Triton 2.51, it is refused.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from .._declarations.errors import BadRequest
from .triton_json import as_bool, as_string, as_uint, echo, parse
from .unsupported import Unsupported

# The loggers this server writes to: each gets `SWITCHES`; the first, the threshold its children inherit.
LOGGERS = ("oip_asgi", "oip_asgi.access", "oip_asgi.grpc", "oip_asgi.python_backend")
FORMATS = ("default", "ISO8601")
FILE_REFUSED = "log file location can not be updated through network protocol"  # Triton's words, both wires
NOTHING = logging.CRITICAL + 10  # the threshold where every level is off


class LogSettings(msgspec.Struct, gc=False):
    """The settings as Triton's logging extension tells them, in its order (REST encodes this as it is)."""

    log_file: str
    log_info: bool
    log_warning: bool
    log_error: bool
    log_verbose_level: int
    log_format: str


@dataclass(frozen=True, slots=True)
class LogChanges:
    """What a request changes (None: left as it is)."""

    info: bool | None = None
    warning: bool | None = None
    error: bool | None = None
    verbose: int | None = None
    format: str | None = None


class Switches(logging.Filter):
    """Each of Triton's three levels on or off, and the line layout (`iso8601`), for every logger governed."""

    def __init__(self) -> None:
        super().__init__()
        self.info = self.warning = self.error = True
        self.verbose = 0  # the level last set, where the threshold alone cannot tell it (past 10)
        self.iso8601 = False

    def filter(self, record: logging.LogRecord) -> bool:
        level = record.levelno
        if level >= logging.ERROR:
            return self.error
        if level >= logging.WARNING:
            return self.warning
        return self.info if level >= logging.INFO else True  # verbose lines: the threshold decides


SWITCHES = Switches()


@dataclass(slots=True)
class _Governed:
    loggers: tuple[str, ...] = LOGGERS
    file: str = ""
    filtered: set[str] = field(default_factory=set)


_governed = _Governed()


class TritonFormat(logging.Formatter):
    """`default`'s layout, or Triton's ISO8601 one while `SWITCHES.iso8601` says so:
    ``2024-05-20T20:03:26Z I 3415 life.py:24] "successfully loaded 'simple' version 1 in 0.153 s"``,
    the message JSON-escaped as Triton escapes it (one line, whatever it holds)."""

    def __init__(self, default: logging.Formatter) -> None:
        super().__init__()
        self.default = default

    def format(self, record: logging.LogRecord) -> str:
        if not SWITCHES.iso8601:
            return self.default.format(record)
        level = "E" if record.levelno >= logging.ERROR else "W" if record.levelno >= logging.WARNING else "I"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        return f"{stamp} {level} {record.process} {record.filename}:{record.lineno}] {json.dumps(message)}"


def threshold(*, info: bool, warning: bool, error: bool, verbose: int) -> int:
    """The lowest level on: the governed loggers' level (never 0, which would make them inherit one)."""
    if verbose:
        return max(logging.DEBUG + 1 - verbose, 1)
    return logging.INFO if info else logging.WARNING if warning else logging.ERROR if error else NOTHING


def current() -> LogSettings:
    """The settings as the ``oip_asgi`` loggers apply them now."""
    level = logging.getLogger(LOGGERS[0]).getEffectiveLevel()
    if level > logging.DEBUG:
        verbose = 0
    elif SWITCHES.verbose and level == threshold(info=True, warning=True, error=True, verbose=SWITCHES.verbose):
        verbose = SWITCHES.verbose
    else:  # a host's DEBUG is verbose level 1
        verbose = logging.DEBUG + 1 - max(level, 1)
    return LogSettings(
        log_file=_governed.file,
        log_info=SWITCHES.info and level <= logging.INFO,
        log_warning=SWITCHES.warning and level <= logging.WARNING,
        log_error=SWITCHES.error and level <= logging.ERROR,
        log_verbose_level=verbose,
        log_format=FORMATS[SWITCHES.iso8601],
    )


def update(changes: LogChanges) -> LogSettings:
    """Apply `changes` (checked already: every one, or none) to every logger governed; the settings then."""
    now = current()
    info = now.log_info if changes.info is None else changes.info
    warning = now.log_warning if changes.warning is None else changes.warning
    error = now.log_error if changes.error is None else changes.error
    verbose = now.log_verbose_level if changes.verbose is None else changes.verbose
    SWITCHES.info, SWITCHES.warning, SWITCHES.error, SWITCHES.verbose = info, warning, error, verbose
    if changes.format is not None:
        SWITCHES.iso8601 = changes.format == "ISO8601"
    level = threshold(info=info, warning=warning, error=error, verbose=verbose)
    for name in _governed.loggers:
        logger = logging.getLogger(name)
        if name == LOGGERS[0] or not name.startswith(LOGGERS[0] + "."):  # oip_asgi's children inherit its level
            logger.setLevel(level)
    _filter(_governed.loggers)
    return current()


def start(
    *, info: bool, warning: bool, error: bool, verbose: int, format: str, file: str, loggers: Sequence[str]
) -> None:
    """The serve command's settings at start, in the process that serves: its log configuration set `loggers`
    (uvicorn's, beside ours) at `threshold`; from here the extension changes them all."""
    SWITCHES.info, SWITCHES.warning, SWITCHES.error, SWITCHES.verbose = info, warning, error, verbose
    SWITCHES.iso8601 = format == "ISO8601"
    _governed.loggers = (*LOGGERS, *(name for name in loggers if name not in LOGGERS))
    _governed.file = file
    _filter(_governed.loggers)


def _filter(names: Sequence[str]) -> None:
    for name in names:
        if name not in _governed.filtered:
            logging.getLogger(name).addFilter(SWITCHES)
            _governed.filtered.add(name)


# What each wire's request asks, checked in Triton's order with Triton's words: its first refusal is the answer.


def json_changes(body: bytes | memoryview) -> LogChanges:
    """REST's ``POST /v2/logging`` body: a JSON object whose null values change nothing."""
    request = parse(body)
    if not isinstance(request, dict):  # Triton finds no setting in it
        return LogChanges()
    if request.get("log_file") is not None:
        raise Unsupported(FILE_REFUSED)
    given = {key: value for key, value in request.items() if value is not None}
    log_format = as_string(given["log_format"]) if "log_format" in given else None
    changes = LogChanges(
        info=as_bool(given["log_info"]) if "log_info" in given else None,
        warning=as_bool(given["log_warning"]) if "log_warning" in given else None,
        error=as_bool(given["log_error"]) if "log_error" in given else None,
        verbose=as_uint(given["log_verbose_level"]) if "log_verbose_level" in given else None,
        format=log_format,
    )
    if log_format is not None and log_format not in FORMATS:
        raise BadRequest(f"invalid argument for --log_format, got: {echo(log_format)}")  # Triton: 503
    return changes


def grpc_changes(settings: Mapping[str, tuple[str | None, object]]) -> LogChanges:
    """gRPC's LogSettings map: each setting's value as (the name of its oneof choice, or None; its value)."""
    if "log_file" in settings:
        raise Unsupported(FILE_REFUSED)

    def value(key: str, choice: str, kind: str) -> object:
        if key not in settings:
            return None
        chosen, given = settings[key]
        if chosen != choice:
            raise BadRequest(f"expect {kind} for '{key}'")
        return given

    switches = [value(key, "bool_param", "boolean") for key in ("log_info", "log_warning", "log_error")]
    verbose = value("log_verbose_level", "uint32_param", "int32")
    log_format = value("log_format", "string_param", "string")
    if log_format is not None and log_format not in FORMATS:
        raise BadRequest(f"invalid argument for log_format, got: {echo(str(log_format))}")
    info, warning, error = (None if switch is None else bool(switch) for switch in switches)
    return LogChanges(
        info=info,
        warning=warning,
        error=error,
        verbose=None if verbose is None else int(verbose),  # type: ignore[call-overload]  # a uint32
        format=None if log_format is None else str(log_format),
    )
