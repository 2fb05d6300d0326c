"""add_sub with a custom metric: nanoseconds spent in `execute`, a counter labelled by model and version."""

import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # Instances of one model registering the same family share it; the labels pick the one metric.
        # Triton needs the family kept alive as long as its metrics are used (its metrics fail once it is deleted).
        self.family = pb_utils.MetricFamily(
            name="requests_process_latency_ns",
            description="Cumulative time spent processing requests",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.latency = self.family.Metric(labels={"model": args["model_name"], "version": args["model_version"]})
        self.log = pb_utils.Logger

    def execute(self, requests):
        started = time.time_ns()
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            outputs = [pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        self.latency.increment(time.time_ns() - started)
        self.log.log_info(f"custom_metrics: {self.latency.value()} ns spent processing requests so far")
        return responses
