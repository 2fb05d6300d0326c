"""One table of protocol behaviours, as wire-neutral data, that REST and gRPC must answer alike.

Each case says what a client asks (a model and version, inputs with a name, datatype, shape and their
elements or raw bytes, the outputs and parameters it wants) and what it gets: the HTTP status and a
fragment of the message, or the outputs. tests/e2e/test_parity.py turns each into REST requests and gRPC
messages, sends them to one server process that serves both (tests/apps/parity.py), and checks that
the gRPC code is the status's (`oip_asgi.grpc.STATUS_CODES`) and that both wires send the same message.

An inference case runs in two pairs of forms: its elements as REST JSON ``data`` and as gRPC typed
contents ("typed"), and its bytes as REST binary tensors and as gRPC ``raw_input_contents`` ("raw").
A pair is left out where a wire has no such form (FP16 has no typed contents, BF16 no JSON).

What only one wire can say stays in that wire's tests: HTTP headers, JSON syntax and JSON value types,
Content-Length and the binary extension's framing in tests/rest/hostile_cases.py (which also writes
docs/bad-input.md); protobuf framing, typed-contents fields, InferParameter choices and Triton's
ModelReady answer for unknown models in tests/grpc/test_grpc.py.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from oip_asgi import BadRequest, Model, ModelNotReady, ModelRepository, NotFound, Result, TensorSpec
from oip_asgi._declarations.datatypes import DATATYPES, numpy_dtype

LABELS = ("cat", "dog", "fish", "bird")
LONG = "n" * 20_000  # a client's name larger than grpcio's 16 KiB limit on a status message
PAIRS = ("typed", "raw")
IHCL = "inference-header-content-length"


def _fails(X: np.ndarray) -> np.ndarray:
    raise ValueError("no luck")


def _refuses(X: np.ndarray) -> np.ndarray:
    raise BadRequest("X must be positive")


def _gone(X: np.ndarray) -> np.ndarray:
    raise NotFound("the lookup table has no such key")


def _busy(X: np.ndarray) -> np.ndarray:
    raise ModelNotReady("warming up")


def _broken_load() -> None:
    raise RuntimeError("weights missing")


def _yields(X: np.ndarray) -> Iterator[np.ndarray]:
    yield X  # a decoupled model: the one-response endpoints refuse it


def _echo_parameters(X: np.ndarray, parameters: dict[str, Any]) -> Result:
    return Result({"Y": X}, parameters=dict(parameters))


def identity(datatype: str) -> Model:
    return Model(lambda x: x, inputs=[TensorSpec("x", datatype, [-1])], outputs=[TensorSpec("y", datatype, [-1])])


MODELS: dict[str, Any] = {
    "echo": lambda **inputs: inputs,  # declares nothing: any inputs, any shapes
    "int32": identity("INT32"),
    "bytes": identity("BYTES"),
    "two": Model(
        lambda a, b: a + b,
        inputs=[TensorSpec("a", "INT32", [-1]), TensorSpec("b", "INT32", [-1])],
        outputs=[TensorSpec("sum", "INT32", [-1])],
    ),
    "scores": Model(
        lambda x: x,
        inputs=[TensorSpec("x", "FP32", [-1, 4])],
        outputs=[TensorSpec("scores", "FP32", [-1, 4])],
        labels=list(LABELS),
        platform="numpy",
        properties={"task": "classification"},
    ),
    "versioned": [Model(lambda X: X + 1, version="1"), Model(lambda X: X + 2, version="2")],
    "parameters": Model(
        _echo_parameters, inputs=[TensorSpec("X", "FP32", [-1])], outputs=[TensorSpec("Y", "FP32", [-1])]
    ),
    "fails": _fails,
    "refuses": _refuses,
    "gone": _gone,
    "busy": _busy,
    "broken": Model(lambda X: X, load=_broken_load),  # never loads: the server is live, never ready
    "decoupled": Model(_yields, inputs=[TensorSpec("X", "FP32", [-1])], outputs=[TensorSpec("Y", "FP32", [-1])]),
}

# A model repository served beside MODELS (explicit mode): a model whose load fails, one never loaded,
# and a folder named as a model served from code, refused at start (the model from code goes on serving).
REPOSITORY_MODELS = {
    "repo_broken": "raise RuntimeError('weights missing')\n",
    "repo_idle": "model = lambda X: X\n",
    "int32": "model = lambda x: {'y': x + 1000}\n",
}


def _repository() -> ModelRepository:
    root = Path(tempfile.mkdtemp(prefix="oip-parity-repository-"))
    atexit.register(shutil.rmtree, root, True)
    for name, source in REPOSITORY_MODELS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(source)
    return ModelRepository(root, model_control_mode="explicit", load_models=["repo_broken", "int32"])


REPOSITORY = _repository()


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str
    shape: tuple[int, ...]
    data: tuple[Any, ...] | None = None  # the elements, row-major: JSON data, typed contents, or packed to bytes
    raw: bytes | None = None  # bytes as sent, where only the binary forms can say it

    def packed(self) -> bytes:
        """The tensor's bytes as both binary forms carry them."""
        if self.raw is not None:
            return self.raw
        assert self.data is not None, f"{self.name} has neither data nor raw bytes"
        if self.datatype == "BYTES":
            return b"".join(len(item).to_bytes(4, "little") + item for item in self.data)
        return np.array(self.data, dtype=numpy_dtype(self.datatype)).tobytes()


