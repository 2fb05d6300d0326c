"""A model file read: which library it is for (its extension, or else its first bytes), and `Model`'s
arguments from what that library's loader reads of it, now or when the server starts."""

from __future__ import annotations

import importlib
import os
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ._common import AdvisedError, FileModel, ModelFileError, loaded_lazily

FORMATS = ("onnx", "sklearn", "xgboost", "lightgbm", "torch")

_BY_EXTENSION = {
    ".onnx": "onnx",
    ".skops": "sklearn",
    ".joblib": "sklearn",
    ".pkl": "sklearn",
    ".pickle": "sklearn",
    ".ubj": "xgboost",
    ".xgb": "xgboost",
    ".pt2": "torch",
    ".pt": "torch",
    ".pth": "torch",
}

# The extensions that name a model file's library (LightGBM's text files are told by their content).
MODEL_EXTENSIONS = tuple(_BY_EXTENSION)

# The libraries' own compressed pickles (joblib's zlib, gzip, bz2, xz and lz4) and plain pickles (protocol 2 to 5).
_PICKLE_STARTS = (
    b"\x78\x01",
    b"\x78\x5e",
    b"\x78\x9c",
    b"\x78\xda",
    b"\x1f\x8b",
    b"BZh",
    b"\xfd7zXZ",
    b"\x04\x22\x4d\x18",
)


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
        known = format or _BY_EXTENSION.get(file.suffix.lower()) or detect_format(file)
        return loaded_lazily(file, known, lambda: read(file, known, own, declared), declared)
    return read(file, format, own, declared).model(file, declared)


def read(file: Path, format: str | None, own: dict[str, Any], declared: Mapping[str, Any]) -> FileModel:
    """What the file says, read by its library: `format`'s, or the one the file shows."""
    if not file.is_file():
        raise FileNotFoundError(f"no model file at {str(file)!r}")
    return _reader(format or detect_format(file))(file, own, declared)


# A reader takes the file, its own options, and what the caller declares (TorchScript's tensors come from there).
Reader = Callable[[Path, dict[str, Any], Mapping[str, Any]], FileModel]


def _reader(format: str) -> Reader:
    module = importlib.import_module(f"{__package__}._{format}")  # only the library this file needs
    read: Reader = module.read
    return read


def detect_format(file: Path) -> str:
    """The format a file's extension names, or else the one its first bytes show."""
    by_extension = _BY_EXTENSION.get(file.suffix.lower())
    if by_extension is not None:
        return by_extension
    if not file.is_file():
        raise FileNotFoundError(f"no model file at {str(file)!r}")
    try:
        with file.open("rb") as stream:
            head = stream.read(4096)
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {str(file)!r}: {exc}") from exc
    format = _format_of_content(file, head)
    if format is None:
        raise AdvisedError(
            f"cannot tell which library model file {str(file)!r} is for, from its name or its content",
            {
                "python": f"; pass format= one of {', '.join(map(repr, FORMATS))}",
                "command line": f"; name it with its library's extension ({', '.join(sorted(_BY_EXTENSION))})",
                "repository": f"; set the config's platform or backend (one of {', '.join(FORMATS)})",
            },
        )
    return format


def _format_of_content(file: Path, head: bytes) -> str | None:
    if head.startswith(b"PK\x03\x04"):
        return _format_of_zip(file)
    if head.startswith(b"tree\n") or head.startswith(b"tree\r\n"):
        return "lightgbm"  # LightGBM's text model
    if head.startswith(b"binf") or (head.startswith(b"{") and b"learner" in head):
        return "xgboost"  # legacy binary, or JSON / UBJSON (both start with an object holding "learner")
    if (head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")) or head.startswith(_PICKLE_STARTS):
        return "sklearn"  # a pickle, plain or as joblib compresses it
    if head[:1] == b"\x08" and len(head) > 1 and head[1] < 0x20:
        return "onnx"  # a protobuf ModelProto opens with its ir_version (field 1, a small varint)
    return None


def _format_of_zip(file: Path) -> str | None:
    try:
        with zipfile.ZipFile(file) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return None
    if "schema.json" in names:
        return "sklearn"  # skops
    if any(name.endswith(("archive_format", "/code/", ".py", "data.pkl")) for name in names):
        return "torch"  # torch.export's .pt2 or TorchScript
    return None
