"""The served models by name and version; models and versions can come and go while serving.

The unversioned name means the newest version: integer versions order numerically (as Triton's do)
and after any named ones. Lookups answer in Triton's words first, since its clients read them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._declarations.errors import BadRequest, NotFound, quoted
from .._declarations.triton import is_integer_version
from .serving import ServedModel


class ServedModels:
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
        if not is_integer_version(version) and all(is_integer_version(known) for known in versions):
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