@dataclass(frozen=True)
class Output:
    name: str
    classification: int | None = None


@dataclass(frozen=True)
class Case:
    id: str
    description: str
    model: str
    inputs: tuple[Tensor, ...] = ()
    version: str = ""
    outputs: tuple[Output, ...] | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    request_id: str = ""
    rpc: str = "infer"  # or "metadata", "model_ready", "live", "ready", "server_metadata", "load" (repository)
    status: int = 200
    message: str = ""  # a fragment of the error message, the same on both wires
    expected: Mapping[str, tuple[str, tuple[int, ...], tuple[Any, ...]]] | None = None  # output: datatype, shape, data
    answer: Mapping[str, Any] | None = None  # what a non-inference RPC answers, in REST's JSON terms
    pairs: tuple[str, ...] = PAIRS
    differs: Mapping[str, str] = field(default_factory=dict)  # pair: why REST and gRPC still answer differently


def _t(name: str, datatype: str, shape: tuple[int, ...], *data: Any, raw: bytes | None = None) -> Tensor:
    return Tensor(name, datatype, shape, data if raw is None else None, raw)


def _error(id: str, description: str, model: str, status: int, message: str, *inputs: Tensor, **options: Any) -> Case:
    return Case(id, description, model, inputs, status=status, message=message, **options)


_A = _t("a", "INT32", (1,), 1)
_B = _t("b", "INT32", (1,), 2)
_X4 = _t("x", "FP32", (1, 4), 0.25, 0.5, 4.0, 1.0)
_F = _t("X", "FP32", (2,), 1.5, -2.0)
_ELEMENTS: dict[str, tuple[Any, ...]] = {
    "BOOL": (True, False, True),
    "UINT8": (0, 255, 7), "UINT16": (0, 65535, 7), "UINT32": (0, 2**32 - 1, 7), "UINT64": (0, 2**64 - 1, 7),
    "INT8": (-128, 127, 7), "INT16": (-(2**15), 2**15 - 1, 7), "INT32": (-(2**31), 2**31 - 1, 7),
    "INT64": (-(2**63), 2**63 - 1, 7),
    "FP16": (-65504.0, 0.5, 7.0), "FP32": (-1.5, 3.25, 7.0), "FP64": (-1e300, 2.5, 7.0),
    "BYTES": (b"ascii", "\u00fcn\u00efcode".encode(), b""),
}  # fmt: skip
_NO_TYPED = {"FP16": "FP16 has no typed contents"}


