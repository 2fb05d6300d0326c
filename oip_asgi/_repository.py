"""The served models by name and version; models and versions can come and go while serving.

The unversioned name means the newest version: integer versions order numerically (as Triton's do)
and after any named ones. Lookups answer in Triton's words first, since its clients read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._errors import BadRequest, NotFound, quoted
from ._models import Model, ModelsArgument
from ._serving import ServedModel


def _is_integer(version: str) -> bool:
    return version.isascii() and version.isdigit()  # isdigit alone takes "²", which int() refuses


def version_key(version: str) -> tuple[int, int, str]:
    return (1, int(version), "") if _is_integer(version) else (0, 0, version)


def declared_versions(name: Any, entry: Model | Callable[..., Any] | Sequence[Model]) -> list[Model]:
    """The versions of one entry of a models mapping (a `Model`, a bare callable or a list of versions), checked."""
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"model name {name!r} must be a non-empty string with no '/'")
    versions = list(entry) if isinstance(entry, Sequence) else [entry]
    if not versions:
        raise ValueError(f"model {name!r} has no versions")
    models = [version if isinstance(version, Model) else Model(version) for version in versions]
    seen: set[str] = set()
    for model in models:
        if model.version in seen:
            raise ValueError(f"model {name!r} lists version {model.version!r} twice")
        seen.add(model.version)
    return sorted(models, key=lambda model: version_key(model.version))


def checked_models(models: Any) -> ModelsArgument:
    if not isinstance(models, Mapping):
        raise TypeError(
            f"models must be a mapping of name to model, got {type(models).__name__}; "
            "write oip_app({'name': model, ...})"
        )
    return models


class Repository:
    """Served model versions by name; `put` and `pop` change them at once, between two requests."""

    def __init__(self) -> None:
        self._versions: dict[str, dict[str, ServedModel]] = {}
        self.generation = 0  # changes with every put or pop, for what is derived from the listing
        # Why a name that is not served is not (a model repository's model that is unloaded, or failed to load).
        self.describe_missing: Callable[[str], str | None] = lambda name: None

    def names(self) -> list[str]:
        return list(self._versions)

    def all(self) -> list[ServedModel]:
        return [model for versions in self._versions.values() for model in versions.values()]

    def versions(self, name: str) -> list[str]:
        return list(self._versions[name])

    def __contains__(self, name: str) -> bool:
        return name in self._versions

    def put(self, name: str, versions: Sequence[ServedModel]) -> list[ServedModel]:
        """Serve `versions` (ordered) as `name`; the versions it served before, which are no longer looked up."""
        previous = self._versions.get(name, {})
        self._versions[name] = {model.version: model for model in versions}
        self.generation += 1
        return list(previous.values())

    def pop(self, name: str) -> list[ServedModel]:
        """Stop looking `name` up; the versions it served."""
        previous = self._versions.pop(name, {})
        self.generation += 1
        return list(previous.values())

    def get(self, name: str, version: str | None = None) -> ServedModel:
        versions = self._versions.get(name)
        if versions is None:
            why = self.describe_missing(name)
            if why is not None:  # Triton's words for a model with nothing to serve, then why
                raise NotFound(f"Request for unknown model: {quoted(name)} has no available versions; {why}")
            raise NotFound(f"Request for unknown model: {quoted(name)} is not found; {self._listing()}")
        if version is None:
            return next(reversed(versions.values()))
        model = versions.get(version)
        if model is not None:
            return model
        known = ", ".join(versions)
        if not _is_integer(version) and all(_is_integer(known) for known in versions):
            raise BadRequest(
                f"failed to get model version from specified version string {quoted(version)}; "
                f"model {quoted(name)} has versions {known}"
            )
        raise NotFound(
            f"Request for unknown model: {quoted(name)} version {quoted(version)} is not found; "
            f"its versions are {known}"
        )

    def _listing(self, most: int = 10) -> str:
        names = list(self._versions)
        if not names:
            return "this server has no models"
        more = f" and {len(names) - most} more" if len(names) > most else ""
        return f"the models are {', '.join(names[:most])}{more}"
