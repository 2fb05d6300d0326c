"""bls_sync over HTTP: through add_sub, through nobatch_auto_complete, then through a model that does not exist.

The first two must answer INPUT0 +/- INPUT1; the third must fail with an error naming the missing model.
Prints `PASS: BLS Sync`.
"""

from __future__ import annotations

import sys

import numpy as np
import tritonclient.http as httpclient
from _addresses import addresses
from tritonclient.utils import InferenceServerException

args = addresses(__doc__)
a, b = np.random.rand(4).astype(np.float32), np.random.rand(4).astype(np.float32)


def ask(client: httpclient.InferenceServerClient, target: str) -> httpclient.InferResult:
    inputs = [
        httpclient.InferInput("INPUT0", [4], "FP32"),
        httpclient.InferInput("INPUT1", [4], "FP32"),
        httpclient.InferInput("MODEL_NAME", [1], "BYTES"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    inputs[2].set_data_from_numpy(np.array([target], dtype=np.object_))
    outputs = [httpclient.InferRequestedOutput("OUTPUT0"), httpclient.InferRequestedOutput("OUTPUT1")]
    return client.infer("bls_sync", inputs, request_id="1", outputs=outputs)


with httpclient.InferenceServerClient(args.url) as client:
    for target in ("add_sub", "nobatch_auto_complete"):
        result = ask(client, target)
        sum_, difference = result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")
        print(f"=========='{target}' model result==========")
        print(f"INPUT0 ({a}) + INPUT1 ({b}) = OUTPUT0 ({sum_})")
        print(f"INPUT0 ({a}) - INPUT1 ({b}) = OUTPUT1 ({difference})")
        if not np.allclose(a + b, sum_) or not np.allclose(a - b, difference):
            sys.exit(f"BLS Sync: wrong answer through {target}")

    print("=========='undefined_model' model result==========")
    try:
        ask(client, "undefined_model")
    except InferenceServerException as error:
        print(error.message())
        if "undefined_model" not in (error.message() or ""):
            sys.exit("BLS Sync: the error does not name the missing model")
    else:
        sys.exit("BLS Sync: a model that does not exist answered")
print("PASS: BLS Sync")
