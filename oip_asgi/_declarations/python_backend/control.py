"""``pb_utils.load_model``, ``unload_model`` and ``is_model_ready``: model control from a model, on its own server."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import OIPError
from .errors import TritonModelException
from .host import current


def load_model(model_name: str, config: str = "", files: Mapping[str, bytes] | None = None) -> None:
    """Load (or reload) a model of this server's repository, as its repository extension does (explicit mode)."""
    host = current("pb_utils.load_model")
    try:
        host.load_model(model_name, config, files)
    except Exception as exc:  # as Triton: the model sees a TritonModelException with the reason
        raise TritonModelException(_reason(exc)) from exc


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    host = current("pb_utils.unload_model")
    try:
        host.unload_model(model_name)
    except Exception as exc:
        raise TritonModelException(_reason(exc)) from exc


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    return current("pb_utils.is_model_ready").is_model_ready(model_name, model_version)


def _reason(exc: Exception) -> str:
    return (exc.message if isinstance(exc, OIPError) else "") or str(exc)
