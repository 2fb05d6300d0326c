"""bls_async over HTTP: OUTPUT0 from add_sub, OUTPUT1 from nobatch_auto_complete, both asked at once.

Prints `PASS: BLS Async`.
"""

from __future__ import annotations

import sys

import numpy as np
import tritonclient.http as httpclient
from _addresses import addresses

args = addresses(__doc__)
a, b = np.random.rand(4).astype(np.float32), np.random.rand(4).astype(np.float32)
inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
inputs[0].set_data_from_numpy(a)
inputs[1].set_data_from_numpy(b)
outputs = [httpclient.InferRequestedOutput("OUTPUT0"), httpclient.InferRequestedOutput("OUTPUT1")]

with httpclient.InferenceServerClient(args.url) as client:
    result = client.infer("bls_async", inputs, request_id="1", outputs=outputs)
sum_, difference = result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")
print(f"INPUT0 ({a}) + INPUT1 ({b}) = OUTPUT0 ({sum_})")
print(f"INPUT0 ({a}) - INPUT1 ({b}) = OUTPUT1 ({difference})")
if not np.allclose(a + b, sum_) or not np.allclose(a - b, difference):
    sys.exit("BLS Async: wrong answer")
print("PASS: BLS Async")
