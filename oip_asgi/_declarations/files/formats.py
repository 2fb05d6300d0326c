"""The model-file formats, one entry each: what every other place knows of a format, it reads here.

An entry says how a file of its format is told (its extensions, or else its first bytes), the Triton
names a repository's config gives it (and the file a version folder holds for each), the platform its
models declare, whether it takes a table of rows, and the extra that brings its library (with the
packages that a missing-extra message names). Its loader is a module of its own, imported only when a
file of the format is read: ``read(file, options, declared)`` returns a `FileModel`.

A new format is one more entry in `FORMATS` (docs/architecture.md, "Recipe: a new model-file format");
a test adds one for its own duration with ``monkeypatch.setitem(FORMATS, entry.name, entry)``.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path


class Content:
    """A file's first bytes, and the names it holds where it is a zip archive (listed once, when asked)."""

    def __init__(self, file: Path, head: bytes) -> None:
        self.file = file
        self.head = head

    @cached_property
    def zip_names(self) -> list[str]:
        if not self.head.startswith(b"PK\x03\x04"):
            return []
        try:
            with zipfile.ZipFile(self.file) as archive:
                return archive.namelist()
        except (OSError, zipfile.BadZipFile):
            return []


@dataclass(frozen=True)
class FileFormat:
    """A model-file format: how its files are told, what Triton calls it, what serves it."""

    name: str  # as `Model.from_file(format=...)` takes it
    title: str  # as messages name its files
    extensions: tuple[str, ...]  # in lower case, with their dot
    sniff: Callable[[Content], bool]  # whether a file's first bytes are this format's
    platform: str  # Triton's platform its models declare, unless `extension_platforms` or the loader says another
    extra: str  # the extra of pyproject.toml that brings its library
    packages: tuple[str, ...]  # the top-level packages the extra brings and the loader imports
    loader: str  # its module (``read(file, options, declared)``), relative to this package or absolute
    # Triton's platform and backend names that a repository's config gives it besides its own, each with the
    # file its version folders hold where the config names none.
    triton: Mapping[str, str] = field(default_factory=dict)
    tabular: bool = False  # its models take a table of numbers, whatever their float type
    extension_platforms: Mapping[str, str] = field(default_factory=dict)  # where a file's extension says its platform

    def platform_of(self, file: Path) -> str:
        """The platform a model of `file` declares before the loader reads it."""
        return self.extension_platforms.get(file.suffix, self.platform)


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


def _is_onnx(content: Content) -> bool:
    head = content.head  # a protobuf ModelProto opens with its ir_version (field 1, a small varint)
    return head[:1] == b"\x08" and len(head) > 1 and head[1] < 0x20


def _is_sklearn(content: Content) -> bool:
    head = content.head  # a skops archive, or a pickle, plain or as joblib compresses it
    is_pickle = head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")
    return "schema.json" in content.zip_names or is_pickle or head.startswith(_PICKLE_STARTS)


def _is_xgboost(content: Content) -> bool:
    head = content.head  # legacy binary, or JSON / UBJSON (both start with an object holding "learner")
    return head.startswith(b"binf") or (head.startswith(b"{") and b"learner" in head)


def _is_lightgbm(content: Content) -> bool:
    return content.head.startswith((b"tree\n", b"tree\r\n"))  # LightGBM's text model


def _is_torch(content: Content) -> bool:
    # torch.export's .pt2 or TorchScript
    return any(name.endswith(("archive_format", "/code/", ".py", "data.pkl")) for name in content.zip_names)


# In the order their contents are tried (a skops archive before a PyTorch one). Each entry: its name, its title, its
# extensions and its sniffing, then the rest by keyword.
FORMATS: dict[str, FileFormat] = {entry.name: entry for entry in (
    FileFormat("onnx", "ONNX", (".onnx",), _is_onnx, platform="onnxruntime_onnx",
               extra="onnx", packages=("onnxruntime", "onnx"), loader="._onnx",
               triton={"onnxruntime_onnx": "model.onnx", "onnxruntime": "model.onnx"}),
    FileFormat("sklearn", "scikit-learn", (".skops", ".joblib", ".pkl", ".pickle"), _is_sklearn, platform="sklearn",
               extra="sklearn", packages=("sklearn", "skops", "joblib", "pandas"), loader="._sklearn", tabular=True),
    FileFormat("xgboost", "XGBoost", (".ubj", ".xgb"), _is_xgboost, platform="xgboost",
               extra="xgboost", packages=("xgboost",), loader="._xgboost", tabular=True),
    # LightGBM's text files are told by their content alone.
    FileFormat("lightgbm", "LightGBM", (), _is_lightgbm, platform="lightgbm",
               extra="lightgbm", packages=("lightgbm",), loader="._lightgbm", tabular=True),
    FileFormat("torch", "PyTorch", (".pt2", ".pt", ".pth"), _is_torch, platform="pytorch_libtorch",
               extra="torch", packages=("torch",), loader="._torch",
               triton={"torch_export": "model.pt2", "pytorch_libtorch": "model.pt", "pytorch": "model.pt"},
               extension_platforms={".pt2": "torch_export"}),
)}  # fmt: skip


def by_extension(file: Path) -> FileFormat | None:
    """The format `file`'s extension names, if any."""
    suffix = file.suffix.lower()
    return next((entry for entry in FORMATS.values() if suffix in entry.extensions), None)


def by_content(content: Content) -> FileFormat | None:
    """The first format, in `FORMATS`' order, whose files start as `content` does."""
    return next((entry for entry in FORMATS.values() if entry.sniff(content)), None)


def by_triton_name(kind: str) -> FileFormat | None:
    """The format of a repository config's platform or backend: one of Triton's names, or the format's own."""
    return next((entry for entry in FORMATS.values() if kind == entry.name or kind in entry.triton), None)


def default_file(kind: str) -> str | None:
    """The file Triton's platform or backend `kind` looks for in a version folder, where a format names one."""
    return next((entry.triton[kind] for entry in FORMATS.values() if kind in entry.triton), None)


def extensions() -> list[str]:
    """Every format's extensions, sorted."""
    return sorted(extension for entry in FORMATS.values() for extension in entry.extensions)


def tabular() -> list[FileFormat]:
    return [entry for entry in FORMATS.values() if entry.tabular]


def extra_of(module: str) -> str:
    """The extra that brings `module`'s package, as a format's entry lists it."""
    package = module.partition(".")[0]
    for entry in FORMATS.values():
        if package in entry.packages:
            return entry.extra
    raise LookupError(f"no model-file format lists the package {package!r}")
