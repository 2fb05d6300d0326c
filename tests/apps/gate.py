"""The example models, and Triton's `simple` (INT32 [1, 16] add and subtract) behind a gate, `gated`, for tests that
act while a request is in the model: it writes the file $OIP_GATE_ENTERED when called, and answers once
$OIP_GATE_OPEN exists."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from examples.models import models as example_models
from oip_asgi import Model, TensorSpec
from tests.support.waiting import wait_until


def _gated_add_sub(INPUT0: np.ndarray, INPUT1: np.ndarray) -> dict[str, np.ndarray]:
    Path(os.environ["OIP_GATE_ENTERED"]).write_text("entered\n")
    wait_until(Path(os.environ["OIP_GATE_OPEN"]).exists, "the test opened the gate")  # no thread stays behind
    return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}


_TENSORS = [TensorSpec(name, "INT32", [-1, 16]) for name in ("INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1")]
models = {**example_models, "gated": Model(_gated_add_sub, inputs=_TENSORS[:2], outputs=_TENSORS[2:])}
