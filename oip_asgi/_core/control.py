"""A model repository directory served by the core, as Triton serves one: the models in it, which are
loaded, and loading, unloading and reloading them while the server serves (the repository extension).

Model-control modes, with Triton's names: ``none`` loads every model at start and refuses load and
unload; ``explicit`` loads the models named at start (``*`` for all) and then what the API asks;
``poll`` loads every model and then watches the directory, loading a model added, reloading one
whose files changed and unloading one removed. A load reads the model's folder and loads its
versions off the event loop; the versions served before go on serving until the new ones are ready
(`ServerCore.put_model`). A failed load leaves the model as it was, its reason in the index.

What each model's state is lives with the served models (`ServedModels`: the versions served, or why
none is); here are the directory's listing, what was last read of each model, and the modules of the
model.py files that serve. A folder named as a model the app serves from code is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread

from .._declarations.errors import BadRequest, OIPError, quoted
from .._declarations.model import Model
from .._declarations.model_repository import ModelRepository
from .._declarations.repository import (
    Modules,
    PathError,
    RepositoryError,
    composing_models,
    fingerprint,
    model_names,
    read_model,
    register,
    release,
)
from . import life
from .ensemble import EnsembleCore, served_versions
from .ensembles import EnsembleGraph, batch
from .python_host import TritonHost
from .served import Cause, ServedModels


class ModelHost(EnsembleCore, Protocol):
    """What the control asks of the core: serve a model's versions in place of what it served, stop serving
    one, the versions served now and why a name serves nothing, and the names served from code; and what
    an ensemble's steps use of it (its models' configs and its inference path)."""

    served: ServedModels

    @property
    def code_models(self) -> Collection[str]: ...

    async def put_model(
        self, name: str, entry: Sequence[Model], *, config: dict[str, Any] | None = None, since: float | None = None
    ) -> None: ...

    async def remove_model(self, name: str, *, record: bool = False) -> None: ...


logger = logging.getLogger("oip_asgi")


class NotAllowed(OIPError, status_code=503):
    """A load or unload in a mode that does not take them (Triton answers UNAVAILABLE)."""


class ModelControl:
    """The models of a `ModelRepository`, served by `core`.

    `load_switch_interval` (seconds), where given, is the GIL's switch interval while loads run
    (`sys.setswitchinterval`, for the whole process: only a server that owns its process sets it).
    """

    def __init__(
        self,
        core: ModelHost,
        repository: ModelRepository | str | os.PathLike[str],
        *,
        load_switch_interval: float | None = None,
        python_host: TritonHost | None = None,
    ) -> None:
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
        self.load_switch_interval = load_switch_interval
        self.python_host = python_host  # what Triton Python models' BLS, model control and metrics reach
        self._names: set[str] = set()  # the directory's models, as last listed
        self._read_as: dict[str, object] = {}  # each model's files as last read (poll mode compares them)
        self._modules: dict[str, Modules] = {}  # the model.py modules of the versions that serve
        self._started: asyncio.Task[None] | None = None
        self._polling: asyncio.Task[None] | None = None
        self.ensembles = EnsembleGraph()  # Triton's dependency graph: the ensembles and the models they name
        core.served.loadable = self._loadable

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
        """Started, and no model of the directory failed to load (as a server whose models all loaded)."""
        return self.has_started and not self.core.served.failed()

    def _list(self) -> list[str]:
        names: list[str] = model_names(self.root)
        self._names = set(names)
        return names

    def _loadable(self, name: str) -> bool:
        return name in self._names and name not in self.core.code_models

    def _ours(self, name: str) -> bool:
        """`name` is served from the directory (not from code)."""
        return name in self.core.served and name not in self.core.code_models

    async def _start(self) -> None:
        names = self._list()
        chosen = self.mode == "explicit" and "*" not in self.load_models
        if chosen:
            unknown = [name for name in self.load_models if name not in names]
            for name in unknown:
                async with self.core.served.locks.hold(name):
                    self.core.served.load_failed(name, _not_in_repository(name, self.root))
                logger.error("failed to load %s: %s", quoted(name), _not_in_repository(name, self.root))
            names = [name for name in self.load_models if name in names]
        self.ensembles.explicit.update(names)
        await self._load_batch(names, along=chosen)  # every model: an ensemble's are among them
        if self.mode == "poll":
            self._polling = asyncio.get_running_loop().create_task(self._poll())

    def stop(self) -> None:
        """Stop loading and polling; a later `start` starts again."""
        for task in (self._started, self._polling):
            if task is not None:
                task.cancel()
        self._started = self._polling = None

    # The repository extension

    def index(self, *, ready: bool = False) -> list[dict[str, str]]:
        """Triton's repository index: every model of the directory, a row per version served."""
        served = self.core.served
        rows: list[dict[str, str]] = []
        listed = self._list()
        ours = [name for name in served.names() if name not in self.core.code_models]
        for name in sorted({*listed, *ours, *served.unserved()}):
            record = served.not_served(name)
            if name in self.core.code_models:  # a folder refused: the name serves from code
                rows.append({"name": name, "state": "UNAVAILABLE", "reason": self._clash(name)})
            elif name in served:
                for version in served.versions(name):
                    model = served.get(name, version)
                    rows.append({"name": name, "version": version, "state": model.state, "reason": model.reason})
            elif record is not None:
                rows.append({"name": name, "state": record.state, "reason": record.reason})
            else:
                rows.append({"name": name})  # never loaded: Triton gives the name alone
        if ready:
            rows = [row for row in rows if row.get("state") == "READY"]
        return rows

    async def load(
        self, name: str, *, config: Mapping[str, Any] | None = None, files: Mapping[str, bytes] | None = None
    ) -> None:
        """Load (or reload) `name` from the directory, with Triton's load request's config and file overrides;
        an ensemble's models of the directory that are not served (or changed since) load first, with it."""
        self._allowed("load")
        await self._load_batch([name], along=True, requested=(name, config, files))
        self.ensembles.explicit.add(name)

    async def unload(self, name: str, *, unload_dependents: bool = False) -> None:
        """Stop serving `name`: requests in flight finish, new ones are told it is unknown. The ensembles that
        name it stop serving too; `unload_dependents` also unloads the models only loaded along with it."""
        self._allowed("unload")
        if name in self.core.code_models:
            raise BadRequest(f"failed to unload {quoted(name)}: {self._clash(name, found=False)}")
        named = self.ensembles.named.pop(name, ())
        self.ensembles.explicit.discard(name)
        await self._unload(name)
        changed = {name}
        while unload_dependents and named:  # Triton's cascade: the models nothing else loaded them for
            along = [model for model in named if self._ours(model) and self.ensembles.only_along(model)]
            named = tuple(inner for model in along for inner in self.ensembles.named.pop(model, ()))
            for model in along:
                await self._unload(model)
            changed.update(along)
        await self._follow(changed)

    def _allowed(self, action: str) -> None:
        if self.mode != "explicit":
            # Triton's words (its clients read them), then ours.
            raise NotAllowed(
                "explicit model load / unload is not allowed if polling is enabled; this server's model control "
                f"mode is {self.mode!r}, and {action} takes the 'explicit' mode"
            )

    def _clash(self, name: str, *, found: bool = True) -> str:
        where = f"also found in the model repository {str(self.root)!r}" if found else "not from the model repository"
        return (
            f"model {quoted(name)} is served from code (the models given to oip_app, or the serve command's "
            f"target) and {where}; the model from code goes on serving: rename the folder or the model"
        )

    async def _load_batch(
        self,
        names: Sequence[str],
        *,
        along: bool,
        requested: tuple[str, Mapping[str, Any] | None, Mapping[str, bytes] | None] | None = None,
    ) -> None:
        """Load `names`, the models first (in parallel), each ensemble after the ensembles it names; with `along`,
        the models of the directory an ensemble names that are not served yet, or changed since read, too. Then
        the ensembles that name what loaded are planned again. Failures are logged, but the `requested` load's
        (its name, config and files), which raises."""
        name, config, _ = requested or ("", None, None)

        def named(model: str) -> tuple[str, ...] | None:
            return composing_models(self.root, model, config if model == name and config is not None else None)

        self._list()  # (what `_along` finds in the directory)
        planned = batch(names, named, self._along if along else None)
        self.ensembles.named.update(planned.ensembles)
        for refused, reason in planned.refused.items():
            async with self.core.served.locks.hold(refused):
                self.core.served.loading(refused)
                self.core.served.load_failed(refused, reason)
            if refused == name:
                raise BadRequest(f"failed to load {quoted(name)}: {reason}")
            logger.error("failed to load %s: %s", quoted(refused), reason)
        loaded: set[str] = set()
        try:
            for level in planned.levels:
                async with anyio.create_task_group() as group:
                    for model in level:
                        if model != name:
                            group.start_soon(self._load_logged, model)
                if name in level and requested is not None:
                    await self._load(name, config=requested[1], files=requested[2])
                loaded.update(level)
        finally:
            await self._follow(loaded)

    def _along(self, model: str) -> bool:
        """Whether an ensemble's `model` loads with it: one of the directory, not served yet or changed since read."""
        if model in self.core.code_models or model not in self._names:
            return False
        return model not in self.core.served or self._read_as.get(model) != fingerprint(self.root, model)

    async def _follow(self, changed: set[str]) -> None:
        """Plan again the ensembles that name a model of `changed` (and those that name them, in turn)."""
        done = set(changed)
        waiting = self.ensembles.dependents(done)
        while waiting:
            name = waiting.pop(0)
            if name not in done:
                done.add(name)
                await self._replan(name)
                waiting.extend(self.ensembles.dependents({name}))

    async def _replan(self, name: str) -> None:
        """An ensemble whose model changed, read and planned again: served anew, or, where it can no longer serve,
        unloaded with the reason (as Triton unloads it; a load that had failed stays failed)."""
        served = self.core.served
        async with served.locks.hold(name):
            if name not in self.ensembles.named:
                return  # unloaded meanwhile
            before = served.not_served(name)
            try:
                await self._read_and_put(name, None, None)
            except BadRequest as exc:
                reason = exc.message.removeprefix(f"failed to load {quoted(name)}: ")
                logger.error("ensemble %s can no longer serve: %s", quoted(name), reason)
                if name in served:
                    await self.core.remove_model(name, record=True)
                if before is None or before.cause is not Cause.FAILED:
                    served.unloaded(name, reason)

    async def _load(
        self, name: str, *, config: Mapping[str, Any] | None = None, files: Mapping[str, bytes] | None = None
    ) -> None:
        # One model's load (its read, then its put) and unload never interleave.
        async with self.core.served.locks.hold(name):
            await self._read_and_put(name, config, files)

    async def _read_and_put(
        self, name: str, config: Mapping[str, Any] | None, files: Mapping[str, bytes] | None
    ) -> None:
        served = self.core.served
        if not self._ours(name) and name not in self._list():
            # Nothing to record in the index: no such model (or a name that would leave the repository).
            raise BadRequest(f"failed to load {quoted(name)}: {_not_in_repository(name, self.root)}")
        self._read_as[name] = fingerprint(self.root, name)  # before reading: a change during it shows
        if name in self.core.code_models:
            raise BadRequest(f"failed to load {quoted(name)}: {self._clash(name)}")
        if files and not self.allow_file_overrides:
            raise _files_refused(
                name, "file overrides are off: the app must enable them (ModelRepository(allow_file_overrides=True))"
            )
        since = life.clock()  # the load's time in the log counts reading the folder
        served.loading(name)
        host = self.python_host
        if host is not None:
            host.bind(asyncio.get_running_loop())
        try:
            with self._loading():
                directory = await anyio.to_thread.run_sync(
                    lambda: read_model(
                        self.root, name, config=config, files=files, allow_files=self.allow_file_overrides, host=host
                    )
                )
                if directory.warnings:
                    logger.warning("model %s: %s", quoted(name), "; ".join(directory.warnings))
                self.ensembles.read(name, directory.ensemble)
                versions, served_config = served_versions(directory, self.core)
                try:
                    await self.core.put_model(name, versions, config=served_config, since=since)
                except BaseException:
                    release(directory.modules)
                    raise
        except (RepositoryError, OIPError) as exc:
            register(self._modules.get(name, {}))  # the versions that serve keep their modules
            reason = exc.message if isinstance(exc, OIPError) else str(exc)
            served.load_failed(name, reason)  # one that served before goes on serving as it was
            if files and isinstance(exc.__cause__, PathError):
                raise _files_refused(name, reason) from None
            # Triton's words first: its model-control examples read them.
            raise BadRequest(f"failed to load {quoted(name)}: {reason}") from None
        replaced = self._modules.get(name)
        self._modules[name] = directory.modules
        if replaced:  # the versions replaced have stopped serving
            release(replaced)
            del replaced
            await _collect()

    async def _load_logged(self, name: str) -> None:
        try:
            await self._load(name)
        except BadRequest as exc:
            logger.error("%s", exc.message)

    async def _unload(self, name: str) -> None:
        async with self.core.served.locks.hold(name):
            served = self.core.served
            if name not in served:
                if served.not_served(name) is None:
                    served.unloaded(name)
                return  # as Triton: unloading a model that is not loaded succeeds
            await self.core.remove_model(name, record=True)
            if self._modules.get(name):
                release(self._modules.pop(name))
                await _collect()

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
        served = self.core.served
        removed = sorted({*(name for name in served.names() if self._ours(name)), *served.unserved()} - present)
        async with anyio.create_task_group() as group:
            for name in removed:
                group.start_soon(self._forget, name)
        self.ensembles.explicit.update(changed)
        await self._load_batch(changed, along=False)
        await self._follow(set(removed))

    async def _forget(self, name: str) -> None:
        """A folder gone from the directory: unloaded, and gone from the index."""
        async with self.core.served.locks.hold(name):
            await self._unload(name)
            self.core.served.forget(name)
            self._read_as.pop(name, None)
            self.ensembles.named.pop(name, None)

    @contextlib.contextmanager
    def _loading(self) -> Iterator[None]:
        if self.load_switch_interval is None:
            yield
            return
        with _switch_interval(self.load_switch_interval):
            yield


