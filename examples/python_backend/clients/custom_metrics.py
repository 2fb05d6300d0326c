"""custom_metrics: one inference over HTTP, then the model's own counter read from the metrics port.

Prints `PASS: custom_metrics`.
"""

from __future__ import annotations

import sys
import urllib.request

import numpy as np
import tritonclient.http as httpclient
from _addresses import addresses

args = addresses(__doc__)
a, b = np.random.rand(4).astype(np.float32), np.random.rand(4).astype(np.float32)
inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
inputs[0].set_data_from_numpy(a)
inputs[1].set_data_from_numpy(b)
with httpclient.InferenceServerClient(args.url) as client:
    result = client.infer("custom_metrics", inputs)
if not np.allclose(a + b, result.as_numpy("OUTPUT0")) or not np.allclose(a - b, result.as_numpy("OUTPUT1")):
    sys.exit("custom_metrics: wrong answer")

with urllib.request.urlopen(f"http://{args.metrics_url}/metrics", timeout=10) as response:
    metrics = response.read().decode()
# The family exactly as the model named it (no suffix added), and its one metric with the model's labels.
expected = [
    "# HELP requests_process_latency_ns Cumulative time spent processing requests",
    "# TYPE requests_process_latency_ns counter",
    'requests_process_latency_ns{model="custom_metrics",version="1"}',
]
for line in expected:
    if line not in metrics:
        sys.exit(f"custom_metrics: '{line}' is not in the metrics")
    print(f"custom_metrics example: found pattern '{line}' in metrics")
sample = next(row for row in metrics.splitlines() if row.startswith(expected[2]))
if float(sample.rsplit(" ", 1)[1]) <= 0:
    sys.exit(f"custom_metrics: the counter did not count: {sample}")
print("PASS: custom_metrics")
