"""A Triton-style model repository folder read into `Model` declarations (docs/repository.md).

``<root>/<model>/<version>/<file>`` with integer version folders, an optional
``<root>/<model>/config.pbtxt`` (Triton's ``ModelConfig`` in protobuf's text format) and the label
files it names. A version's file is a model file `Model.from_file` reads, or a ``model.py`` that
defines ``model`` (a `Model` or a callable) or Triton's ``class TritonPythonModel`` (`..python_backend`:
its ``auto_complete_config`` completes the config here, before the specs are built); an ensemble's
version folders are empty, its config says it all. Nothing here serves: the core's model control calls
`read_model` off the event loop and serves what it returns.

_reader.py reads a model folder, _version.py one version of it, _ensemble.py an ensemble's config,
_settings.py its config as `Model`'s arguments, _config.py the config file, _reshape.py its reshapes,
_paths.py its paths, _modules.py the model.py modules it runs.
"""

from __future__ import annotations

from ..model_repository import ModelRepository
from ._ensemble import ENSEMBLE, Ensemble, EnsembleStep, EnsembleTensor, composing_models
from ._errors import RepositoryError
from ._modules import Modules, register, release
from ._paths import PathError
from ._reader import DirectoryModel, fingerprint, model_names, read_model

__all__ = [
    "ENSEMBLE",
    "DirectoryModel",
    "Ensemble",
    "EnsembleStep",
    "EnsembleTensor",
    "ModelRepository",
    "Modules",
    "PathError",
    "RepositoryError",
    "composing_models",
    "fingerprint",
    "model_names",
    "read_model",
    "register",
    "release",
]
