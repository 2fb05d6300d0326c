"""One inference, whatever the wire: the decoded request, and the model's result made into checked outputs.

A wire decodes its request into a `DecodedRequest`; the core calls the model with it and hands the
result to `model_outputs`, which casts every output to its declared datatype, checks its shape,
applies classification, and fails with the same messages on every wire.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
import numpy as np

from .._declarations.errors import BadRequest, ModelError
from .._declarations.result import Result
from .classification import classify

# Where the wires have long imported them from: named here too.
from .request import DecodedRequest, RequestedOutput
from .serving import ServedModel
from .tensors import output_array, shape_text

_ABSENT: Any = object()
_NONE = itertools.repeat(None)  # each undeclared output's request: none
_ndarray = np.ndarray
DEFAULT_OUTPUT = "OUTPUT0"  # the name a single unnamed result gets when a model declares no outputs


class OutputTensor(msgspec.Struct, gc=False):  # a Struct: built for every response, cheaper than a dataclass
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
    if type(result) is dict:  # the usual result: a mapping of output name to value
        produced: Mapping[Any, Any] = result
    else:
        if isinstance(result, Result):
            parameters = _parameters(model, result.parameters, "response parameters")
            output_parameters = result.output_parameters
            result = result.outputs
        produced = _produced_outputs(model, result)
    wanted: Iterable[tuple[Any, RequestedOutput | None]]
    if request.outputs is not None:
        wanted = [(output.name, output) for output in request.outputs]
    elif model.outputs is not None:
        wanted = model.every_output
    else:
        for output in produced:
            if not isinstance(output, str):  # it would go out as a number or base64 text: a name nobody asked for
                raise ModelError(f"model '{model.name}' returned an output keyed {output!r}; output names are strings")
        wanted = zip(produced, _NONE, strict=False)  # (not a comprehension: its frame costs more than these two calls)
    if model.output_names is not None and not produced.keys() <= model.output_names:
        undeclared = [output for output in produced if model.output_spec(output) is None]
        raise ModelError(f"model '{model.name}' returned undeclared outputs: {', '.join(map(repr, undeclared))}")
    if output_parameters:
        unknown = [output for output in output_parameters if output not in produced]
        if unknown:
            names = ", ".join(map(repr, unknown))
            raise ModelError(f"model '{model.name}' returned parameters for outputs it did not return: {names}")

    outputs: list[OutputTensor] = []
    forms = model.output_forms
    for output, requested in wanted:
        value = produced.get(output, _ABSENT)
        if value is _ABSENT:
            if model.outputs is None:
                raise BadRequest(
                    f"model '{model.name}' did not produce output '{output}' (it produced {', '.join(produced)})"
                )
            raise ModelError(f"model '{model.name}' did not return its declared output '{output}'")
        # An array of a dtype and shape this output was found to go out as it is: nothing to cast or check again
        # (a BYTES one's element is checked: an object array may hold anything). A stream's every token passes here.
        form = forms.get(output)
        if (
            form is not None
            and type(value) is _ndarray
            and value.dtype in form[1]
            and value.shape in form[2]
            and (not form[3] or (value.size == 1 and type(value.item()) is bytes))
        ):
            array, datatype = value, form[0]
        else:
            array, datatype = _output_array(model, output, value)
        if requested is not None and requested.classification is not None:
            labels = model.labels_for(output)
            if labels is not None and array.ndim and array.shape[-1] > len(labels):
                raise ModelError(
                    f"model '{model.name}' has {len(labels)} labels for output '{output}', "
                    f"whose class axis holds {array.shape[-1]}"
                )
            array = classify(output, array, datatype, requested.classification, labels)
            datatype = "BYTES"
        if output_parameters and (own := output_parameters.get(output)) is not None:
            outputs.append(OutputTensor(output, array, datatype, _output_parameters(model, output, own), requested))
        else:
            outputs.append(OutputTensor(output, array, datatype, None, requested))
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
    if type(value) is np.ndarray and (array is value or value.dtype == object):
        _found_as_it_is(model, output, datatype, value)  # (a BYTES array of objects is checked on each response)
    return array, datatype


_FORMS = 16  # the dtypes and shapes kept an output: beyond them (a batch's every size), the checks run again
# The undeclared outputs kept a model: their names come from what it returns (an identity's, from the request).
_UNDECLARED_FORMS = 16


def _found_as_it_is(model: ServedModel, output: str, datatype: str, value: np.ndarray) -> None:
    """Remember that `value`'s dtype and shape go out as they are for `output` of `model`.

    A declared output's datatype is its spec's, whatever dtype comes. An undeclared one's is its first array's:
    another dtype (another datatype) is never remembered beside it, and only so many such outputs are kept.
    """
    forms = model.output_forms
    form = forms.get(output)
    if form is None:
        if model.outputs is None and len(forms) >= _UNDECLARED_FORMS:
            return
        form = forms[output] = (datatype, [], set(), datatype == "BYTES")
    elif form[0] != datatype:
        return
    if value.dtype not in form[1] and len(form[1]) < _FORMS:
        form[1].append(value.dtype)
    if len(form[2]) < _FORMS:
        form[2].add(value.shape)


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