CASES: list[Case] = [
    # -- health and metadata ---------------------------------------------------------------------------------
    Case("live", "the server is live", "", rpc="live", answer={"live": True}),
    Case("ready", "a model that failed to load keeps the server from being ready", "", rpc="ready",
         answer={"ready": False}),
    Case("model-ready", "a loaded model is ready", "two", rpc="model_ready", answer={"ready": True}),
    Case("model-ready-version", "a loaded version is ready", "versioned", version="1", rpc="model_ready",
         answer={"ready": True}),
    Case("model-ready-broken", "a model that failed to load is not", "broken", rpc="model_ready",
         answer={"ready": False}),
    Case("server-metadata", "the server's name and extensions", "", rpc="server_metadata",
         answer={"name": "oip-asgi"}),
    Case("metadata", "a model's versions, platform and tensors", "scores", rpc="metadata",
         answer={"name": "scores", "versions": ["1"], "platform": "numpy",
                 "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
                 "outputs": [{"name": "scores", "datatype": "FP32", "shape": [-1, 4]}]}),
    Case("metadata-version", "one version's metadata lists every version", "versioned", version="1",
         rpc="metadata", answer={"name": "versioned", "versions": ["1", "2"]}),
    _error("metadata-unknown-model", "metadata of a model that does not exist", "nope", 404,
           "Request for unknown model: 'nope' is not found", rpc="metadata"),
    _error("metadata-unknown-version", "metadata of a version that does not exist", "versioned", 404,
           "Request for unknown model: 'versioned' version '7' is not found; its versions are 1, 2", version="7",
           rpc="metadata"),
    # -- inference: contents of every datatype, versions, ids, classification, parameters -------------------
    *[
        Case(f"contents-{datatype.lower()}", f"{datatype} elements back as they went", "echo",
             (_t("x", datatype, (3,), *_ELEMENTS[datatype]),),
             expected={"x": (datatype, (3,), _ELEMENTS[datatype])},
             pairs=("raw",) if datatype in _NO_TYPED else PAIRS)
        for datatype in DATATYPES if datatype != "BF16"
    ],
    Case("contents-bf16", "BF16 bytes back as they went (binary forms only)", "echo",
         (_t("x", "BF16", (2,), raw=b"\x80\x3f\x00\xc0"),), expected={"x": ("BF16", (2,), (1.0, -2.0))},
         pairs=("raw",)),
    Case("contents-2d", "a 2-D tensor keeps its shape", "echo", (_t("x", "INT16", (2, 3), 1, 2, 3, 4, 5, 6),),
         expected={"x": ("INT16", (2, 3), (1, 2, 3, 4, 5, 6))}),
    Case("contents-empty", "a tensor with no elements", "echo", (_t("x", "FP32", (0, 4)),),
         expected={"x": ("FP32", (0, 4), ())}),
    Case("two-inputs", "two declared inputs, one output", "two", (_A, _B), expected={"sum": ("INT32", (1,), (3,))}),
    Case("output-subset", "only the outputs asked for", "echo", (_t("p", "INT8", (1,), 1), _t("q", "INT8", (1,), 2)),
         outputs=(Output("q"),), expected={"q": ("INT8", (1,), (2,))}),
    Case("request-id", "the request's id comes back", "two", (_A, _B), request_id="req-9",
         expected={"sum": ("INT32", (1,), (3,))}),
    Case("version-1", "version 1 by name", "versioned", (_F,), version="1",
         expected={"OUTPUT0": ("FP32", (2,), (2.5, -1.0))}),
    Case("version-latest", "no version: the latest", "versioned", (_F,),
         expected={"OUTPUT0": ("FP32", (2,), (3.5, 0.0))}),
    Case("classification", "the top 2 classes, labelled", "scores", (_X4,), outputs=(Output("scores", 2),),
         expected={"scores": ("BYTES", (1, 2), (b"4.0:2:fish", b"1.0:3:bird"))}),
    Case("classification-capped", "k past the classes there are", "scores", (_X4,), outputs=(Output("scores", 9),),
         expected={"scores": ("BYTES", (1, 4), (b"4.0:2:fish", b"1.0:3:bird", b"0.5:1:dog", b"0.25:0:cat"))}),
    Case("parameters", "request parameters reach the model, and its own come back", "parameters", (_F,),
         parameters={"flag": True, "count": -3, "name": "\u00fcn\u00ef", "ratio": 0.25},
         expected={"Y": ("FP32", (2,), (1.5, -2.0))}),
    # -- refusals -------------------------------------------------------------------------------------------
    _error("model-unknown", "inference on a model that does not exist", "nope", 404,
           "Request for unknown model: 'nope' is not found", _F),
    _error("version-unknown", "inference on a version that does not exist", "two", 404,
           "Request for unknown model: 'two' version '9' is not found; its versions are 1", _A, _B, version="9"),
    _error("decoupled-on-infer", "a decoupled model on REST's /infer and gRPC's ModelInfer (Triton's 501, "
           "UNIMPLEMENTED)", "decoupled", 501, "doesn't support models with decoupled transaction policy", _F,
           differs=dict.fromkeys(PAIRS, "Triton names the endpoint: 'HTTP end point' on REST, 'ModelInfer RPC' on "
                                 "gRPC (both in tests/e2e/test_streaming_e2e.py)")),
    _error("model-raises", "a model's own exception", "fails", 500, "model 'fails' raised ValueError: no luck", _F),
    _error("model-bad-request", "a model that refuses its input", "refuses", 400, "X must be positive", _F),
    _error("model-not-found", "a model that finds nothing", "gone", 404, "the lookup table has no such key", _F),
    _error("model-not-ready", "a model that is busy", "busy", 503, "warming up", _F),
    _error("model-failed-to-load", "a model whose load failed", "broken", 503,
           "model 'broken' version 1 failed to load: RuntimeError: weights missing", _F),
    # -- a model repository beside the models from code ----------------------------------------------------
    _error("repository-failed-to-load", "a repository's model whose load failed", "repo_broken", 503,
           "model 'repo_broken' failed to load; it is UNAVAILABLE: model 'repo_broken': RuntimeError: weights missing",
           _F),
    Case("repository-failed-not-ready", "a repository's model whose load failed is not ready", "repo_broken",
         rpc="model_ready", answer={"ready": False}),
    _error("repository-not-loaded", "a repository's model not loaded", "repo_idle", 404,
           "Request for unknown model: 'repo_idle' has no available versions; it is not loaded", _F),
    Case("repository-clash-code-serves", "a folder named as a model from code: the model from code serves",
         "int32", (_t("x", "INT32", (1,), 7),), expected={"y": ("INT32", (1,), (7,))}),
    _error("repository-clash-load", "loading a folder named as a model from code", "int32", 400,
           "failed to load 'int32': model 'int32' is served from code (the models given to oip_app, or the serve "
           "command's target) and also found in the model repository", rpc="load"),
    _error("input-duplicate", "the same input name twice", "echo", 400, "input 'x' appears more than once",
           _t("x", "INT8", (1,), 1), _t("x", "INT8", (1,), 2)),
    _error("input-missing", "one of two declared inputs", "two", 400, "missing input 'b' for model 'two'", _A),
    _error("input-none", "no inputs for a model that declares two", "two", 400, "missing input 'a' for model 'two'"),
    _error("input-unexpected", "an input the model does not declare", "two", 400,
           "unexpected input 'c'; model 'two' takes a, b", _A, _B, _t("c", "INT32", (1,), 3)),
    _error("output-unknown", "an output the model does not declare", "two", 400,
           "unknown output 'nope'; model 'two' produces sum", _A, _B, outputs=(Output("nope"),)),
    _error("output-duplicate", "the same output twice", "two", 400, "output 'sum' is requested more than once",
           _A, _B, outputs=(Output("sum"), Output("sum"))),
    _error("output-not-produced", "an output a model without specs does not produce", "echo", 400,
           "model 'echo' did not produce output 'nope' (it produced x)", _t("x", "INT8", (1,), 1),
           outputs=(Output("nope"),)),
    _error("datatype-unknown", "datatype FP8", "echo", 400, "input 'x' has datatype 'FP8'; the datatypes are BOOL",
           _t("x", "FP8", (2,), raw=b"\0\0"), pairs=("raw",)),
    _error("datatype-against-spec", "FP32 for a declared INT32 input", "int32", 400,
           "input 'x' has datatype FP32, model 'int32' expects INT32", _t("x", "FP32", (1,), 1.0)),
    _error("shape-against-spec", "a 2-D tensor for a declared 1-D input", "int32", 400,
           "input 'x' has shape [2, 1], model 'int32' expects [-1]", _t("x", "INT32", (2, 1), 1, 2)),
    _error("shape-negative", "a dimension of -4", "echo", 400,
           "input 'x' has shape [-4]; dimensions cannot be negative", _t("x", "FP32", (-4,), raw=b"\0" * 16),
           pairs=("raw",)),
    _error("shape-too-many-dims", "65 dimensions", "echo", 400, "input 'x' has 65 dimensions; at most 64",
           _t("x", "FP32", (1,) * 65, 1.0)),
    _error("shape-product-overflow", "dimensions whose product overflows int64", "echo", 400,
           "input 'x': shape [4611686018427387904, 4] holds more bytes than int64 can count",
           _t("x", "INT8", (2**62, 4), 1)),
    _error("shape-empty-but-huge", "a zero dimension beside a huge one", "echo", 400,
           "input 'x': shape [0, 4611686018427387904] holds more bytes than int64 can count",
           _t("x", "FP32", (0, 2**62))),
    _error("data-too-few", "2 elements for shape [3]", "echo", 400,
           "input 'x': data has 2 elements, shape [3] needs 3",
           _t("x", "INT32", (3,), 1, 2), pairs=("typed",)),
    _error("data-too-many", "4 elements for shape [3]", "echo", 400,
           "input 'x': data has 4 elements, shape [3] needs 3",
           _t("x", "INT32", (3,), 1, 2, 3, 4), pairs=("typed",)),
    _error("bytes-too-few", "8 bytes for INT32 of shape [3]", "echo", 400,
           "input 'x' has 8 bytes of binary data, but INT32 of shape [3] takes 12 bytes",
           _t("x", "INT32", (3,), raw=b"\0" * 8), pairs=("raw",)),
    _error("bytes-too-many", "17 bytes for FP32 of shape [4]", "echo", 400,
           "input 'x' has 17 bytes of binary data, but FP32 of shape [4] takes 16 bytes",
           _t("x", "FP32", (4,), raw=b"\0" * 17), pairs=("raw",)),
    _error("bytes-partial-element", "2 bytes for FP32 of shape [1]", "echo", 400,
           "input 'x' has 2 bytes of binary data, but FP32 of shape [1] takes 4 bytes",
           _t("x", "FP32", (1,), raw=b"\0" * 2), pairs=("raw",)),
    _error("int8-out-of-range", "-129 as INT8", "echo", 400,
           "input 'x': INT8 element 1 is -129, out of range [-128, 127]",
           _t("x", "INT8", (2,), 1, -129), pairs=("typed",)),
    _error("uint16-out-of-range", "65536 as UINT16, in a 2-D tensor", "echo", 400,
           "input 'x': UINT16 element 3 is 65536, out of range [0, 65535]", _t("x", "UINT16", (2, 2), 1, 2, 3, 65536),
           pairs=("typed",)),
    _error("bool-not-0-or-1", "a BOOL byte of 7", "echo", 400, "input 'x': BOOL bytes must be 0 or 1",
           _t("x", "BOOL", (2,), raw=b"\x01\x07"), pairs=("raw",)),
    _error("bytes-length-past-tensor", "a BYTES element claiming 50 bytes of 5", "echo", 400,
           "input 'x': element 0 claims 50 bytes, only 5 remain",
           _t("x", "BYTES", (1,), raw=(50).to_bytes(4, "little") + b"abcde"), pairs=("raw",)),
    _error("bytes-length-cut", "the tensor ends inside an element's length", "echo", 400,
           "input 'x': binary data ends inside the length of element 1",
           _t("x", "BYTES", (2,), raw=b"\x02\0\0\0ab\x01\0"), pairs=("raw",)),
    _error("bytes-too-few-for-shape", "8 bytes for 2**40 BYTES elements", "echo", 400,
           "input 'x': 8 bytes cannot hold 1099511627776 BYTES elements", _t("x", "BYTES", (2**40,), raw=b"\0" * 8),
           pairs=("raw",)),
    _error("bytes-leftover", "bytes left over after the last element", "echo", 400,
           "input 'x': 3 bytes remain after the 1 BYTES elements", _t("x", "BYTES", (1,), raw=b"\x02\0\0\0abxyz"),
           pairs=("raw",)),
    _error("classification-zero", "classification 0", "scores", 400,
           "output 'scores': parameter classification must be a positive integer, got 0", _X4,
           outputs=(Output("scores", 0),)),
    _error("classification-negative", "classification -2", "scores", 400,
           "output 'scores': parameter classification must be a positive integer, got -2", _X4,
           outputs=(Output("scores", -2),)),
    _error("classification-bytes-declared", "classification of a declared BYTES output", "bytes", 400,
           "output 'y' is BYTES; classification needs a numeric output", _t("x", "BYTES", (1,), b"a"),
           outputs=(Output("y", 1),)),
    _error("classification-bytes-undeclared", "classification of a BYTES output nobody declared", "echo", 400,
           "output 'x' is BYTES; classification needs a numeric output", _t("x", "BYTES", (1,), b"a"),
           outputs=(Output("x", 1),)),
    _error("classification-scalar", "classification of a scalar", "echo", 400,
           "output 'x' has shape [], which has no classes to rank", _t("x", "FP32", (), 1.0),
           outputs=(Output("x", 1),)),
    # -- a client's 20 kB name echoed: cut, so that gRPC can send the error (its status limit is 16 KiB) -------
    _error("long-model-name", "inference on a model with a 20 kB name", LONG, 404,
           f"Request for unknown model: '{'n' * 100}...{'n' * 100}' (20000 characters) is not found", _F),
    _error("long-input-name", "an unexpected input with a 20 kB name", "two", 400,
           f"unexpected input '{'n' * 100}...{'n' * 100}' (20000 characters); model 'two' takes a, b",
           _A, _B, _t(LONG, "INT32", (1,), 3)),
    _error("long-output-name", "an unknown output with a 20 kB name", "two", 400,
           f"unknown output '{'n' * 100}...{'n' * 100}' (20000 characters)", _A, _B, outputs=(Output(LONG),)),
    _error("long-datatype", "a 20 kB datatype", "echo", 400,
           f"input 'x' has datatype '{'n' * 100}...{'n' * 100}' (20000 characters); the datatypes are",
           _t("x", LONG, (1,), raw=b"\0"), pairs=("raw",)),
]  # fmt: skip


