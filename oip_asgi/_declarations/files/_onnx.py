"""ONNX files, run by onnxruntime: every tensor's name, datatype and shape read from the session."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BadRequest
from ._common import FileModel, ModelFileError, Runner, check_options, require, spec

_DATATYPES = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(bfloat16)": "BF16",
    "tensor(string)": "BYTES",
}

_ZIPMAP_HELP = (
    "export the classifier without it: skl2onnx's to_onnx(model, X, options={'zipmap': False}) "
    "(or convert_sklearn(..., options={id(model): {'zipmap': False}})), which gives the probabilities "
    "as one [rows, classes] tensor"
)

# ai.onnx.ml's classifiers carry their class names; the probabilities they feed are the output to label.
_CLASSIFIERS = ("LinearClassifier", "SVMClassifier", "TreeEnsembleClassifier", "TreeEnsemble", "ZipMap")


def read(file: Path, options: dict[str, Any], declared: Mapping[str, Any]) -> FileModel:
    check_options(options, ("providers", "session_options"), "onnx")
    ort = require("onnxruntime", f"model file {file.name!r}")
    providers = options.get("providers") or _default_providers(ort)
    try:
        session = ort.InferenceSession(str(file), sess_options=options.get("session_options"), providers=providers)
    except Exception as exc:  # onnxruntime's own errors carry no common base
        raise ModelFileError(f"cannot load ONNX model file {str(file)!r}: {type(exc).__name__}: {exc}") from exc
    inputs = [spec(arg.name, _datatype(arg, file, "input"), _shape(arg.shape)) for arg in session.get_inputs()]
    outputs = [spec(arg.name, _datatype(arg, file, "output"), _shape(arg.shape)) for arg in session.get_outputs()]
    metadata = session.get_modelmeta()
    properties = {key: str(value) for key, value in metadata.custom_metadata_map.items()}
    if metadata.producer_name:
        properties["producer"] = metadata.producer_name
    properties["providers"] = ",".join(session.get_providers())
    return FileModel(
        predict=_Session(session, {arg.name: arg.type for arg in session.get_inputs()}, file.name),
        inputs=inputs,
        outputs=outputs,
        labels=_labels(file, outputs),
        properties=properties,
        batches_rows=_batch_first(session),
    )


def _batch_first(session: Any) -> bool:
    """Whether every tensor's first dimension is one variable one: all unknown (skl2onnx's), or all one symbol.

    Triton's auto-complete takes any variable first dimensions as the batch; two different symbols ("N", "M")
    may differ in a request, which one batch dimension would refuse.
    """
    firsts = {
        arg.shape[0] if arg.shape and not isinstance(arg.shape[0], int) else "fixed"
        for arg in (*session.get_inputs(), *session.get_outputs())
    }
    return len(firsts) == 1 and "fixed" not in firsts


def _default_providers(ort: Any) -> list[str]:
    available = ort.get_available_providers()
    # onnxruntime-gpu lists CUDA; on a machine without a GPU the session falls back to the CPU.
    return [name for name in ("CUDAExecutionProvider", "CPUExecutionProvider") if name in available] or available


def _datatype(arg: Any, file: Path, kind: str) -> str:
    datatype = _DATATYPES.get(arg.type)
    if datatype is not None:
        return datatype
    if kind == "output" and arg.type.startswith("seq(map("):
        raise ModelFileError(
            f"ONNX model file {str(file)!r}: output {arg.name!r} is {arg.type}, a ZipMap of class probabilities, "
            f"which is no tensor; " + _ZIPMAP_HELP
        )
    raise ModelFileError(f"ONNX model file {str(file)!r}: {kind} {arg.name!r} is {arg.type}, which is no tensor")


def _shape(dimensions: Sequence[Any]) -> list[int]:
    # A symbolic dimension ("batch_size", "N") or an unknown one (None) is variable.
    return [dimension if isinstance(dimension, int) and dimension >= 0 else -1 for dimension in dimensions]


def _labels(file: Path, outputs: Sequence[Any]) -> dict[str, list[str]]:
    """Class names for the probability output of a classic ML classifier (read with the onnx package).

    Only a graph that looks like one (a label output and a [rows, classes] number output) is read again.
    """
    scores = [o for o in outputs if len(o.shape) == 2 and o.datatype in ("FP32", "FP64")]
    predicted = [o for o in outputs if len(o.shape) == 1 and o.datatype in ("INT64", "BYTES")]
    if len(scores) != 1 or len(predicted) != 1:
        return {}
    try:
        import onnx
    except ImportError:  # onnxruntime installed by hand, without the extra: served, unlabelled
        return {}
    graph = onnx.load(str(file), load_external_data=False).graph
    for node in graph.node:
        if node.domain == "ai.onnx.ml" and node.op_type in _CLASSIFIERS:
            for attribute in node.attribute:
                if attribute.name in ("classlabels_strings", "classlabels_int64s", "classlabels_ints"):
                    values = attribute.strings or attribute.ints
                    names = [v.decode() if isinstance(v, bytes) else str(v) for v in values]
                    if names and scores[0].shape[1] in (-1, len(names)):
                        return {scores[0].name: names}
    return {}


class _Session(Runner):
    """An onnxruntime session called with the inputs by name; onnxruntime runs it without the GIL."""

    def __init__(self, session: Any, types: Mapping[str, str], file: str) -> None:
        self.session = session
        self.strings = {name for name, type in types.items() if type == "tensor(string)"}
        self.outputs = [arg.name for arg in session.get_outputs()]
        self.file = file

    def __repr__(self) -> str:
        return f"<ONNX model {self.file!r}>"

    def __call__(self, **inputs: np.ndarray) -> Mapping[str, np.ndarray]:
        feeds = {name: _text(array) if name in self.strings else array for name, array in inputs.items()}
        try:
            results = self.session.run(self.outputs, feeds)
        except Exception as exc:
            # onnxruntime's InvalidArgument names the dimension or type it refused: the client's input.
            if type(exc).__name__ == "InvalidArgument":
                raise BadRequest(f"model {self.file!r} refused the input: {exc}") from exc
            raise
        return dict(zip(self.outputs, results, strict=True))


def _text(array: np.ndarray) -> np.ndarray:
    """BYTES as onnxruntime's strings take them: str objects."""
    text: np.ndarray = np.vectorize(
        lambda value: value.decode() if isinstance(value, bytes) else value, otypes=[object]
    )(array)
    return text
