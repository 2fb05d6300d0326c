"""The modules of a repository's model.py files in `sys.modules`, for as long as their versions serve.

A version's model.py runs as the module ``oip_asgi_repository.<name>.<version>`` (so that pickling and
dataclasses find what it defines by name), and the helpers it imports from its folders as its submodules
(`_imports.py`); while they stay in `sys.modules` their globals (weights, say) stay in memory. So they
leave once their version stops serving, or when its load fails.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping

Modules = Mapping[str, types.ModuleType]
ROOT = "oip_asgi_repository"  # the package every model.py's module is below


class ReadModules(dict[str, types.ModuleType]):
    """The modules one read of a model folder put in `sys.modules` (a dict that can be referred to weakly)."""


def module_name(model: str, version: str) -> str:
    return f"{ROOT}.{model}.{version}"


def release(modules: Modules) -> None:
    """Take `modules` out of `sys.modules`, each unless a newer read of its version has replaced it there."""
    for name, module in list(modules.items()):  # (a helper a model's thread imports late may join meanwhile)
        if sys.modules.get(name) is module:
            del sys.modules[name]


def register(modules: Modules) -> None:
    """Put `modules` (the versions that serve) back, where a read that failed replaced them."""
    sys.modules.update(modules)
