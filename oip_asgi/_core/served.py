"""The served models by name and version, and why a name serves nothing: one owner of a model's life.

Per name there are either served versions (each a `ServedModel` with its own state) or a record of
why nothing serves (`NotServed`: loading for the first time, failed to load, unloading, unloaded).
Every change goes through a few named methods, checked against `TRANSITIONS`; the repository index,
readiness, the errors of a lookup and the statistics all read from here.

The unversioned name means the newest version: integer versions order numerically (as Triton's do)
and after any named ones. Lookups answer in Triton's words first, since its clients read them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .._declarations.errors import BadRequest, ModelNotReady, NotFound, quoted
from .._declarations.triton import is_integer_version
from .locks import NameLocks
from .serving import ServedModel, State


class Cause(enum.Enum):
    """Why a name serves nothing."""

    LOADING = "LOADING"  # its first load runs
    FAILED = "FAILED"  # its load failed: the reason says why
    UNLOADING = "UNLOADING"  # its versions finish the requests they hold
    UNLOADED = "UNLOADED"  # unloaded (or never loaded, where an unload asked for it)


# The state Triton's index shows for each cause.
_STATE_OF: dict[Cause, State] = {
    Cause.LOADING: "LOADING",
    Cause.FAILED: "UNAVAILABLE",
    Cause.UNLOADING: "UNLOADING",
    Cause.UNLOADED: "UNAVAILABLE",
}

SERVING = "SERVING"  # a name with served versions
# What a name may become from what it is (None: the name is unknown here).
TRANSITIONS: dict[Cause | str | None, frozenset[Cause | str | None]] = {
    None: frozenset({Cause.LOADING, SERVING, Cause.FAILED, Cause.UNLOADED}),
    Cause.LOADING: frozenset({Cause.LOADING, SERVING, Cause.FAILED}),  # (again, after a load was cancelled)
    SERVING: frozenset({SERVING, Cause.UNLOADING, None}),
    Cause.UNLOADING: frozenset({Cause.UNLOADED}),
    Cause.FAILED: frozenset({Cause.LOADING, Cause.FAILED, Cause.UNLOADED, None}),
    Cause.UNLOADED: frozenset({Cause.LOADING, Cause.UNLOADED, None}),
}


class IllegalTransition(RuntimeError):
    """A change of a name's state its state does not allow (a bug in the caller, never a client's fault)."""


@dataclass(frozen=True)
class NotServed:
    """Why a name serves nothing, as Triton's index tells it."""

    cause: Cause
    reason: str = ""

    @property
    def state(self) -> State:
        return _STATE_OF[self.cause]


