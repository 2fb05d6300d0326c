"""repeat_int32 over a gRPC stream: one request, IN = [4, 2, 0, 1], answered four times in order (IDX 0..3).

The model returns from `execute` after WAIT ms, before its last responses are sent. Prints `PASS: repeat_int32`.
"""

from __future__ import annotations

import queue
import sys
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
from _addresses import addresses

args = addresses(__doc__)
VALUES = [4, 2, 0, 1]
arrived: queue.Queue[Any] = queue.Queue()
given = {"IN": (np.array(VALUES, np.int32), "INT32"), "DELAY": (np.array([1, 2, 3, 4], np.uint32), "UINT32"),
         "WAIT": (np.array([5], np.uint32), "UINT32")}  # fmt: skip
inputs = []
for name, (array, datatype) in given.items():
    inputs.append(grpcclient.InferInput(name, list(array.shape), datatype))
    inputs[-1].set_data_from_numpy(array)

with grpcclient.InferenceServerClient(args.grpc_url) as client:
    client.start_stream(callback=lambda result, error: arrived.put(error or result))
    client.async_stream_infer(
        "repeat_int32",
        inputs,
        request_id="0",
        outputs=[grpcclient.InferRequestedOutput("OUT"), grpcclient.InferRequestedOutput("IDX")],
    )
    answers = []
    for _ in VALUES:
        item = arrived.get(timeout=30)
        if isinstance(item, Exception):
            raise item
        answers.append(item)
    client.stop_stream()

for index, (value, answer) in enumerate(zip(VALUES, answers, strict=True)):
    out, idx = answer.as_numpy("OUT"), answer.as_numpy("IDX")
    print(f"response {index}: id {answer.get_response().id}, OUT {out}, IDX {idx}")
    if answer.get_response().id != "0" or not np.array_equal(out, [value]) or not np.array_equal(idx, [index]):
        sys.exit(f"repeat_int32: response {index} expected OUT [{value}] IDX [{index}], got OUT {out} IDX {idx}")
if not arrived.empty():
    sys.exit(f"repeat_int32: a response too many: {arrived.get()}")
print("PASS: repeat_int32")
