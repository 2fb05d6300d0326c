"""A model repository directory served by the core, as Triton serves one: the models in it, which are
loaded, and loading, unloading and reloading them while the server serves (the repository extension).

Model-control modes, with Triton's names: ``none`` loads every model at start and refuses load and
unload; ``explicit`` loads the models named at start (``*`` for all) and then what the API asks;
``poll`` loads every model and then watches the directory, loading a model added, reloading one
whose files changed and unloading one removed. A load reads the model's folder and loads its
versions off the event loop; the versions served before go on serving until the new ones are ready
(`ServerCore.put_model`). A failed load leaves the model as it was, its reason in the index.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread

from .._declarations.errors import BadRequest, OIPError, quoted
from .._declarations.model import Model
from .._declarations.repository import PathError, RepositoryError, fingerprint, model_names, read_model
from .._declarations.repository.declaration import ModelRepository
from .served import ServedModels


class ModelHost(Protocol):
    """What the control asks of the core: serve a model's versions in place of what it served, stop serving
    one, and the versions served now."""

    served: ServedModels

    async def put_model(self, name: str, entry: Sequence[Model], *, config: dict[str, Any] | None = None) -> None: ...

    async def remove_model(self, name: str) -> None: ...


logger = logging.getLogger("oip_asgi")


class NotAllowed(OIPError, status_code=503):
    """A load or unload in a mode that does not take them (Triton answers UNAVAILABLE)."""


@dataclass
class _Unserved:
    """What the index says of a model of the directory that is not served: loading for the first time,
    failed to load, or unloaded."""

    state: str
    reason: str = ""


class ModelControl:
    """The models of a `ModelRepository`, served by `core`."""

    def __init__(self, core: ModelHost, repository: ModelRepository | str | os.PathLike[str]) -> None:
        if not isinstance(repository, ModelRepository):
            repository = ModelRepository(repository)
        mode = repository.model_control_mode
        self.core = core
        self.root = Path(repository.path)
        if not self.root.is_dir():
            raise ValueError(f"model repository {str(self.root)!r} is not a directory")
        self.mode = mode
        self.load_models = list(repository.load_models)
        self.poll_seconds = repository.repository_poll_secs
        self.allow_file_overrides = repository.allow_file_overrides
        self._unserved: dict[str, _Unserved] = {}
        self._names: set[str] = set()  # the directory's models, as last listed
        self._read_as: dict[str, object] = {}  # each model's files as last read (poll mode compares them)
        self._loaded: set[str] = set()  # the directory's models the core serves
        # One lock per model: a load (its read, then its put) and an unload of one model never interleave.
        self._changing: defaultdict[str, anyio.Lock] = defaultdict(anyio.Lock)
        self._started: asyncio.Task[None] | None = None
        self._polling: asyncio.Task[None] | None = None

    # Start and stop, from the app's lifespan (or the first request that needs the models)

    def start(self) -> None:
        """Load the models the mode starts with, in the background (readiness is false until they have)."""
        loop = asyncio.get_running_loop()
        if self._started is None or self._started.get_loop() is not loop:
            self._started = loop.create_task(self._start())

    async def started(self) -> None:
        self.start()
        assert self._started is not None
        await asyncio.shield(self._started)

    @property
    def has_started(self) -> bool:
        """Its start-up loads have run (they may have failed: their reasons are in the index)."""
        return self._started is not None and self._started.done()

    @property
    def ready(self) -> bool:
        """Started, and no model of the directory failing to load (as a server whose models all loaded)."""
        return self.has_started and all(
            (unserved.state, unserved.reason) == ("UNAVAILABLE", "unloaded") for unserved in self._unserved.values()
        )

    def _list(self) -> list[str]:
        names: list[str] = model_names(self.root)
        self._names = set(names)
        return names

    async def _start(self) -> None:
        names = self._list()
        if self.mode == "explicit" and "*" not in self.load_models:
            unknown = [name for name in self.load_models if name not in names]
            for name in unknown:
                self._unserved[name] = _Unserved("UNAVAILABLE", _not_in_repository(name, self.root))
                logger.error("failed to load %s: %s", quoted(name), _not_in_repository(name, self.root))
            names = [name for name in self.load_models if name in names]
        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(self._load_logged, name)
        if self.mode == "poll":
            self._polling = asyncio.get_running_loop().create_task(self._poll())

    def stop(self) -> None:
        for task in (self._started, self._polling):
            if task is not None:
                task.cancel()

    def describe(self, name: str) -> str | None:
        """Why a model of the directory is not served (for the 404 of a request to it), or None."""
        unserved = self._unserved.get(name)
        if unserved is None:
            return "it is not loaded" if name in self._names else None
        return f"it is {unserved.state}" + (f": {unserved.reason}" if unserved.reason else "")

    # The repository extension

    def index(self, *, ready: bool = False) -> list[dict[str, str]]:
        """Triton's repository index: every model of the directory, a row per version served."""
        rows: list[dict[str, str]] = []
        names = sorted({*self._list(), *self._loaded, *self._unserved})
        for name in names:
            if name in self._loaded and name in self.core.served:
                for version in self.core.served.versions(name):
                    model = self.core.served.get(name, version)
                    rows.append({"name": name, "version": version, "state": model.state, "reason": model.reason})
            elif name in self._unserved:
                unserved = self._unserved[name]
                rows.append({"name": name, "state": unserved.state, "reason": unserved.reason})
            else:
                rows.append({"name": name})  # never loaded: Triton gives the name alone
        if ready:
            rows = [row for row in rows if row.get("state") == "READY"]
        return rows

    async def load(
        self, name: str, *, config: Mapping[str, Any] | None = None, files: Mapping[str, bytes] | None = None
    ) -> None:
        """Load (or reload) `name` from the directory, with Triton's load request's config and file overrides."""
        self._allowed("load")
        await self._load(name, config=config, files=files)

    async def unload(self, name: str) -> None:
        """Stop serving `name`: requests in flight finish, new ones are told it is unknown."""
        self._allowed("unload")
        await self._unload(name)

    def _allowed(self, action: str) -> None:
        if self.mode != "explicit":
            # Triton's words (its clients read them), then ours.
            raise NotAllowed(
                "explicit model load / unload is not allowed if polling is enabled; this server's model control "
                f"mode is {self.mode!r}, and {action} takes the 'explicit' mode"
            )

    async def _load(
        self, name: str, *, config: Mapping[str, Any] | None = None, files: Mapping[str, bytes] | None = None
    ) -> None:
        async with self._changing[name]:
            await self._read_and_put(name, config, files)

    async def _read_and_put(
        self, name: str, config: Mapping[str, Any] | None, files: Mapping[str, bytes] | None
    ) -> None:
        if name not in self._loaded and name not in self._list():
            # Nothing to record in the index: no such model (or a name that would leave the repository).
            raise BadRequest(f"failed to load {quoted(name)}: {_not_in_repository(name, self.root)}")
        if files and not self.allow_file_overrides:
            raise _files_refused(
                name, "file overrides are off: the app must enable them (ModelRepository(allow_file_overrides=True))"
            )
        if name not in self._loaded:
            self._unserved[name] = _Unserved("LOADING")
        self._read_as[name] = fingerprint(self.root, name)  # before reading: a change during it shows
        try:
            with _loading():
                directory = await anyio.to_thread.run_sync(
                    lambda: read_model(
                        self.root, name, config=config, files=files, allow_files=self.allow_file_overrides
                    )
                )
                if directory.warnings:
                    logger.warning("model %s: %s", quoted(name), "; ".join(directory.warnings))
                await self.core.put_model(name, directory.versions, config=directory.config)
        except (RepositoryError, OIPError) as exc:
            reason = exc.message if isinstance(exc, OIPError) else str(exc)
            if name not in self._loaded:  # a model that served before goes on serving as it was
                self._unserved[name] = _Unserved("UNAVAILABLE", reason)
            if files and isinstance(exc.__cause__, PathError):
                raise _files_refused(name, reason) from exc
            # Triton's words first: its model-control examples read them.
            raise BadRequest(f"failed to load {quoted(name)}: {reason}") from exc
        self._loaded.add(name)
        self._unserved.pop(name, None)

    async def _load_logged(self, name: str) -> None:
        try:
            await self._load(name)
        except BadRequest as exc:
            logger.error("%s", exc.message)

    async def _unload(self, name: str) -> None:
        async with self._changing[name]:
            await self._remove(name)

    async def _remove(self, name: str) -> None:
        if name not in self._loaded:
            self._unserved.setdefault(name, _Unserved("UNAVAILABLE", "unloaded"))
            return  # as Triton: unloading a model that is not loaded succeeds
        self._loaded.discard(name)
        self._unserved[name] = _Unserved("UNLOADING")
        await self.core.remove_model(name)
        self._unserved[name] = _Unserved("UNAVAILABLE", "unloaded")

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self.poll_once()
            except Exception:  # a folder that could not be listed, say: the next poll tries again
                logger.exception("polling the model repository %r failed", str(self.root))

    async def poll_once(self) -> None:
        """Load what was added, reload what changed, unload what was removed (poll mode, every poll_seconds).

        A model is read again only once its files change: one that failed to load waits for a fix.
        """
        present = set(self._list())
        changed = [name for name in sorted(present) if self._read_as.get(name) != fingerprint(self.root, name)]
        removed = sorted((self._loaded | set(self._unserved)) - present)
        async with anyio.create_task_group() as group:
            for name in changed:
                group.start_soon(self._load_logged, name)
            for name in removed:
                group.start_soon(self._forget, name)

    async def _forget(self, name: str) -> None:
        """A folder gone from the directory: unloaded, and gone from the index."""
        await self._unload(name)
        self._unserved.pop(name, None)
        self._read_as.pop(name, None)


# A load that computes in Python (a model.py, a library's Python set-up) holds the GIL against the
# event loop for the switch interval, 5 ms by default, at a time: every request of every other model
# would wait that long. While loads run, the loop gets it back every LOAD_SWITCH_INTERVAL instead.
LOAD_SWITCH_INTERVAL = 0.0005
_loads_running = 0
_switch_interval = sys.getswitchinterval()


@contextlib.contextmanager
def _loading() -> Iterator[None]:
    global _loads_running, _switch_interval
    if not _loads_running:
        _switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(_switch_interval, LOAD_SWITCH_INTERVAL))
    _loads_running += 1
    try:
        yield
    finally:
        _loads_running -= 1
        if not _loads_running:
            sys.setswitchinterval(_switch_interval)


def _files_refused(name: str, reason: str) -> OIPError:
    # Triton's answer to file overrides it cannot write, INTERNAL with these words: its own model-control
    # example checks both (INVALID_ARGUMENT would say it better; the clients decide).
    return OIPError(f"failed to load {quoted(name)}: failed to poll from model repository: {reason}")


def _not_in_repository(name: str, root: Path) -> str:
    return f"no model folder {quoted(name)} in the model repository {str(root)!r}"
