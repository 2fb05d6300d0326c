"""Model files: which library a file is for, and the ordinary `Model` declaration that serves it.

Each loader (one module per library, each importing its library only when a file of its kind is
loaded) reads what the file says about itself: its tensors' names, datatypes and shapes, its class
names, its feature names. What the caller passes overrides it, and the result is the keyword arguments
of a plain `Model` (`Model.from_file` builds it). Nothing here serves: the loaders only declare.

formats.py is the formats, one entry each (how a file of it is told, its Triton names and platform, its
extra, its loader), which everything else reads; _reader.py tells a file's format and reads it; _common.py
holds what every loader shares; _onnx.py, _sklearn.py, _xgboost.py, _lightgbm.py, _torch.py (and
_trees.py, the two tree libraries' outputs) are the loaders; labels.py reads class names written beside a
file.
"""

from __future__ import annotations

from ._common import UnknownOption
from ._reader import detect_format, file_model, read
from .formats import FORMATS, FileFormat

__all__ = ["FORMATS", "FileFormat", "UnknownOption", "detect_format", "file_model", "read"]
