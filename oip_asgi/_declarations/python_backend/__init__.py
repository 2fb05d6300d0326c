"""Triton's Python backend, served: a model.py whose ``TritonPythonModel`` becomes a `Model` (docs/repository.md).

`utils` is ``triton_python_backend_utils`` (a thin module over tensors.py, requests.py, responses.py,
bls.py, errors.py, model_config.py, logger.py, metrics.py and control.py); reading.py provides it
in `sys.modules` before a model.py that may need it runs, completes the config and builds the
`Model` of one version, which adapter.py serves; host.py is the `PythonHost` the core implements.
"""

from __future__ import annotations

from .adapter import TritonModel
from .host import BLSRequest, BLSResponse, MetricFamilyHandle, PythonHost, remember
from .reading import completed_config, is_triton_source, provide_utils, triton_model

__all__ = ["BLSRequest", "BLSResponse", "MetricFamilyHandle", "PythonHost", "TritonModel", "completed_config",
           "is_triton_source", "provide_utils", "remember", "triton_model"]  # fmt: skip
