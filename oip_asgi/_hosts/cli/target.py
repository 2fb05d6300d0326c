"""MODULE:ATTR, a model file or a model repository to an app, or one line that says why not."""

from __future__ import annotations

import importlib
import os
import sysconfig
import traceback
from collections.abc import Mapping
from typing import Any

from ..._core.control import LOAD_SWITCH_INTERVAL
from ..._declarations.model import Model
from ..._declarations.repository.declaration import ModelRepository
from ..._declarations.restricted import restrictions
from ..._rest.app import OIPApp


class TargetError(Exception):
    """The target cannot be served; the message is the one line the user sees."""


def is_model_file(target: str) -> bool:
    return os.path.isfile(target)


def load_target(
    target: str | None,
    *,
    metrics: bool = False,
    repository: ModelRepository | None = None,
    restricted_apis: list[str] | None = None,
) -> OIPApp:
    """The app for MODULE:ATTR (a models mapping, a `Model` served under ATTR's name, or an `OIPApp`),
    for a model file (served under its stem), or for none (the `repository`'s models alone).

    `metrics` registers the models' Prometheus metrics, unless ATTR is an app: it chose when built.
    `repository` joins the models of a mapping, a `Model` or a file. `restricted_apis` are
    --http-restricted-api's rules, checked already.
    """
    app = _target_app(target, metrics, repository)
    if restricted_apis:
        if app.restrictions:
            raise TargetError(f"{target} is an OIPApp with restricted APIs of its own: give them there, or here")
        app.restrictions = restrictions(restricted_apis)
    return app


def _target_app(target: str | None, metrics: bool, repository: ModelRepository | None) -> OIPApp:
    if target is None or is_model_file(target):
        models: dict[str, Any] = {}
        if target is not None:
            try:
                model = Model.from_file(target)
            except (ImportError, OSError, TypeError, ValueError) as exc:
                raise TargetError(f"{target}: {exc}") from None
            models[model.name] = model
        return _app(target or "--model-repository", models, metrics, repository)
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise TargetError(f"{target!r} is not MODULE:ATTR (for example mymodels:models)")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise TargetError(
                f"no module named {exc.name!r} (run from the directory that holds it, or name it with --app-dir)"
            ) from None
        raise TargetError(f"importing {module_name} failed: {_described(exc)}") from None
    except Exception as exc:
        raise TargetError(f"importing {module_name} failed: {_described(exc)}") from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise TargetError(f"module {module_name} has no attribute {attribute!r}") from None
    if isinstance(value, OIPApp):
        if repository is not None:
            raise TargetError(
                f"{target} is an OIPApp already built: give it its repository there "
                "(oip_app(models, model_repository=...)), or serve a models mapping with --model-repository"
            )
        if value.core.control is not None:  # the serve command owns its process: loads may shorten the interval
            value.core.control.load_switch_interval = LOAD_SWITCH_INTERVAL
        return value
    if isinstance(value, Model):
        return _app(target, {attribute.rsplit(".", 1)[-1]: value}, metrics, repository)
    if isinstance(value, Mapping):
        return _app(target, value, metrics, repository)
    kind = "a function" if callable(value) else f"a {type(value).__name__}"
    raise TargetError(
        f"{target} is {kind}, not a models mapping, a Model or an OIPApp"
        + (" (wrap a bare callable: Model(function))" if callable(value) else "")
    )


def _app(target: str, models: Mapping[str, Any], metrics: bool, repository: ModelRepository | None) -> OIPApp:
    try:
        # The serve command owns its process: loads may shorten the GIL's switch interval (ModelControl).
        return OIPApp(models, metrics=metrics, model_repository=repository, load_switch_interval=LOAD_SWITCH_INTERVAL)
    except (TypeError, ValueError) as exc:
        raise TargetError(f"{target}: {exc}") from None


def _described(exc: BaseException) -> str:
    """The exception's type and message, and the line of the user's code it came from."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError):  # its message names its file and line already
        return text
    libraries = tuple({sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")})
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not frame.filename.startswith("<")]
    theirs = [frame for frame in frames if not frame.filename.startswith(libraries)] or frames
    if theirs:  # the deepest frame outside the standard library and the installed packages
        text += f" ({theirs[-1].filename}, line {theirs[-1].lineno})"
    return text
