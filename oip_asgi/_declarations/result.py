"""What a model may return besides its outputs alone."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Result:
    """What a model returns when it also sets the response's parameters, or its outputs' parameters.

    ``outputs`` is what the model would return on its own (a mapping of output name to array-like,
    or one array-like); ``parameters`` go into the response's ``parameters``, ``output_parameters``
    (output name to its parameters) into each output's. Parameter values are strings, numbers or booleans.
    """

    outputs: Any
    parameters: Mapping[str, Any] | None = None
    output_parameters: Mapping[str, Mapping[str, Any]] | None = None
