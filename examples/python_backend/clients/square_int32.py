"""square_int32 over a gRPC stream: four requests (IN = 4, 2, 0, 1) in flight together, answered out of order.

Request n must get exactly n responses, each OUT = [n], told apart by their request id; n = 0 gets none.
Prints `PASS: square_int32`.
"""

from __future__ import annotations

import queue
import sys
from collections import defaultdict
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
from _addresses import addresses

args = addresses(__doc__)
VALUES = (4, 2, 0, 1)
arrived: queue.Queue[Any] = queue.Queue()

with grpcclient.InferenceServerClient(args.grpc_url) as client:
    client.start_stream(callback=lambda result, error: arrived.put(error or result))
    for request_id, value in enumerate(VALUES):
        inputs = [grpcclient.InferInput("IN", [1], "INT32")]
        inputs[0].set_data_from_numpy(np.array([value], dtype=np.int32))
        client.async_stream_infer(
            "square_int32", inputs, request_id=str(request_id), outputs=[grpcclient.InferRequestedOutput("OUT")]
        )
    answers: dict[str, list[Any]] = defaultdict(list)
    for _ in range(sum(VALUES)):
        item = arrived.get(timeout=30)
        if isinstance(item, Exception):
            raise item
        answers[item.get_response().id].append(item.as_numpy("OUT"))
    client.stop_stream()

for request_id, value in enumerate(VALUES):
    got = answers.get(str(request_id), [])
    print(f"request {request_id} (IN = {value}): {len(got)} responses {[int(out[0]) for out in got]}")
    if len(got) != value or any(not np.array_equal(out, [value]) for out in got):
        sys.exit(f"square_int32: request {request_id} expected {value} responses of [{value}], got {got}")
if not arrived.empty():
    sys.exit(f"square_int32: a response too many: {arrived.get()}")
print("PASS: square_int32")
