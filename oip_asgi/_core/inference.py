"""One inference, whatever the wire: the decoded request, and the model's result made into checked outputs.

A wire decodes its request into a `DecodedRequest`; the core calls the model with it and hands the
result to `model_outputs`, which casts every output to its declared datatype, checks its shape,
applies classification, and fails with the same messages on every wire.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._declarations.errors import BadRequest, ModelError
from .._declarations.result import Result
from .classification import classify

# Where the wires have long imported them from: named here too.
from .request import DecodedRequest, RequestedOutput
from .serving import ServedModel
from .tensors import output_array, shape_text

DEFAULT_OUTPUT = "OUTPUT0"  # the name a single unnamed result gets when a model declares no outputs


@dataclass(slots=True)
class OutputTensor:
    name: str
    array: np.ndarray
    datatype: str
    parameters: dict[str, Any] | None = None  # the model's, from a `Result`
    requested: RequestedOutput | None = None


# Parameters the protocol gives a meaning in responses: a model may not set them.
_RESERVED_OUTPUT_PARAMETERS = frozenset({"binary_data_size", "binary_data", "classification"})


def model_outputs(
    model: ServedModel, request: DecodedRequest, result: Any
) -> tuple[list[OutputTensor], dict[str, Any] | None]:
    """The outputs to send, in order, and the response's parameters, from what the model returned."""
    parameters = output_parameters = None
    if isinstance(result, Result):
        parameters = _parameters(model, result.parameters, "response parameters")
        output_parameters = result.output_parameters
        result = result.outputs
    produced = result if type(result) is dict else _produced_outputs(model, result)
    wanted: Iterable[tuple[Any, RequestedOutput | None]]
    if request.outputs is not None:
        wanted = [(output.name, output) for output in request.outputs]
    elif model.outputs is not None:
        wanted = model.every_output
    else:
        wanted = dict.fromkeys(produced).items()  # (name, None) pairs, made in C
    if model.outputs is not None and not all(map(model.output_spec, produced)):  # C calls, no frame of ours
        undeclared = [output for output in produced if model.output_spec(output) is None]
        if undeclared:
            raise ModelError(f"model '{model.name}' returned undeclared outputs: {', '.join(map(repr, undeclared))}")
    if output_parameters:
        unknown = [output for output in output_parameters if output not in produced]
        if unknown:
            names = ", ".join(map(repr, unknown))
            raise ModelError(f"model '{model.name}' returned parameters for outputs it did not return: {names}")

    outputs: list[OutputTensor] = []
    for output, requested in wanted:
        if not isinstance(output, str):  # it would go out as a number or base64 text: a name nobody asked for
            raise ModelError(f"model '{model.name}' returned an output keyed {output!r}; output names are strings")
        if output not in produced:
            if model.outputs is None:
                raise BadRequest(
                    f"model '{model.name}' did not produce output '{output}' (it produced {', '.join(produced)})"
                )
            raise ModelError(f"model '{model.name}' did not return its declared output '{output}'")
        array, datatype = _output_array(model, output, produced[output])
        if requested is not None and requested.classification is not None:
            labels = model.labels_for(output)
            if labels is not None and array.ndim and array.shape[-1] > len(labels):
                raise ModelError(
                    f"model '{model.name}' has {len(labels)} labels for output '{output}', "
                    f"whose class axis holds {array.shape[-1]}"
                )
            array = classify(output, array, datatype, requested.classification, labels)
            datatype = "BYTES"
        own = output_parameters.get(output) if output_parameters else None
        if own is not None:
            own = _output_parameters(model, output, own)
        outputs.append(OutputTensor(output, array, datatype, own, requested))
    return outputs, parameters


def _produced_outputs(model: ServedModel, result: Any) -> Mapping[Any, Any]:
    if isinstance(result, Mapping):
        return result
    if result is None:
        raise ModelError(f"model '{model.name}' returned nothing (None); return its outputs")
    if model.outputs is None:
        if isinstance(result, (list, tuple)) and any(isinstance(item, np.ndarray) for item in result):
            # onnxruntime's session.run returns such a list: the outputs' names are lost, and numpy
            # would stack (or fail to stack) the arrays into one.
            raise ModelError(
                f"model '{model.name}' returned a {type(result).__name__} of {len(result)} arrays; "
                "return a mapping of output name to array (or declare its outputs)"
            )
        return {DEFAULT_OUTPUT: result}
    if len(model.outputs) == 1:
        return {model.outputs[0].name: result}
    raise ModelError(
        f"model '{model.name}' returned a single {type(result).__name__} "
        f"but declares {len(model.outputs)} outputs; return a mapping"
    )


def _output_array(model: ServedModel, output: str, value: Any) -> tuple[np.ndarray, str]:
    spec = model.output_spec(output)
    if value is None:
        raise ModelError(f"model '{model.name}' returned nothing (None) for output '{output}'")
    array, datatype = output_array(model.name, output, value, spec.datatype if spec else None)
    # A Triton Python model's outputs go out in the shape it made them (as Triton sends them: its python
    # backend checks none against the config, and Triton's own tests rely on that).
    if spec is not None and not model.takes_requests and not spec.accepts_shape(array.shape):
        raise ModelError(
            f"model '{model.name}' returned output '{output}' with shape {shape_text(array.shape)}, "
            f"declared {shape_text(spec.shape)}"
        )
    return array, datatype


def _parameters(model: ServedModel, value: Any, what: str) -> dict[str, Any] | None:
    """Parameters as the protocol has them: names to a string, a number or a boolean."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ModelError(f"model '{model.name}' returned {what} of type {type(value).__name__}; return a mapping")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, (str, int, float, bool)):
            raise ModelError(
                f"model '{model.name}' returned {what} with {key!r}: {item!r}; "
                "parameters map names to a string, a number or a boolean"
            )
    return dict(value)


def _output_parameters(model: ServedModel, output: str, value: Any) -> dict[str, Any] | None:
    parameters = _parameters(model, value, f"parameters for output '{output}'")
    reserved = sorted(_RESERVED_OUTPUT_PARAMETERS.intersection(parameters or ()))
    if reserved:
        raise ModelError(
            f"model '{model.name}' set {', '.join(reserved)} on output '{output}', which the protocol reserves"
        )
    return parameters
