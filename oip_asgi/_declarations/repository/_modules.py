"""The modules of a repository's model.py files in `sys.modules`, for as long as their versions serve.

A version's model.py runs as the module ``oip_asgi_repository.<name>.<version>`` (so that pickling and
dataclasses find what it defines by name); while it stays in `sys.modules` its globals (weights, say)
stay in memory. So it leaves once its version stops serving, or when its load fails.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping

Modules = Mapping[str, types.ModuleType]


def module_name(model: str, version: str) -> str:
    return f"oip_asgi_repository.{model}.{version}"


def release(modules: Modules) -> None:
    """Take `modules` out of `sys.modules`, each unless a newer read of its version has replaced it there."""
    for name, module in modules.items():
        if sys.modules.get(name) is module:
            del sys.modules[name]


def register(modules: Modules) -> None:
    """Put `modules` (the versions that serve) back, where a read that failed replaced them."""
    sys.modules.update(modules)
