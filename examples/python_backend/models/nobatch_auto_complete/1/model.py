"""add_sub with no config.pbtxt: `auto_complete_config` declares its inputs and outputs, and no batching.

Triton's python_backend `auto_complete` example does the same; its client reads the completed configuration back.
"""

import json

import triton_python_backend_utils as pb_utils

TENSORS = {
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
    "output": [
        {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
}


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        # Add only what a config.pbtxt (if any) left out: add_input/add_output refuse a conflicting declaration.
        declared = config.as_dict()
        for kind, add in (("input", config.add_input), ("output", config.add_output)):
            present = {tensor["name"] for tensor in declared[kind]}
            for tensor in TENSORS[kind]:
                if tensor["name"] not in present:
                    add(tensor)
        config.set_max_batch_size(0)
        return config

    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.dtypes = {
            tensor["name"]: pb_utils.triton_string_to_numpy(tensor["data_type"]) for tensor in config["output"]
        }

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            outputs = [
                pb_utils.Tensor("OUTPUT0", (a + b).astype(self.dtypes["OUTPUT0"])),
                pb_utils.Tensor("OUTPUT1", (a - b).astype(self.dtypes["OUTPUT1"])),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
