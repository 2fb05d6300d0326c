"""MODULE:ATTR, a model file or a model repository to an app, or one line that says why not."""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._core.trace_settings import start_setting
from ..._declarations.model import Model
from ..._declarations.model_repository import ModelRepository
from ..._declarations.restricted import restrictions
from ..._declarations.spec import TensorSpec
from ..._rest.app import OIPApp


class TargetError(Exception):
    """The target cannot be served; the message is the one line the user sees."""


def is_model_file(target: str) -> bool:
    return os.path.isfile(target)


@dataclass(frozen=True)
class FileOptions:
    """What the command line declares of its model files."""

    trust_pickles: bool = False
    trust_skops_types: tuple[str, ...] = ()
    input_datatype: str | None = None


def load_target(
    target: str | Sequence[str] | None,
    *,
    metrics: bool = False,
    repository: ModelRepository | None = None,
    restricted_apis: list[str] | None = None,
    files: FileOptions = FileOptions(),
    strict_readiness: bool | None = None,
    max_body_size: int | None = None,
    tracing: Mapping[str, object] | None = None,
) -> OIPApp:
    """The app for MODULE:ATTR (a models mapping, a `Model` served under ATTR's name, or an `OIPApp`),
    for model files (each served under its stem), or for none (the `repository`'s models alone).

    `metrics` registers the models' Prometheus metrics, unless ATTR is an app: it chose when built.
    `repository` joins the models of a mapping, a `Model` or the files. `restricted_apis` are
    --http-restricted-api's rules, checked already. `strict_readiness`, where given, is the app's (an
    `OIPApp` too: the command line's choice of what readiness means for the server it runs), and so are
    `max_body_size` (--http-max-input-size: the largest request body, its JSON too) and `tracing`'s settings
    (--trace-config's, checked already), where given.
    """
    app = _target_app(target, metrics, repository, files)
    if strict_readiness is not None:
        app.core.strict_readiness = strict_readiness
    if max_body_size is not None:
        app.core.max_body_size = app.max_json_size = max_body_size
    if tracing is not None:
        app.core.traces.reset(start_setting(tracing))
        app.core.respond.follow()
    if restricted_apis:
        if app.restrictions:
            raise TargetError(f"{target} is an OIPApp with restricted APIs of its own: give them there, or here")
        app.restrictions = restrictions(restricted_apis)
    return app


def _target_app(
    target: str | Sequence[str] | None, metrics: bool, repository: ModelRepository | None, files: FileOptions
) -> OIPApp:
    targets = [target] if isinstance(target, str) else list(target or ())
    if all(map(is_model_file, targets)):
        return _app(" ".join(targets) or "--model-repository", file_models(targets, files), metrics, repository)
    if len(targets) > 1:
        raise TargetError(f"serve one MODULE:ATTR, or model files: {' '.join(targets)} mixes them")
    (target,) = targets
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
            from ..._core.control import LOAD_SWITCH_INTERVAL  # imported with the control it sets: a repository's

            value.core.control.load_switch_interval = LOAD_SWITCH_INTERVAL
        value.core.freeze_heap = True  # and the loaded heap may leave the garbage collector's full passes
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


def file_models(paths: Sequence[str], options: FileOptions) -> dict[str, Model]:
    """The models of `paths`, each under its stem, as the command line declares them."""
    # The model files' modules are imported for files only: a server of MODULE:ATTR starts without them.
    from ..._declarations.files.formats import FORMATS, tabular

    trusting = options.trust_pickles or options.trust_skops_types
    formats = {path: _format(path) for path in paths}
    if trusting and "sklearn" not in formats.values():
        raise TargetError("--trust-pickles and --trust-skops-types are for scikit-learn files (joblib, pickle, skops)")
    if options.input_datatype is not None and not any(FORMATS[format].tabular for format in formats.values()):
        raise TargetError(
            f"--input-datatype re-declares a tabular file's inputs ({', '.join(entry.title for entry in tabular())}); "
            "other files take the datatypes they declare"
        )
    models: dict[str, Model] = {}
    for path, format in formats.items():
        model = _file_model(path, format, options)
        if model.name in models:
            raise TargetError(f"two model files would be served as {model.name!r}: rename one")
        models[model.name] = model
    return models


def _format(path: str) -> str:
    from ..._declarations.files import detect_format
    from ..._declarations.files._common import AdvisedError

    try:
        return detect_format(Path(path))
    except AdvisedError as exc:
        raise TargetError(exc.for_origin("command line")) from None
    except (OSError, ValueError) as exc:
        raise TargetError(f"{path}: {exc}") from None


def _file_model(path: str, format: str, options: FileOptions) -> Model:
    from ..._declarations.files._common import AdvisedError
    from ..._declarations.files.formats import FORMATS
    from ..._declarations.files.labels import labels_beside

    own: dict[str, Any] = {}
    if format == "sklearn":
        # --trust-pickles trusts all a file holds, as a config's "trusted: true" does; else the skops types named.
        types = [name.strip() for names in options.trust_skops_types for name in names.split(",") if name.strip()]
        own["trusted"] = True if options.trust_pickles else types or False
    try:
        model = Model.from_file(path, format=format, **own)
        # A tabular format's models take a table of numbers, whatever their float type (the library converts it).
        if options.input_datatype is not None and FORMATS[format].tabular:
            model = _input_datatype(model, options.input_datatype)
        labels = labels_beside(Path(path), model.outputs or ())
        return model if labels is None else model.replace(labels=labels)
    except AdvisedError as exc:
        raise TargetError(exc.for_origin("command line")) from None
    except (ImportError, OSError, TypeError, ValueError) as exc:
        raise TargetError(f"{path}: {exc}") from None


def _input_datatype(model: Model, datatype: str) -> Model:
    inputs = [TensorSpec(spec.name, datatype, spec.shape, spec.optional) for spec in model.inputs or ()]
    return model.replace(inputs=inputs)


def _app(target: str, models: Mapping[str, Any], metrics: bool, repository: ModelRepository | None) -> OIPApp:
    interval: float | None = None  # the switch interval during loads: a repository's (its control, imported for it)
    if repository is not None:
        from ..._core.control import LOAD_SWITCH_INTERVAL as interval
    try:
        # The serve command owns its process: loads may shorten the GIL's switch interval (ModelControl),
        # and the loaded heap may leave the garbage collector's full passes (_core/heap.py).
        return OIPApp(
            models,
            metrics=metrics,
            model_repository=repository,
            load_switch_interval=interval,
            freeze_heap=True,
        )
    except (TypeError, ValueError) as exc:
        raise TargetError(f"{target}: {exc}") from None


def _described(exc: BaseException) -> str:
    """The exception's type and message, and the line of the user's code it came from."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError):  # its message names its file and line already
        return text
    import sysconfig  # for an error's message only

    libraries = tuple({sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")})
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not frame.filename.startswith("<")]
    theirs = [frame for frame in frames if not frame.filename.startswith(libraries)] or frames
    if theirs:  # the deepest frame outside the standard library and the installed packages
        text += f" ({theirs[-1].filename}, line {theirs[-1].lineno})"
    return text
