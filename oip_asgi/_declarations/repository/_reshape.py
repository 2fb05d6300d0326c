"""Triton's ``reshape`` of a config's tensors: the client sees the declared ``dims``, the model the reshaped shape.

A per-row scalar is declared ``dims: [1]`` with ``reshape: { shape: [] }``: a request's ``[rows, 1]``
reaches the model as ``[rows]``, and the model's ``[rows]`` answers as ``[rows, 1]``. The model's
callable is wrapped, so what serves it sees an ordinary `Model` whose tensors are the declared ones.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import BadRequest
from ..model import Model
from ..result import Result


def reshapes(tensors: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """The tensors a config reshapes, by name, to the shape the model takes or gives (the batch dimension left out)."""
    return {tensor["name"]: list(tensor["reshape"].get("shape", [])) for tensor in tensors if "reshape" in tensor}


def reshaped(model: Model, inputs: Mapping[str, list[int]], outputs: Mapping[str, list[int]], batching: bool) -> Model:
    """`model`, its callable taking `inputs` reshaped and giving back its `outputs` in their declared shapes.

    `batching`: the config's max_batch_size is above 0, so every shape starts with the batch dimension.
    """
    if not inputs and not outputs:
        return model
    if model.calling.takes_requests:
        raise TypeError(
            "oip-asgi does not reshape a Triton Python model's tensors (its execute would get them as the client "
            "sent them); remove reshape from its config.pbtxt and reshape them in execute"
        )
    declared = {spec.name: list(spec.shape[1:] if batching else spec.shape) for spec in model.outputs or ()}
    single = next(iter(declared)) if len(declared) == 1 else None
    wrapper = _wrapper(model.predict, model.is_async)
    predict = wrapper(model.predict, dict(inputs), {name: declared[name] for name in outputs if name in declared})
    predict.batching, predict.single = batching, single
    return Model(predict, **model.options())


class _Reshaped:
    """The model's callable between the shapes a client sends and gets and the ones the model takes and gives."""

    batching = False
    single: str | None = None  # the one output a bare array-like result is

    def __init__(
        self, predict: Callable[..., Any], inputs: dict[str, list[int]], outputs: dict[str, list[int]]
    ) -> None:
        self.predict = predict
        self.inputs = inputs
        self.outputs = outputs
        try:  # the core reads which arguments the model takes (parameters, input_parameters) from here
            self.__signature__ = inspect.signature(predict)
        except (TypeError, ValueError):
            pass

    def __repr__(self) -> str:
        return f"<{self.predict!r}, reshaped>"

    def __call__(self, **arguments: Any) -> Any:
        return self.given_back(self.predict(**self.taken(arguments)))

    def taken(self, arguments: dict[str, Any]) -> dict[str, Any]:
        for name, shape in self.inputs.items():
            if name in arguments:
                arguments[name] = self._to(np.asarray(arguments[name]), shape, f"input {name!r}", BadRequest)
        return arguments

    def given_back(self, result: Any) -> Any:
        if isinstance(result, Result):
            return Result(self.given_back(result.outputs), result.parameters, result.output_parameters)
        if isinstance(result, Mapping):
            return {
                name: self._to(np.asarray(value), self.outputs[name], f"output {name!r}", ValueError)
                if name in self.outputs
                else value
                for name, value in result.items()
            }
        if self.single is not None and self.single in self.outputs:
            return self._to(np.asarray(result), self.outputs[self.single], f"output {self.single!r}", ValueError)
        return result

    def _to(self, array: np.ndarray, shape: list[int], what: str, refusal: type[Exception]) -> np.ndarray:
        target = [array.shape[0], *shape] if self.batching and array.ndim > 0 else shape
        try:
            return array.reshape(target)
        except ValueError:
            # A reshape keeps the element count: an input that differs is the client's fault, an output the model's.
            raise refusal(
                f"{what} of shape {list(array.shape)} cannot be reshaped to {target} as the model's config says"
            ) from None


class _AsyncReshaped(_Reshaped):
    async def __call__(self, **arguments: Any) -> Any:
        return self.given_back(await self.predict(**self.taken(arguments)))


class _GeneratorReshaped(_Reshaped):
    def __call__(self, **arguments: Any) -> Iterator[Any]:
        for value in self.predict(**self.taken(arguments)):
            yield self.given_back(value)


class _AsyncGeneratorReshaped(_Reshaped):
    async def __call__(self, **arguments: Any) -> AsyncIterator[Any]:
        async for value in self.predict(**self.taken(arguments)):
            yield self.given_back(value)


def _wrapper(predict: Callable[..., Any], is_async: bool) -> type[_Reshaped]:
    """The wrapper that keeps `predict`'s kind: what the core reads to call it (awaited, on a thread, iterated)."""
    call = type(predict).__call__
    if inspect.isasyncgenfunction(predict) or inspect.isasyncgenfunction(call):
        return _AsyncGeneratorReshaped
    if inspect.isgeneratorfunction(predict) or inspect.isgeneratorfunction(call):
        return _GeneratorReshaped
    return _AsyncReshaped if is_async else _Reshaped
