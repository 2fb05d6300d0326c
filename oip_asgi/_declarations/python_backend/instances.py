"""Triton's ``instance_group`` for a Python model: how many ``TritonPythonModel`` objects serve it, and their names.

Triton runs each instance of a Python model in its own stub process, one ``execute`` at a time, and
code written for it relies on that (an instance's state is not guarded for threads). Here each
instance is an object of the class in this process, executing one request (or batch) at a time.

- No ``instance_group``: one group ``<model>_0`` of kind ``KIND_CPU``, count 1, as Triton completes
  a Python model's config (its default count is 2 only for the TensorFlow and ONNX Runtime backends).
- A group without ``count`` has 1; without ``name``, ``<model>_<group index>``; ``KIND_AUTO`` is
  ``KIND_CPU`` (Triton picks GPU when it has one; this server has none).
- ``KIND_GPU``: there is no GPU here. Each instance Triton would start (``count`` per GPU listed, or
  ``count`` when none is listed) is served as a CPU instance, so as many ``execute`` calls run at
  once as in Triton; ``initialize`` is told ``model_instance_kind`` ``CPU`` (a model that picks its
  device from it runs on the CPU), and the server logs it once at load.
- ``KIND_MODEL``: the model places itself; its instances are told ``MODEL``.

An instance is named ``<group name>_<index within the group>``, as Triton names it. Each serves as an
`Instance`: the object, and the event loop its ``async def execute`` runs on (Triton's stub has one).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("oip_asgi")


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    """One instance as ``initialize`` is told of it."""

    name: str
    kind: str  # CPU or MODEL
    device_id: int


def completed_groups(config: Mapping[str, Any], model: str) -> list[dict[str, Any]]:
    """The config's instance groups with what Triton fills in: name, kind and count."""
    groups = config.get("instance_group") or [{}]
    completed = []
    for index, group in enumerate(groups):
        kind = group.get("kind") or "KIND_AUTO"
        filled = {
            **group,
            "name": group.get("name") or f"{model}_{index}",
            "kind": "KIND_CPU" if kind == "KIND_AUTO" else kind,
            "count": group.get("count") or 1,
        }
        completed.append(filled)
    return completed


def instance_specs(groups: list[dict[str, Any]], model: str) -> list[InstanceSpec]:
    """The instances `groups` (completed) ask for, each named as Triton names it."""
    specs: list[InstanceSpec] = []
    for group in groups:
        count = int(group["count"])
        if count < 1:
            raise ValueError(f"model {model!r}: instance group {group['name']!r} has count {count}; it needs 1 or more")
        kind = group["kind"]
        devices = 1
        if kind == "KIND_GPU":
            devices = max(1, len(group.get("gpus", [])))
            logger.warning(
                "model %r: instance group %r is KIND_GPU and this server has no GPU: its %d instance(s) run on the CPU",
                model,
                group["name"],
                count * devices,
            )
        told = "MODEL" if kind == "KIND_MODEL" else "CPU"
        for index in range(count):
            for _ in range(devices):
                specs.append(InstanceSpec(f"{group['name']}_{index}", told, 0))
    return specs


class Instance:
    """One object of the model's class, serving, and the event loop its coroutines run on.

    Triton's stub runs an ``async def execute`` on an event loop of its own, in its own process; here
    each instance has one (of the server's loop's kind), on a thread of its own, started at its first
    coroutine: a model's blocking call there (a sync BLS ``exec()``, iterating a decoupled BLS call) blocks
    that loop, never the server's.
    """

    def __init__(self, model: Any, name: str) -> None:
        self.object = model
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Run `coroutine` on the instance's loop, from any thread; its outcome in the future."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._running())

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = _new_loop()
                threading.Thread(target=_serve, args=(self._loop,), name=f"oip-asgi {self.name}", daemon=True).start()
            return self._loop

    def stop(self) -> None:
        """Stop its loop (Triton stops the stub's before ``finalize``); what still runs there is cancelled."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # closed already
                loop.call_soon_threadsafe(loop.stop)


def _new_loop() -> asyncio.AbstractEventLoop:
    """A loop of the kind the server runs on (uvloop's under ``oip-asgi serve``: a model's coroutines see the loop
    they would see on the server's, each response crossing back costs less), else asyncio's."""
    with contextlib.suppress(Exception):  # no running loop, or a kind that takes arguments
        return type(asyncio.get_running_loop())()
    return asyncio.new_event_loop()


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
