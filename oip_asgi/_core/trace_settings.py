"""Triton's trace extension: which requests are traced, globally and per model, read and changed while serving.

Triton's settings: `trace_level` (OFF, or TIMESTAMPS and TENSORS, either or both), `trace_rate` (one
request in every `trace_rate` is traced), `trace_count` (how many more traces: each one sampled counts it
down, -1 is no limit), and `log_frequency` and `trace_file`, which are Triton's JSON trace file's. This
server traces with OpenTelemetry, Triton's ``trace_mode`` "opentelemetry", whose responses leave those two
out as Triton's do; `log_frequency` is taken and kept, `trace_file` refused as Triton 2.51 refuses it from
a request (no request names a file this server writes). What a traced request records is `tracing.py`'s.

A model's settings are its own where a request set them, the global ones where none did, and follow the
global ones as they change; a setting set to null (REST) or to no value (gRPC) is the global one again
(for a model; a model left with none of its own is the global settings' again), or the one the server
started with (globally). Each setting in force counts its own requests for its rate, as Triton's do.
An update is checked whole before any of it applies: a refused one changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from .._declarations.errors import BadRequest
from .triton_json import as_string, as_strings, echo, parse
from .unsupported import Unsupported

LEVELS = ("TIMESTAMPS", "TENSORS")  # in the order a response lists them
FIELDS = ("trace_level", "trace_rate", "trace_count", "log_frequency")
MODE = "opentelemetry"
FILE_REFUSED = "trace file location can not be updated through network protocol"  # Triton's words, both wires
UINT32_MAX, INT32_MAX = 2**32 - 1, 2**31 - 1
# Triton's --trace-config global settings, as `oip_app(tracing={...})` takes them.
START_SETTINGS = ("level", "rate", "count", "mode")

Field = Literal["trace_level", "trace_rate", "trace_count", "log_frequency"]


class Cleared:
    """A setting a request clears: it is its fallback's again."""


CLEARED = Cleared()
Changes = dict[str, "tuple[str, ...] | int | Cleared"]


class TraceSettingsResponse(msgspec.Struct, gc=False):
    """The settings in force, as Triton's trace extension tells them in its opentelemetry mode (REST encodes
    this as it is; gRPC puts each in its map, a list of strings)."""

    trace_level: list[str]
    trace_rate: str
    trace_count: str
    trace_mode: str


@dataclass(slots=True, eq=False)
class Setting:
    """The settings one model (or every model without its own) follows, and its count of requests seen."""

    trace_level: tuple[str, ...]  # () is OFF
    trace_rate: int
    trace_count: int
    log_frequency: int = 0
    specified: frozenset[str] = frozenset()  # set here, not taken from the fallback
    seen: int = 0

    def sample(self) -> tuple[str, ...]:
        """This request's levels if it is traced (one in `trace_rate`, while `trace_count` lasts), else ()."""
        if not self.trace_level or self.trace_count == 0:
            return ()
        self.seen += 1
        if self.seen % self.trace_rate:
            return ()
        if self.trace_count > 0:
            self.trace_count -= 1
        return self.trace_level

    def refusal(self) -> str | None:
        """Why Triton would refuse this setting, where it traces; None when it would take it."""
        if not self.trace_level:
            return None
        if self.trace_rate == 0:
            return "sample rate must be non-zero"
        if self.trace_count == 0:
            return "trace count must be non-zero (-1 for no limit)"
        return None

    def response(self) -> TraceSettingsResponse:
        level = list(self.trace_level) or ["OFF"]
        return TraceSettingsResponse(level, str(self.trace_rate), str(self.trace_count), MODE)


def _derived(current: Setting | None, fallback: Setting, changes: Changes) -> Setting:
    """`current` with `changes` applied: each field the request or `current` set, else `fallback`'s."""
    values: dict[str, object] = {name: getattr(fallback, name) for name in FIELDS}
    specified = set()
    for name in FIELDS:
        if name in changes:
            if changes[name] is CLEARED:
                continue
            values[name] = changes[name]
        elif current is None or name not in current.specified:
            continue
        else:
            values[name] = getattr(current, name)
        specified.add(name)
    return Setting(**values, specified=frozenset(specified))  # type: ignore[arg-type]


class TraceSettings:
    """The global settings, each model's own, and the ones the server started with (what a global clear returns to)."""

    def __init__(self, start: Setting) -> None:
        self.models: dict[str, Setting] = {}
        self.reset(start)

    def reset(self, start: Setting) -> None:
        """Start again from `start`, no model with settings of its own (the serve command's --trace-config)."""
        self.start = dataclasses.replace(start, specified=frozenset())
        self.globals = dataclasses.replace(self.start)
        self.models = {}

    def of(self, name: str | None) -> Setting:
        return self.globals if name is None else self.models.get(name, self.globals)

    def sample(self, name: str) -> tuple[str, ...]:
        """The levels a request of the model `name` is traced at (() when it is not)."""
        return self.models.get(name, self.globals).sample()

    @property
    def active(self) -> bool:
        """Whether any setting traces: while none does, the core's bodies look at none of them."""
        return bool(self.globals.trace_level) or any(setting.trace_level for setting in self.models.values())

    def update(self, name: str | None, changes: Changes, *, tracing_needed: Callable[[], None]) -> None:
        """Apply `changes` to the model `name`'s settings (None: the global ones, which the models follow).

        `tracing_needed` is called when the result traces, before anything changes: it raises if this
        server cannot trace (no OpenTelemetry API installed).
        """
        if name is None:
            globals_ = _derived(self.globals, self.start, changes)
            models = {model: _derived(setting, globals_, {}) for model, setting in self.models.items()}
        else:
            globals_ = self.globals
            own = _derived(self.models.get(name), globals_, changes)
            models = {key: setting for key, setting in self.models.items() if key != name}
            if own.specified:
                models[name] = own
        for setting in (globals_, *models.values()):
            refusal = setting.refusal()
            if refusal is not None:  # Triton's words
                raise BadRequest(f"Attempting to set invalid trace setting :{refusal}")
        if globals_.trace_level or any(setting.trace_level for setting in models.values()):
            tracing_needed()
        self.globals, self.models = globals_, models


