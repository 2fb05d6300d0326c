"""Where a repository's names may lead: model folders inside the root, override files inside their model's folder."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath


class PathError(ValueError):
    """A model name or override file name that would leave where it belongs."""


def is_model_name(name: str) -> bool:
    """A name that is one plain, visible path component (what a model folder may be called)."""
    return (
        bool(name)
        and not name.startswith(".")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
        and name == name.strip()
    )


def inside(path: Path, folder: Path) -> bool:
    """`path`, with every symlink resolved, is `folder` or under it."""
    return path.resolve().is_relative_to(folder.resolve())


def model_folder(root: Path, name: str) -> Path:
    if not is_model_name(name):
        raise PathError(f"{name!r} is not a model name: a model is a visible folder directly under the repository")
    folder = root / name
    if not inside(folder, root):
        raise PathError(f"model folder {name!r} is a link that leaves the repository")
    return folder


def write_files(folder: Path, files: Mapping[str, bytes]) -> None:
    """Triton's ``file:`` load overrides written into `folder`, each by its relative name; all are checked first."""
    targets = [(_target(folder, name), content) for name, content in files.items()]
    for target, content in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        # A poll that reads the folder mid-write sees the old file or the new one, never half of one.
        descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(content)
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise


def _target(folder: Path, name: str) -> Path:
    relative = PurePosixPath(name)
    if not name or "\\" in name or "\0" in name or relative.is_absolute():
        raise PathError(f"override file {name!r} must be a relative path inside the model's folder")
    if any(part in ("", ".", "..") for part in name.split("/")):
        raise PathError(f"override file {name!r} must not hold '..', '.' or empty parts")
    target = folder.joinpath(*relative.parts)
    # No part of the way may be a link: one could point anywhere, even if it resolves inside today.
    step = folder
    for part in relative.parts:
        step = step / part
        if step.is_symlink():
            raise PathError(f"override file {name!r} goes through a symbolic link ({step.relative_to(folder)})")
    if folder.is_symlink() or not inside(target, folder):
        raise PathError(f"override file {name!r} would be written outside the model's folder")
    return target


def folder_fingerprint(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """Every entry under `folder` by relative name, size and modification time: equal while nothing changed."""
    entries: list[tuple[str, int, int]] = []
    for directory, folders, names in os.walk(folder):
        folders.sort()
        for name in (*folders, *names):
            path = Path(directory, name)
            try:
                status = path.stat() if path.exists() else path.lstat()  # a dangling link counts as itself
            except OSError:  # removed while walking: the next call sees it gone
                continue
            entries.append((str(path.relative_to(folder)), status.st_size, status.st_mtime_ns))
    return tuple(sorted(entries))
