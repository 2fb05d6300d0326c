"""bls_decoupled_sync over HTTP: IN = 4, 2, 0, 1 must give SUM = IN * IN.

Prints `PASS: BLS Decoupled Sync`.
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
        result = client.infer("bls_decoupled_sync", inputs, outputs=[httpclient.InferRequestedOutput("SUM")])
        answer = result.as_numpy("SUM")
        print("==========model result==========")
        print(f"The square value of {given} is {answer}")
        if answer is None or not np.array_equal(answer, given * given):
            sys.exit(f"BLS Decoupled Sync: expected {given * given}, got {answer}")
print("PASS: BLS Decoupled Sync")