class ServedModels:
    """Served model versions by name; `put` and `unloading` change them at once, between two requests."""

    def __init__(self) -> None:
        self._versions: dict[str, dict[str, ServedModel]] = {}
        self._not_served: dict[str, NotServed] = {}
        self.locks = NameLocks()  # one per name, held around each change of it (`hold`)
        self.generation = 0  # changes with every put or pop, for what is derived from the listing
        # Whether a name that has no record is a model that could be loaded (a model repository's).
        self.loadable: Callable[[str], bool] = lambda name: False

    # Reading

    def names(self) -> list[str]:
        return list(self._versions)

    def all(self) -> list[ServedModel]:
        return [model for versions in self._versions.values() for model in versions.values()]

    def versions(self, name: str) -> list[str]:
        return list(self._versions[name])

    def __contains__(self, name: str) -> bool:
        return name in self._versions

    def unknown(self, name: str) -> bool:
        """Whether `name` is no model here at all: not served, with no record, and none a repository could load."""
        return name not in self._versions and name not in self._not_served and not self.loadable(name)

    def not_served(self, name: str) -> NotServed | None:
        """Why `name` serves nothing, if it has a record of it."""
        return self._not_served.get(name)

    def unserved(self) -> dict[str, NotServed]:
        """Every name that has a record of why it serves nothing, with it."""
        return dict(self._not_served)

    def failed(self) -> dict[str, NotServed]:
        """The names whose load failed, with why."""
        return {name: record for name, record in self._not_served.items() if record.cause is Cause.FAILED}

    def get(self, name: str, version: str | None = None) -> ServedModel:
        versions = self._versions.get(name)
        if versions is None:
            raise self._missing(name)
        if version is None:
            return next(reversed(versions.values()))
        model = versions.get(version)
        if model is not None:
            return model
        known = ", ".join(versions)
        if not is_integer_version(version) and all(is_integer_version(known) for known in versions):
            raise BadRequest(
                f"failed to get model version from specified version string {quoted(version)}; "
                f"model {quoted(name)} has versions {known}"
            )
        raise NotFound(
            f"Request for unknown model: {quoted(name)} version {quoted(version)} is not found; "
            f"its versions are {known}"
        )

    def _missing(self, name: str) -> NotFound | ModelNotReady:
        record = self._not_served.get(name)
        if record is not None and record.cause is Cause.FAILED:  # a fault of the server's: try again later
            return ModelNotReady(f"model {quoted(name)} failed to load; it is UNAVAILABLE: {record.reason}")
        if record is not None:  # Triton's words for a model with nothing to serve, then why
            why = f"it is {record.state}" + (f": {record.reason}" if record.reason else "")
            return NotFound(f"Request for unknown model: {quoted(name)} has no available versions; {why}")
        if self.loadable(name):
            return NotFound(f"Request for unknown model: {quoted(name)} has no available versions; it is not loaded")
        return NotFound(f"Request for unknown model: {quoted(name)} is not found; {self._listing()}")

    def _listing(self, most: int = 10) -> str:
        names = list(self._versions)
        if not names:
            return "this server has no models"
        more = f" and {len(names) - most} more" if len(names) > most else ""
        return f"the models are {', '.join(names[:most])}{more}"

    # Changing (the caller holds the name's lock)

    def loading(self, name: str) -> None:
        """`name`'s first load starts (a served name's reload changes nothing until it is put)."""
        if name not in self._versions:
            self._become(name, NotServed(Cause.LOADING))

    def put(self, name: str, versions: Sequence[ServedModel]) -> list[ServedModel]:
        """Serve `versions` (ordered) as `name`; the versions it served before, which are no longer looked up."""
        self._check(name, SERVING)
        previous = self._versions.get(name, {})
        self._versions[name] = {model.version: model for model in versions}
        self._not_served.pop(name, None)
        self.generation += 1
        return list(previous.values())

    def load_failed(self, name: str, reason: str) -> None:
        """`name`'s load failed; one that serves goes on serving as it was."""
        if name not in self._versions:
            self._become(name, NotServed(Cause.FAILED, reason))

    def unloading(self, name: str) -> list[ServedModel]:
        """Stop looking `name` up; the versions it served, which finish the requests they hold."""
        self._check(name, Cause.UNLOADING)
        previous = self._versions.pop(name, {})
        self._not_served[name] = NotServed(Cause.UNLOADING)
        self.generation += 1
        return list(previous.values())

    def pop(self, name: str) -> list[ServedModel]:
        """Stop looking `name` up and keep no record of it; the versions it served."""
        if name not in self._versions:
            raise IllegalTransition(f"model {name!r} cannot be popped: it serves nothing")
        previous = self._versions.pop(name, {})
        self.generation += 1
        return list(previous.values())

    def unloaded(self, name: str, reason: str = "unloaded") -> None:
        """`name` serves nothing now; `reason` where it was not asked to unload (an ensemble whose model is gone)."""
        self._become(name, NotServed(Cause.UNLOADED, reason))

    def forget(self, name: str) -> None:
        """No record of `name` any more (a repository's folder that is gone); nothing if it has none."""
        if name in self._versions:
            raise IllegalTransition(f"model {name!r} cannot be forgotten: it serves (unload it first)")
        if name in self._not_served:
            self._check(name, None)
            del self._not_served[name]

    def _become(self, name: str, record: NotServed) -> None:
        self._check(name, record.cause)
        self._not_served[name] = record

    def _check(self, name: str, becoming: Cause | str | None) -> None:
        now = SERVING if name in self._versions else (record.cause if (record := self._not_served.get(name)) else None)
        if becoming not in TRANSITIONS[now]:
            raise IllegalTransition(f"model {name!r} cannot go from {_named(now)} to {_named(becoming)}")


def _named(condition: Cause | str | None) -> str:
    return "unknown" if condition is None else condition.value if isinstance(condition, Cause) else condition
