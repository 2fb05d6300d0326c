"""What a user declares (specs, labels, the model's signature), checked when the `Model` is built.

A mistake here would otherwise surface as a 500 on every request, or not at all: each check names
the argument and says what to write instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .datatypes import DATATYPES, bfloat16, datatype_of
from .extras import install_line


def checked_datatype(value: Any, where: str) -> str:
    """`value` when it is a protocol datatype; a ValueError that suggests the one meant otherwise."""
    if isinstance(value, str) and value in DATATYPES:
        if value == "BF16" and bfloat16() is None:
            raise ValueError(f"{where}: BF16 needs the ml_dtypes package on the server: {install_line('bf16')}")
        return value
    meant = _datatype_meant(value)
    hint = f"; write {meant!r}" if meant else ""
    raise ValueError(f"{where}: datatype {value!r} is not a protocol datatype{hint} (one of {', '.join(DATATYPES)})")


def _datatype_meant(value: Any) -> str | None:
    """The protocol datatype a numpy dtype, a Triton config name ("TYPE_FP32") or a lower-case name stands for."""
    if isinstance(value, str):
        name = value.upper().removeprefix("TYPE_")
        if name in DATATYPES:
            return name
        if name == "STRING":  # Triton's config calls BYTES TYPE_STRING
            return "BYTES"
    try:
        return datatype_of(np.dtype(value))
    except TypeError:
        return None


def checked_shape(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{where}: shape must be a list of integers (-1 for a variable dimension), got {value!r}")
    if any(isinstance(dim, bool) or not isinstance(dim, int) or dim < -1 for dim in value):
        raise ValueError(f"{where}: shape {list(value)} must hold integers >= -1 (-1 for a variable dimension)")
    return tuple(value)


def checked_specs(value: Any, kind: str, spec_type: type) -> tuple[Any, ...] | None:
    """`inputs` or `outputs`: None, or a list of TensorSpec with distinct names."""
    if value is None:
        return None
    if isinstance(value, Mapping) or not isinstance(value, Sequence) or isinstance(value, str):
        raise TypeError(
            f"{kind} must be a list of TensorSpec, got {type(value).__name__}; "
            f"write {kind}=[TensorSpec('name', 'FP32', [-1, 4]), ...]"
        )
    specs = tuple(value)
    for spec in specs:
        if not isinstance(spec, spec_type):
            raise TypeError(
                f"{kind} must hold TensorSpec objects, got {spec!r}; write TensorSpec(name, datatype, shape)"
            )
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate {kind[:-1]} names in {names}")
    return specs


# Arguments a callable may declare besides its inputs: the request's parameters, and each input's.
REQUEST_ARGUMENTS = ("parameters", "input_parameters")


def takes_argument(function: Callable[..., Any], name: str) -> bool:
    """Whether `function` takes `name` by keyword (a ``**kwargs`` does not count: it would get every input)."""
    try:
        parameter = inspect.signature(function).parameters.get(name)
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)


def is_async(function: Callable[..., Any]) -> bool:
    # Instances with an `async def __call__` count too.
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(type(function).__call__)


def is_generator(function: Callable[..., Any]) -> bool:
    """Whether calling `function` makes a generator (sync or async): a model that answers over time."""
    call = type(function).__call__  # an instance whose __call__ is one counts too
    kinds = (inspect.isgeneratorfunction, inspect.isasyncgenfunction)
    return any(kind(candidate) for kind in kinds for candidate in (function, call))


def check_decoupled(decoupled: bool, max_batch_size: Any) -> None:
    """A decoupled model answers each request on its own: its responses cannot be split out of a batch's."""
    if decoupled and max_batch_size is not None:
        raise ValueError(
            "a decoupled model (a generator, which answers over time) cannot batch: leave max_batch_size unset; "
            "each request runs its own generator"
        )


def check_signature(predict: Callable[..., Any], inputs: Sequence[Any] | None) -> None:
    """The callable must accept each declared input by name, and ask for nothing else."""
    if inputs is None:
        return
    try:
        parameters = inspect.signature(predict).parameters
    except (TypeError, ValueError):  # a builtin or extension callable: nothing to read
        return
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters.values()):
        return
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    declared = {spec.name: spec for spec in inputs}
    for spec in inputs:
        parameter = parameters.get(spec.name)
        if parameter is None or parameter.kind not in keyword:
            raise TypeError(
                f"model {_name(predict)} does not take input {spec.name!r} as a keyword argument; "
                f"its parameters are ({', '.join(parameters)}), the declared inputs {', '.join(declared)}"
            )
        if spec.optional and parameter.default is parameter.empty:
            raise TypeError(
                f"model {_name(predict)}: input {spec.name!r} is optional, so its parameter needs a default "
                f"({spec.name}=None)"
            )
    for name, parameter in parameters.items():
        required = parameter.default is parameter.empty and parameter.kind is not parameter.VAR_POSITIONAL
        if required and name not in declared and name not in REQUEST_ARGUMENTS:
            raise TypeError(
                f"model {_name(predict)} requires argument {name!r}, which is not a declared input "
                f"({', '.join(declared) or 'none'}); declare it, give it a default, or rename it"
            )


def check_labels(labels: Any, outputs: Sequence[Any] | None) -> None:
    """Labels for outputs that exist, and enough of them for a fixed class axis."""
    if labels is None:
        return
    if isinstance(labels, Mapping):
        by_output = dict(labels)
        if outputs is not None:
            declared = {spec.name for spec in outputs}
            unknown = [name for name in by_output if name not in declared]
            if unknown:
                raise ValueError(
                    f"labels for {', '.join(map(repr, unknown))}, which the model does not declare as outputs "
                    f"({', '.join(sorted(declared)) or 'none'})"
                )
    elif isinstance(labels, Sequence) and not isinstance(labels, str):
        by_output = {spec.name: labels for spec in outputs or ()}
    else:
        raise TypeError(f"labels must be a list of class names, or a mapping of output name to one; got {labels!r}")
    for spec in outputs or ():
        names = by_output.get(spec.name)
        classes = spec.shape[-1] if spec.shape else -1
        if names is not None and classes != -1 and len(names) < classes:
            raise ValueError(f"output {spec.name!r} has {classes} classes but {len(names)} labels")


def check_batching(
    max_batch_size: Any, max_batch_delay: Any, inputs: Sequence[Any] | None, outputs: Sequence[Any] | None
) -> None:
    """A batched model declares every input and output with a variable first (batch) dimension."""
    if max_batch_size is None:
        return
    if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 1:
        raise ValueError(f"max_batch_size must be a whole number of rows, at least 1; got {max_batch_size!r}")
    if isinstance(max_batch_delay, bool) or not isinstance(max_batch_delay, (int, float)) or max_batch_delay < 0:
        raise ValueError(f"max_batch_delay is in seconds and at least 0; got {max_batch_delay!r}")
    if inputs is None or outputs is None:
        raise ValueError("a batched model (max_batch_size) declares its inputs and outputs, to know their batch axis")
    fixed = [spec.name for spec in (*inputs, *outputs) if not spec.shape or spec.shape[0] != -1]
    if fixed:
        raise ValueError(
            f"a batched model (max_batch_size) declares a variable first dimension (-1) on every input and "
            f"output; {', '.join(map(repr, fixed))} do not"
        )


def _name(predict: Callable[..., Any]) -> str:
    return repr(getattr(predict, "__qualname__", None) or type(predict).__name__)
