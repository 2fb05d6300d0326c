"""bls_decoupled_async over HTTP: IN = 4, 2, 0, 1 must give SUM = 2 * IN * IN.

Prints `PASS: BLS Decoupled Async`.
"""

from __future__ import annotations

import sys

import numpy as np
import tritonclient.http as httpclient
from _addresses import addresses

args = addresses(__doc__)
with httpclient.InferenceServerClient(args.url) as client:
    for value in (4, 2, 0, 1):
        given = np.array([value], dtype=np.int32)
        inputs = [httpclient.InferInput("IN", [1], "INT32")]
        inputs[0].set_data_from_numpy(given)
        result = client.infer("bls_decoupled_async", inputs, outputs=[httpclient.InferRequestedOutput("SUM")])
        answer = result.as_numpy("SUM")
        print("==========model result==========")
        print(f"Two times the square value of {given} is {answer}")
        if answer is None or not np.array_equal(answer, 2 * given * given):
            sys.exit(f"BLS Decoupled Async: expected {2 * given * given}, got {answer}")
print("PASS: BLS Decoupled Async")
