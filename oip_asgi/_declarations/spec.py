"""`TensorSpec`: a declared input or output, as a model, a model file and a repository's config declare it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .checks import checked_datatype, checked_shape


@dataclass(frozen=True)
class TensorSpec:
    """A declared input or output: its name, protocol datatype and shape (-1 for a variable dimension)."""

    name: str
    datatype: str
    shape: Sequence[int]
    optional: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"TensorSpec: name must be a non-empty string, got {self.name!r}")
        where = f"TensorSpec {self.name!r}"
        checked_datatype(self.datatype, where)
        object.__setattr__(self, "shape", checked_shape(self.shape, where))

    def accepts_shape(self, shape: Sequence[int]) -> bool:
        dims = self.shape
        if len(shape) != len(dims):
            return False
        for want, got in zip(dims, shape, strict=True):  # a loop, not all() of a generator: on every request
            if want != got and want != -1:
                return False
        return True
