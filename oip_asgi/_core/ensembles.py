"""A model repository's ensembles as Triton's dependency graph: the models each names, the order a batch of
loads takes, the cycles between ensembles, and who depends on a model that changed.

Triton loads an ensemble after its composing models, loads those of the repository with it in explicit
mode (by their names in its steps), refuses ensembles that name one another in a circle, plans an
ensemble again whenever one of its models is loaded or unloaded, and, asked to unload an ensemble with
``unload_dependents``, unloads the models that were only loaded along with it. The model control does
the loads and unloads; here is what decides them, with no I/O but the reader it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from .._declarations.repository import Ensemble

# The models an ensemble of the repository names (None: not an ensemble), as read from its config.
Reader = Callable[[str], "tuple[str, ...] | None"]


@dataclass
class Batch:
    """A batch of loads in order: each level after the one before (models, then ensembles by how deep they nest),
    and the ensembles refused, with why."""

    levels: list[list[str]]
    refused: dict[str, str]
    ensembles: dict[str, tuple[str, ...]]  # the ensembles of the batch and the models each names


@dataclass
class EnsembleGraph:
    """The ensembles to serve and the models each names, and the models loaded on their own."""

    named: dict[str, tuple[str, ...]] = field(default_factory=dict)  # loaded (or tried), and not unloaded since
    explicit: set[str] = field(default_factory=set)  # loaded on their own, not only along with an ensemble

    def read(self, name: str, ensemble: Ensemble | None) -> None:
        """`name` was read: an ensemble naming its models, or (no more) an ensemble."""
        if ensemble is not None:
            self.named[name] = ensemble.models
        else:
            self.named.pop(name, None)

    def dependents(self, changed: AbstractSet[str]) -> list[str]:
        """The ensembles that name a model of `changed`, not of `changed` themselves."""
        return [name for name, models in self.named.items() if name not in changed and not changed.isdisjoint(models)]

    def only_along(self, model: str) -> bool:
        """`model` was loaded only along with ensembles, none of which names it now (``unload_dependents``)."""
        return model not in self.explicit and not any(model in models for models in self.named.values())


def batch(names: Iterable[str], read: Reader, along: Callable[[str], bool] | None = None) -> Batch:
    """`names` in the order they load; with `along`, the models their ensembles name that `along` says to load
    with them (those of the repository not served yet), each ensemble after the ensembles it names."""
    graph: dict[str, tuple[str, ...] | None] = {}

    def named(name: str) -> tuple[str, ...] | None:
        if name not in graph:
            graph[name] = read(name)
        return graph[name]

    chosen = list(dict.fromkeys(names))
    if along is not None:
        for name in chosen:  # (grows as it goes: the models of the ensembles found along)
            chosen.extend(model for model in named(name) or () if model not in chosen and along(model))
    refused = {}
    for name in chosen:
        cycle = _cycle(name, named) if named(name) is not None else None
        if cycle is not None:
            refused[name] = f"circular dependency between ensembles: {' -> '.join(cycle)}"
    depths: dict[str, int] = {}
    members = set(chosen) - set(refused)

    def depth(name: str) -> int:
        if name not in depths:
            inner = [depth(model) for model in named(name) or () if model in members]
            depths[name] = 0 if named(name) is None else 1 + max(inner, default=0)
        return depths[name]

    levels: list[list[str]] = []
    for name in chosen:
        if name in members:
            level = depth(name)
            levels.extend([] for _ in range(level + 1 - len(levels)))
            levels[level].append(name)
    ensembles = {name: models for name in chosen if (models := named(name)) is not None}
    return Batch([level for level in levels if level], refused, ensembles)


def _cycle(start: str, named: Reader) -> list[str] | None:
    """A path of ensembles from `start` back to itself, each naming the next; None if there is none."""
    stack, seen = [(start, [start])], {start}
    while stack:
        name, path = stack.pop()
        for model in named(name) or ():
            if model == start:
                return [*path, start]
            if model not in seen and named(model) is not None:
                seen.add(model)
                stack.append((model, [*path, model]))
    return None
