"""The package's layout is its architecture: each package of oip_asgi is one layer of the import-linter
`layers` contract (pyproject.toml; `lint-imports` itself runs in the test command), nothing else sits in
the package root but the public API, and no modules import each other in a loop."""

from __future__ import annotations

import pkgutil
import sys
from pathlib import Path
from typing import Any

import grimp

import oip_asgi

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONTRACTS: list[dict[str, Any]] = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["tool"][
    "importlinter"
]["contracts"]

# The root keeps the public API (oip_asgi, oip_asgi.grpc, oip_asgi.integration) and the package's own files.
ROOT_FILES = {"oip_asgi.__main__", "oip_asgi._version"}


def layers() -> list[set[str]]:
    (contract,) = [item for item in CONTRACTS if item["type"] == "layers"]
    return [{member.strip() for member in layer.replace(":", "|").split("|")} for layer in contract["layers"]]


def test_every_module_of_the_root_is_a_layer_or_the_public_api() -> None:
    in_root = {f"oip_asgi.{module.name}" for module in pkgutil.iter_modules(oip_asgi.__path__)}
    placed = [member for layer in layers() for member in layer]
    assert len(placed) == len(set(placed)), "a package in two layers"
    assert in_root - ROOT_FILES == set(placed)


def test_the_adapters_may_import_no_layer_but_the_public_ones() -> None:
    (contract,) = [item for item in CONTRACTS if item["name"].startswith("The adapters use only the public API")]
    private = {member for layer in layers() for member in layer if member.rsplit(".", 1)[1].startswith("_")}
    assert set(contract["forbidden_modules"]) == private


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The sets of modules that import each other in a loop (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in stack:
                lowest[module] = min(lowest[module], index[imported])
        if lowest[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_modules_import_each_other_in_a_loop() -> None:
    """Imports inside functions count: a loop hidden in a function is a loop all the same."""
    graph = grimp.build_graph("oip_asgi", include_external_packages=False)
    assert import_cycles(graph) == []


def test_the_cycle_check_finds_a_loop() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.one", "a.two", "a.three"):
        graph.add_module(module)
    graph.add_import(importer="a.one", imported="a.two")
    graph.add_import(importer="a.two", imported="a.one")
    graph.add_import(importer="a.three", imported="a.one")
    assert import_cycles(graph) == [["a.one", "a.two"]]