# -- a case as a REST request (tests/e2e/test_parity.py also sends it over gRPC; tests/rest/hostile_cases.py
# documents it) --


@dataclass(frozen=True)
class RestRequest:
    method: str
    path: str  # from the mount: /v2/...
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


def model_path(case: Case) -> str:
    path = f"/v2/models/{quote(case.model, safe='')}"
    return path + (f"/versions/{quote(case.version, safe='')}" if case.version else "")


_GET_PATHS = {"live": "/v2/health/live", "ready": "/v2/health/ready", "server_metadata": "/v2"}


def rest_request(case: Case, pair: str) -> RestRequest:
    """The case as REST says it: for inference, JSON data for the "typed" pair, binary tensors for "raw"."""
    if case.rpc in _GET_PATHS:
        return RestRequest("GET", _GET_PATHS[case.rpc])
    if case.rpc == "metadata":
        return RestRequest("GET", model_path(case))
    if case.rpc == "model_ready":
        return RestRequest("GET", f"{model_path(case)}/ready")
    if case.rpc == "load":
        return RestRequest("POST", f"/v2/repository/models/{quote(case.model, safe='')}/load")
    inputs = []
    parts = []
    for tensor in case.inputs:
        item: dict[str, Any] = {"name": tensor.name, "shape": list(tensor.shape), "datatype": tensor.datatype}
        if pair == "typed":
            item["data"] = [value.decode() if isinstance(value, bytes) else value for value in tensor.data or ()]
        else:
            parts.append(tensor.packed())
            item["parameters"] = {"binary_data_size": len(parts[-1])}
        inputs.append(item)
    request: dict[str, Any] = {"inputs": inputs}
    if case.request_id:
        request["id"] = case.request_id
    if case.outputs is not None:
        request["outputs"] = [
            {"name": output.name}
            if output.classification is None
            else {"name": output.name, "parameters": {"classification": output.classification}}
            for output in case.outputs
        ]
    parameters = {**case.parameters, **({"binary_data_output": True} if pair == "raw" else {})}
    if parameters:
        request["parameters"] = parameters
    head = json.dumps(request, separators=(",", ":")).encode()
    headers = {"content-type": "application/json", **({IHCL: str(len(head))} if pair == "raw" else {})}
    return RestRequest("POST", f"{model_path(case)}/infer", head + b"".join(parts), headers)
