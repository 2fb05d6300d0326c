"""The import-linter contracts (pyproject.toml) name every module of the package, each in one layer:
a new module outside them would be checked by none (`lint-imports` itself runs in the test command)."""

from __future__ import annotations

import pkgutil
import sys
from pathlib import Path
from typing import Any

import oip_asgi

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONTRACTS: list[dict[str, Any]] = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["tool"][
    "importlinter"
]["contracts"]


def contract(name: str) -> dict[str, Any]:
    return next(item for item in CONTRACTS if item["name"] == name)


def test_every_private_module_is_in_exactly_one_layer() -> None:
    private = {f"oip_asgi.{module.name}" for module in pkgutil.iter_modules(oip_asgi.__path__)} - {
        "oip_asgi.grpc",
        "oip_asgi.integration",
        "oip_asgi.__main__",
    }
    layers = {
        "declarations": set(contract("The declarations import neither the core nor a wire")["source_modules"]),
        "core": set(contract("The core imports no wire")["source_modules"]),
        "REST": set(contract("REST never imports gRPC")["source_modules"]),
        "hosts": {"oip_asgi._cli", "oip_asgi._mount"},
    }
    placed = [module for members in layers.values() for module in members]
    assert sorted(placed) == sorted(set(placed)), "a module in two layers"
    assert set(placed) == private - {"oip_asgi._version"}
    # The adapters may import none of them.
    adapters = contract("The adapters use only the public API (oip_asgi and oip_asgi.integration)")
    assert set(adapters["forbidden_modules"]) == private - {"oip_asgi._version"}
