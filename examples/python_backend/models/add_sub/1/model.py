"""Sum and difference of two tensors, in the shape Triton's Python backend runs (its `add_sub` example)."""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # Every value in `args` is a string; the configuration arrives as JSON text.
        config = json.loads(args["model_config"])
        self.dtypes = {
            name: pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, name)["data_type"])
            for name in ("OUTPUT0", "OUTPUT1")
        }

    def execute(self, requests):
        # One response per request, in the order the requests came.
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            sum_, difference = a + b, a - b
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUTPUT0", sum_.astype(self.dtypes["OUTPUT0"])),
                        pb_utils.Tensor("OUTPUT1", difference.astype(self.dtypes["OUTPUT1"])),
                    ]
                )
            )
        return responses

    def finalize(self):
        print("add_sub: unloaded")
