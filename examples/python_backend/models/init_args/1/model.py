"""The arguments of `initialize`, checked: seven string keys, with the values Triton gives them."""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

KEYS = (
    "model_config",
    "model_instance_kind",
    "model_instance_name",
    "model_instance_device_id",
    "model_repository",
    "model_version",
    "model_name",
)


class TritonPythonModel:
    def initialize(self, args):
        # model_repository is this model's own folder (the one holding config.pbtxt and 1/), not the repository.
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        expected = {
            "model_name": "init_args",
            "model_version": "1",
            "model_instance_kind": "CPU",
            "model_instance_device_id": "0",
            "model_instance_name": "init_args_0_0",  # <model>_<instance group>_<instance in the group>
        }
        wrong = []
        for key, value in expected.items():
            if args.get(key) != value:
                wrong.append(f"{key}: expected {value!r}, got {args.get(key)!r}")
        if os.path.realpath(args.get("model_repository", "")) != os.path.realpath(here):
            wrong.append(f"model_repository: expected {here!r}, got {args.get('model_repository')!r}")
        if not all(isinstance(value, str) for value in args.values()):
            wrong.append("every value must be a string")
        if json.loads(args["model_config"])["name"] != "init_args":
            wrong.append("model_config is not this model's configuration")
        if wrong:
            raise pb_utils.TritonModelException("; ".join(wrong))
        self.present = sum(key in args for key in KEYS)

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([[self.present]], np.float32))])
            for _ in requests
        ]