# A load that computes in Python (a model.py, a library's Python set-up) holds the GIL against the
# event loop for the switch interval, 5 ms by default, at a time: every request of every other model
# would wait that long. The serve command, which owns its process, gives the loop the GIL back every
# LOAD_SWITCH_INTERVAL while loads run; an app mounted in another's process leaves the interval alone.
LOAD_SWITCH_INTERVAL = 0.0005
_loads_running = 0
_interval_before = sys.getswitchinterval()


@contextlib.contextmanager
def _switch_interval(interval: float) -> Iterator[None]:
    global _loads_running, _interval_before
    if not _loads_running:
        _interval_before = sys.getswitchinterval()
        sys.setswitchinterval(min(_interval_before, interval))
    _loads_running += 1
    try:
        yield
    finally:
        _loads_running -= 1
        if not _loads_running:
            sys.setswitchinterval(_interval_before)


async def _collect() -> None:
    """Free what only released modules kept alive, once the event loop has let go of them too.

    A module and its functions refer to each other: only the cyclic collector frees its globals (a
    model's weights), and on its own it may not run for a long while. Loads and unloads are rare.
    """
    await asyncio.sleep(0)
    gc.collect()


def _files_refused(name: str, reason: str) -> OIPError:
    # Triton's answer to file overrides it cannot write, INTERNAL with these words: its own model-control
    # example checks both (INVALID_ARGUMENT would say it better; the clients decide).
    return OIPError(f"failed to load {quoted(name)}: failed to poll from model repository: {reason}")


def _not_in_repository(name: str, root: Path) -> str:
    return f"no model folder {quoted(name)} in the model repository {str(root)!r}"
