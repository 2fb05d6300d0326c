"""A model file's class labels from a file beside it, as Triton's ``label_filename``: one class name a line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..spec import TensorSpec

SUFFIX = ".labels.txt"


def label_file(model_file: Path) -> Path:
    """Where the labels of `model_file` go: ``forest.labels.txt`` beside ``forest.skops``."""
    return model_file.with_name(model_file.stem + SUFFIX)


def labels_beside(model_file: Path, outputs: Sequence[TensorSpec]) -> dict[str, list[str]] | None:
    """The labels of the label file beside `model_file`, for each output with one score per class
    (its last dimension as long as the list, or variable), or None without a label file.
    """
    file = label_file(model_file)
    if not file.is_file():
        return None
    names = file.read_text(encoding="utf-8").splitlines()
    while names and not names[-1].strip():
        names.pop()
    if not names:
        raise ValueError(f"label file {str(file)!r} is empty: it lists one class name a line")
    scored = [spec.name for spec in outputs if len(spec.shape) >= 2 and spec.shape[-1] in (-1, len(names))]
    if not scored:
        shapes = ", ".join(f"{spec.name} {list(spec.shape)}" for spec in outputs)
        raise ValueError(
            f"label file {str(file)!r} lists {len(names)} classes, and no output of the model has one score per "
            f"class ({shapes})"
        )
    return {name: names for name in scored}
