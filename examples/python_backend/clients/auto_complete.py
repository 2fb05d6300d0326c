"""The configurations the auto_complete models wrote for themselves, read back and checked, then an inference each.

Prints `PASS: auto_complete`.
"""

from __future__ import annotations

import sys

import numpy as np
import tritonclient.http as httpclient
from _addresses import addresses

args = addresses(__doc__)
EXPECTED = {
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
    "output": [
        {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
}
MAX_BATCH_SIZE = {"nobatch_auto_complete": 0, "batch_auto_complete": 4}

with httpclient.InferenceServerClient(args.url) as client:
    for model, max_batch_size in MAX_BATCH_SIZE.items():
        config = client.get_model_config(model)
        if config.get("max_batch_size", 0) != max_batch_size:
            sys.exit(f"{model}: max_batch_size {config.get('max_batch_size')}, expected {max_batch_size}")
        for kind, tensors in EXPECTED.items():
            declared = {tensor["name"]: tensor for tensor in config.get(kind, [])}
            for tensor in tensors:
                found = declared.get(tensor["name"])
                # dims come back as JSON numbers from one server and as strings (int64) from another
                if found is None or found["data_type"] != tensor["data_type"]:
                    sys.exit(f"{model}: {kind} {tensor['name']} is {found}, expected {tensor}")
                if [int(d) for d in found["dims"]] != tensor["dims"]:
                    sys.exit(f"{model}: {kind} {tensor['name']} has dims {found['dims']}, expected {tensor['dims']}")
        if max_batch_size and "dynamic_batching" not in config:
            sys.exit(f"{model}: dynamic batching was asked for and is not in its configuration")
        print(f"'{model}' configuration matches the expected auto complete configuration")

        # A batched model takes a leading batch dimension.
        shape = [1, 4] if max_batch_size else [4]
        a, b = np.random.rand(*shape).astype(np.float32), np.random.rand(*shape).astype(np.float32)
        inputs = [httpclient.InferInput("INPUT0", shape, "FP32"), httpclient.InferInput("INPUT1", shape, "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        result = client.infer(model, inputs)
        if not np.allclose(a + b, result.as_numpy("OUTPUT0")) or not np.allclose(a - b, result.as_numpy("OUTPUT1")):
            sys.exit(f"{model}: wrong answer")
print("PASS: auto_complete")
