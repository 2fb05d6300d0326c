"""PyTorch files: `torch.export` programs (.pt2), whose signature gives the tensors, and TorchScript,
whose tensors the caller declares (TorchScript says nothing of them, and is deprecated upstream)."""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..datatypes import native_dtype
from ..spec import TensorSpec
from ._common import FileModel, ModelFileError, Runner, check_options, require, spec

_DATATYPES = {
    "torch.bool": "BOOL",
    "torch.uint8": "UINT8",
    "torch.uint16": "UINT16",
    "torch.uint32": "UINT32",
    "torch.uint64": "UINT64",
    "torch.int8": "INT8",
    "torch.int16": "INT16",
    "torch.int32": "INT32",
    "torch.int64": "INT64",
    "torch.float16": "FP16",
    "torch.bfloat16": "BF16",
    "torch.float32": "FP32",
    "torch.float64": "FP64",
}


def read(file: Path, options: dict[str, Any], declared: Mapping[str, Any]) -> FileModel:
    check_options(options, ("device",), "torch")
    torch = require("torch", f"model file {file.name!r}")
    device = torch.device(options.get("device", "cpu"))
    if _is_torchscript(file):
        return _torchscript(torch, file, device, declared)
    try:
        program = torch.export.load(str(file))
    except Exception as exc:  # torch's own errors carry no common base
        raise ModelFileError(
            f"cannot load PyTorch model file {str(file)!r} (a torch.export program, .pt2): {type(exc).__name__}: {exc}"
        ) from exc
    nodes = {node.name: node for node in program.graph.nodes}
    inputs = [_spec(name, nodes[name].meta["val"], file) for name in program.graph_signature.user_inputs]
    results = next(node for node in program.graph.nodes if node.op == "output").args[0]
    values = [node.meta["val"] for node in results][: len(program.graph_signature.user_outputs)]
    names = _output_names(program.call_spec.out_spec, len(values))
    outputs = [_spec(name, value, file) for name, value in zip(names, values, strict=True)]
    module = program.module().to(device)
    return FileModel(
        predict=_Module(torch, module, [s.name for s in inputs], [s.name for s in outputs], device, file.name),
        inputs=inputs,
        outputs=outputs,
        platform="torch_export",
        properties={"device": str(device)},
    )


def _is_torchscript(file: Path) -> bool:
    try:
        with zipfile.ZipFile(file) as archive:
            return any(name.endswith("constants.pkl") for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _torchscript(torch: Any, file: Path, device: Any, declared: Mapping[str, Any]) -> FileModel:
    inputs, outputs = declared.get("inputs"), declared.get("outputs")
    if not inputs or not outputs:
        raise ModelFileError(
            f"model file {str(file)!r} is TorchScript, which does not say what its tensors are: declare them, "
            f"Model.from_file({str(file)!r}, inputs=[TensorSpec(...)], outputs=[TensorSpec(...)]), "
            f"or export the model with torch.export to a .pt2 file, which does"
        )
    try:
        module = torch.jit.load(str(file), map_location=device).eval()
    except Exception as exc:
        raise ModelFileError(f"cannot load TorchScript model file {str(file)!r}: {type(exc).__name__}: {exc}") from exc
    input_names = [s.name for s in inputs]
    return FileModel(
        predict=_Module(torch, module, input_names, [s.name for s in outputs], device, file.name),
        inputs=list(inputs),
        outputs=list(outputs),
        platform="pytorch_libtorch",
        properties={"device": str(device)},
    )


def _spec(name: str, value: Any, file: Path) -> TensorSpec:
    datatype = _DATATYPES.get(str(getattr(value, "dtype", None)))
    if datatype is None:
        raise ModelFileError(f"PyTorch model file {str(file)!r}: {name!r} is {value!r}, which is no tensor we serve")
    # A dynamic dimension is a symbol (SymInt); a fixed one a plain int.
    return spec(name, datatype, [dimension if isinstance(dimension, int) else -1 for dimension in value.shape])


def _output_names(tree: Any, count: int) -> list[str]:
    """A returned dict's keys; else ``output_0``, ``output_1``, ... in the order the program returns them."""
    if tree is not None and tree.type is dict and len(tree.context) == count:
        return [str(key) for key in tree.context]
    return [f"output_{index}" for index in range(count)]


class _Module(Runner):
    """A module called under `torch.inference_mode()` on its device, numpy in and out."""

    def __init__(
        self, torch: Any, module: Any, inputs: Sequence[str], outputs: list[str], device: Any, file: str
    ) -> None:
        self.torch = torch
        self.module = module
        self.input_names = list(inputs)
        self.all_outputs = list(outputs)
        self.outputs = list(outputs)
        self.device = device
        self.file = file

    def __repr__(self) -> str:
        return f"<PyTorch model {self.file!r} on {self.device}>"

    def __call__(self, **inputs: np.ndarray) -> Mapping[str, np.ndarray]:
        with self.torch.inference_mode():
            arguments = [self._tensor(inputs[name]) for name in self.input_names]
            result = self.module(*arguments)
        if isinstance(result, dict) and set(self.outputs) <= set(result):  # a TorchScript dict, by its keys
            return {name: self._array(result[name]) for name in self.outputs}
        by_name = dict(zip(self.all_outputs, _leaves(result), strict=False))
        return {name: self._array(by_name[name]) for name in self.outputs}

    def _tensor(self, array: np.ndarray) -> Any:
        if array.dtype.name == "bfloat16":  # numpy has no bfloat16 torch can read: pass its bits
            return self.torch.from_numpy(array.view(np.int16).copy()).view(self.torch.bfloat16).to(self.device)
        # torch warns on arrays it cannot write to (a request's buffer); the copy is the model's own.
        return self.torch.from_numpy(array if array.flags.writeable else array.copy()).to(self.device)

    def _array(self, tensor: Any) -> np.ndarray:
        tensor = tensor.detach().cpu()
        if tensor.dtype == self.torch.bfloat16:
            bits: np.ndarray = tensor.view(self.torch.int16).numpy()
            return bits.view(native_dtype("BF16"))
        array: np.ndarray = tensor.numpy()
        return array


def _leaves(result: Any) -> list[Any]:
    """The tensors of a (nested) tuple, list or dict result, in order, as torch.export flattens them."""
    if isinstance(result, (tuple, list)):
        return [leaf for item in result for leaf in _leaves(item)]
    if isinstance(result, dict):
        return [leaf for item in result.values() for leaf in _leaves(item)]
    return [result]