def start_setting(tracing: bool | Mapping[str, object]) -> Setting:
    """The settings a server starts with: `tracing=True` traces every request (TIMESTAMPS, rate 1), False
    none (Triton's defaults: OFF, rate 1000, count -1); a mapping takes Triton's global ``--trace-config``
    settings (``{"level": ["TIMESTAMPS"], "rate": 100, "count": -1}``) over those defaults."""
    if tracing is True:
        return Setting(("TIMESTAMPS",), 1, -1)
    setting = Setting((), 1000, -1)
    if tracing is False:
        return setting
    unknown = sorted(set(tracing) - set(START_SETTINGS))
    if unknown:
        raise ValueError(f"tracing: unknown setting {unknown[0]!r}; the settings are {', '.join(START_SETTINGS)}")
    mode = tracing.get("mode", MODE)
    if mode != MODE:
        raise ValueError(
            f"tracing: trace mode {mode!r} is not served: this server traces with OpenTelemetry (mode "
            "'opentelemetry'), and writes no Triton JSON trace file"
        )
    if "level" in tracing:
        given = tracing["level"]
        setting.trace_level = _start_levels([given] if isinstance(given, str) else list(given))  # type: ignore[call-overload]
    for key, name in (("rate", "trace_rate"), ("count", "trace_count")):
        if key in tracing:
            try:
                setattr(setting, name, _number(name, str(tracing[key]), wire="grpc"))
            except BadRequest as exc:
                raise ValueError(f"tracing: {exc.message}") from None
    refusal = setting.refusal()
    if refusal is not None:
        raise ValueError(f"tracing: {refusal}")
    return setting


# What each wire's request asks, checked in Triton's order with Triton's words: its first refusal is the answer.


def _start_levels(given: Sequence[object]) -> tuple[str, ...]:
    """Triton's ``--trace-config level=`` values, any case (each option adds its level; OFF anywhere is OFF)."""
    chosen = set()
    for value in given:
        name = str(value).lower()
        if name in ("true", "on", "min", "max", "timestamps"):
            chosen.add("TIMESTAMPS")
        elif name in ("tensors", "false", "off"):
            chosen.add(name.upper())
        else:
            raise ValueError(f"tracing: invalid value for trace level option: {value}")
    return () if chosen & {"OFF", "FALSE"} else tuple(level for level in LEVELS if level in chosen)


def _levels(given: Sequence[str]) -> tuple[str, ...]:
    """A request's levels: OFF alone, or TIMESTAMPS and TENSORS."""
    chosen = set()
    for level in given:
        if level == "OFF":
            if len(given) != 1:
                raise BadRequest("Expect only one trace level 'OFF' is specified")
        elif level in LEVELS:
            chosen.add(level)
        else:  # Triton ignores a name it does not know; a typo here would trace nothing without a word
            raise BadRequest(f"unknown trace level '{echo(level)}'; the levels are OFF, TIMESTAMPS and TENSORS")
    return tuple(level for level in LEVELS if level in chosen)


_RANGES = {"trace_rate": (0, UINT32_MAX), "trace_count": (-1, INT32_MAX), "log_frequency": (0, UINT32_MAX)}


def _number(name: str, text: str, *, wire: Literal["rest", "grpc"]) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise BadRequest(f"Unable to parse '{name}', got: {echo(text)}") from None
    low, high = _RANGES[name]
    if name == "trace_count" and value < low:  # Triton's REST words have no space after "got:"
        space = "" if wire == "rest" else " "
        raise BadRequest(f"Unable to parse '{name}'. Expecting value >= {low}, got:{space}{echo(text)}")
    if not low <= value <= high:
        raise BadRequest(f"Unable to parse '{name}', value is out of range [ {low}, {high} ], got: {echo(text)}")
    return value


def json_changes(body: bytes | memoryview) -> Changes:
    """REST's ``POST .../trace/setting`` body: a JSON object of strings (the level an array of them), null to clear."""
    request = parse(body)
    if not isinstance(request, dict):  # Triton finds no setting in it
        return {}
    if "trace_file" in request:
        raise Unsupported(FILE_REFUSED)
    changes: Changes = {}
    if "trace_level" in request:
        given = request["trace_level"]
        if given is None:
            changes["trace_level"] = CLEARED
        else:
            names = as_strings(given)
            if names:  # an empty array changes nothing, as in Triton
                changes["trace_level"] = _levels(names)
    for name in FIELDS[1:]:
        if name in request:
            given = request[name]
            changes[name] = CLEARED if given is None else _number(name, as_string(given), wire="rest")
    return changes


def grpc_changes(settings: Mapping[str, Sequence[str]]) -> Changes:
    """gRPC's TraceSetting map: each setting's list of values, an empty one to clear it."""
    if "trace_file" in settings:
        raise Unsupported(FILE_REFUSED)
    changes: Changes = {}
    if "trace_level" in settings:
        levels = list(settings["trace_level"])
        changes["trace_level"] = _levels(levels) if levels else CLEARED
    for name in FIELDS[1:]:
        if name in settings:
            values = list(settings[name])
            if len(values) > 1:
                raise BadRequest(f"expect only 1 value for '{name}'")
            changes[name] = _number(name, values[0], wire="grpc") if values else CLEARED
    return changes
