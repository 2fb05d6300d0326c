"""A model.py's imports of its neighbours, as Triton lets it make them, each model apart from the others.

Triton runs a model.py in an interpreter of its own, with its version folder and its model folder on
``sys.path`` (after the installed packages: an installed module wins over a file of its name) and the
file imported as part of a package: ``import model_common``, ``from file1 import x`` and
``from . import file2`` all find the files beside it. Here every model shares one interpreter, so:

- a version's model.py runs as the package ``oip_asgi_repository.<model>.<version>``, whose ``__path__``
  is those two folders: its relative imports find them;
- the top-level names its files import that name a file or folder there, and no installed module, are
  that package's submodules (``oip_asgi_repository.<model>.<version>.model_common``): each of its modules
  runs with builtins of its own, whose ``__import__`` maps them. Two models that each carry a
  ``model_common.py`` each get their own, and ``sys.modules`` holds no top-level ``model_common``;
- the modules loaded for a version are recorded with its model.py's (`read` of them), so they leave
  ``sys.modules`` when the version stops serving.

A helper is compiled from its source each time it is read, as model.py is: no ``__pycache__`` is
written into the repository. ``importlib.import_module("model_common")`` is not mapped (only the import
statement is): it finds what ``sys.path`` has.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._modules import ReadModules

_import: Callable[..., types.ModuleType] = builtins.__import__
# The imports a module of a model runs with, by module: how the finder knows the package it belongs to.
_owners: weakref.WeakKeyDictionary[types.ModuleType, ModelImports] = weakref.WeakKeyDictionary()


class ModelImports:
    """One read of one version: its package's name, the folders it imports from, the modules loaded for it."""

    def __init__(self, package: str, folders: Sequence[Path], modules: ReadModules) -> None:
        self.package = package
        self.folders = [str(folder) for folder in folders]
        # The read's modules, released with its versions; weakly, as the modules refer to this (their builtins).
        self._modules = weakref.ref(modules)
        self.builtins = {**builtins.__dict__, "__import__": self.import_}
        self._own: dict[str, bool] = {}  # by top-level name: whether it is one of the model's files

    def run(self, module: types.ModuleType, code: types.CodeType) -> None:
        """`code` as `module`'s, importing as a module of this model (its model.py, or one of its helpers)."""
        _owners[module] = self
        modules = self._modules()
        if modules is not None:
            modules[module.__name__] = module
        module.__dict__["__builtins__"] = self.builtins
        exec(code, module.__dict__)

    def package_module(self, file: Path) -> types.ModuleType:
        """The module model.py runs as: the package of its folders, which its relative imports look in."""
        # (sys.modules copied at once: other models' threads import meanwhile)
        for name in [name for name in list(sys.modules) if name.startswith(self.package + ".")]:
            del sys.modules[name]  # an earlier read's helpers: this read reads them afresh
        module = types.ModuleType(self.package)
        module.__file__ = str(file)
        module.__path__ = list(self.folders)
        module.__package__ = self.package
        return module

    def import_(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] = (),
        level: int = 0,
    ) -> types.ModuleType:
        """``__import__`` in the model's modules: a name of one of its files is the package's submodule."""
        if level == 0:
            top = name.partition(".")[0]
            own = self._own.get(top)
            if own is None:
                own = self._own[top] = self._is_own(top)
            if own:
                if fromlist:  # the module named, its names (or submodules) taken by the statement
                    return _import(f"{self.package}.{name}", globals, locals, fromlist, 0)
                importlib.import_module(f"{self.package}.{name}")  # `import a.b` binds `a`
                return sys.modules[f"{self.package}.{top}"]
        return _import(name, globals, locals, fromlist, level)

    def _is_own(self, top: str) -> bool:
        if not top.isidentifier() or top in sys.modules:
            return False
        if not any(_found(Path(folder), top) for folder in self.folders):
            return False
        return importlib.util.find_spec(top) is None  # an installed module of the name wins, as in Triton


def _found(folder: Path, name: str) -> bool:
    return (folder / f"{name}.py").is_file() or (folder / name).is_dir()


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the submodules of a model's package (its files), loaded as modules of that model."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        parent = sys.modules.get(fullname.rpartition(".")[0])
        imports = _owners.get(parent) if parent is not None else None
        if imports is None or path is None:
            return None
        leaf = fullname.rpartition(".")[2]
        loader = _Loader(imports)
        for folder in map(Path, path):
            if (folder / leaf / "__init__.py").is_file():
                init = folder / leaf / "__init__.py"
                return importlib.util.spec_from_file_location(
                    fullname, init, loader=loader, submodule_search_locations=[str(init.parent)]
                )
            if (folder / f"{leaf}.py").is_file():
                return importlib.util.spec_from_file_location(fullname, folder / f"{leaf}.py", loader=loader)
        folders = [str(Path(folder) / leaf) for folder in path if (Path(folder) / leaf).is_dir()]
        if not folders:
            return None
        spec = importlib.machinery.ModuleSpec(fullname, loader, is_package=True)  # a folder without __init__.py
        spec.submodule_search_locations = folders
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, imports: ModelImports) -> None:
        self.imports = imports

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        origin = module.__spec__.origin if module.__spec__ is not None else None
        source = Path(origin).read_bytes() if origin and module.__spec__ and module.__spec__.has_location else b""
        self.imports.run(module, compile(source, origin or module.__name__, "exec"))


def install(root: str) -> None:
    """The finder first in ``sys.meta_path`` (once): it answers only for the packages of models. And `root`,
    the package above them, in ``sys.modules``: Python's import machinery imports ``a`` after ``a.b.c``."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    if root not in sys.modules:
        package = types.ModuleType(root, "The packages of a model repository's model.py files (oip-asgi)")
        package.__path__ = []  # nothing is found below it but by the finder
        sys.modules[root] = package
