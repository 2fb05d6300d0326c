"""A model file read: which format it is (its extension, or else its first bytes, as `formats.py` tells
them), and `Model`'s arguments from what that format's loader reads of it, now or when the server starts."""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ._common import AdvisedError, FileModel, ModelFileError, loaded_lazily
from .formats import FORMATS, Content, FileFormat, by_content, by_extension, extensions


def file_model(
    path: str | os.PathLike[str], format: str | None, own: Mapping[str, Any], declared: Mapping[str, Any]
) -> dict[str, Any]:
    """`Model`'s arguments for the file at `path`, read now or, with ``lazy=True``, when the server starts.

    `own` are the format's options, `declared` what the caller declares of the `Model` (it wins).
    """
    file = Path(path)
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown model file format {format!r}; the formats are {', '.join(FORMATS)}")
    own = dict(own)
    if own.pop("lazy", False):
        # A file that is missing or unreadable then is the model's readiness reason, not an error here;
        # only a format neither given nor named by the extension needs the file's first bytes now.
        known = format or detect_format(file)
        platform = FORMATS[known].platform_of(file)
        return loaded_lazily(file, platform, lambda: read(file, known, own, declared), declared)
    return read(file, format, own, declared).model(file, declared)


def read(file: Path, format: str | None, own: dict[str, Any], declared: Mapping[str, Any]) -> FileModel:
    """What the file says, read by its format's loader: `format`'s, or the one the file shows."""
    if not file.is_file():
        raise FileNotFoundError(f"no model file at {str(file)!r}")
    entry = FORMATS[format or detect_format(file)]
    loaded = _reader(entry)(file, own, declared)
    return loaded if loaded.platform else dataclasses.replace(loaded, platform=entry.platform_of(file))


# A reader takes the file, its own options, and what the caller declares (TorchScript's tensors come from there).
Reader = Callable[[Path, dict[str, Any], Mapping[str, Any]], FileModel]


def _reader(entry: FileFormat) -> Reader:
    module = importlib.import_module(entry.loader, __package__)  # only the library this file needs
    read: Reader = module.read
    return read


def detect_format(file: Path) -> str:
    """The format a file's extension names, or else the one its first bytes show."""
    by_name = by_extension(file)
    if by_name is not None:
        return by_name.name
    if not file.is_file():
        raise FileNotFoundError(f"no model file at {str(file)!r}")
    try:
        with file.open("rb") as stream:
            head = stream.read(4096)
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {str(file)!r}: {exc}") from exc
    by_head = by_content(Content(file, head))
    if by_head is None:
        raise AdvisedError(
            f"cannot tell which library model file {str(file)!r} is for, from its name or its content",
            {
                "python": f"; pass format= one of {', '.join(map(repr, FORMATS))}",
                "command line": f"; name it with its library's extension ({', '.join(extensions())})",
                "repository": f"; set the config's platform or backend (one of {', '.join(FORMATS)})",
            },
        )
    return by_head.name
