"""init_args over HTTP: the model checked the values of its `initialize` arguments and counts their seven keys.

Prints `PASS: init_args`.
"""

from __future__ import annotations

import sys

import numpy as np
import tritonclient.http as httpclient
from _addresses import addresses

args = addresses(__doc__)
inputs = [httpclient.InferInput("IN", [1, 1], "FP32")]
inputs[0].set_data_from_numpy(np.ones((1, 1), np.float32))
with httpclient.InferenceServerClient(args.url) as client:
    if not client.is_model_ready("init_args"):
        sys.exit("init_args: not ready (its initialize refused its arguments: see the model's state)")
    count = client.infer("init_args", inputs).as_numpy("OUT")
print(f"initialize received {count.ravel()[0]:.0f} of the 7 keys")
if count.ravel().tolist() != [7.0]:
    sys.exit(f"init_args: expected the 7 keys, got {count}")
print("PASS: init_args")
