"""``triton_python_backend_utils`` as a Triton Python model imports it (``import ... as pb_utils``).

This module *is* that import: the repository reader puts it in `sys.modules` under Triton's name
before it runs a model.py that defines ``TritonPythonModel`` (unless the process already has a
module of that name), so a model file serves unchanged. A user testing a model.py outside any server
can do the same: ``sys.modules["triton_python_backend_utils"] = provide_utils()``, from
``oip_asgi._declarations.python_backend``.

It names what its modules hold: tensors and the type tables (tensors.py), requests and responses
(requests.py, responses.py, with BLS in bls.py), errors (errors.py), the config (model_config.py), the
logger (logger.py), custom metrics (metrics.py) and model control (control.py). The values need no
server; what does (BLS, ``load_model``, ``unload_model``, ``is_model_ready``, `MetricFamily`) reaches
the server serving the calling model through its `PythonHost` (host.py). What this server cannot offer
(GPU tensors, DLPack to a device, sequences) raises an error that names it.
"""

from __future__ import annotations

from .control import is_model_ready, load_model, unload_model
from .errors import TritonError, TritonModelException
from .host import BLSRequest as BLSRequest  # not Triton's: what BLS hands the host
from .logger import Logger
from .metrics import Metric, MetricFamily
from .model_config import (
    ModelConfig,
    get_input_config_by_name,
    get_output_config_by_name,
    using_decoupled_model_transaction_policy,
)
from .requests import (
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    InferenceRequest,
    get_input_tensor_by_name,
)
from .responses import (
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    InferenceResponse,
    InferenceResponseSender,
    get_output_tensor_by_name,
)
from .tensors import (
    TRITON_STRING_TO_NUMPY,
    Tensor,
    deserialize_bytes_tensor,
    numpy_to_triton_type,
    serialize_byte_tensor,
    triton_string_to_numpy,
    triton_to_numpy_type,
)
from .tensors import datatype_of as datatype_of  # not Triton's: a tensor's protocol datatype

__all__ = [
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "Logger",
    "Metric",
    "MetricFamily",
    "ModelConfig",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "load_model",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
]
