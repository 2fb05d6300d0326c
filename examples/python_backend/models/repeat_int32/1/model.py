"""A decoupled model whose responses keep coming after `execute` returned: one per element of IN, paced by DELAY."""

import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(f"{args['model_name']} needs a decoupled transaction policy")
        self.out_dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "OUT")["data_type"])
        self.idx_dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "IDX")["data_type"])
        self.senders = []
        self.lock = threading.Lock()

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            if values.shape != delays.shape:
                raise pb_utils.TritonModelException(
                    f"IN and DELAY must have the same shape, got {list(values.shape)} and {list(delays.shape)}"
                )
            thread = threading.Thread(
                target=self.answer, args=(request.get_response_sender(), values, delays), daemon=True
            )
            with self.lock:
                self.senders.append(thread)
            thread.start()
            wait_ms = int(pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()[0])
            time.sleep(wait_ms / 1000)
        return None

    def answer(self, sender, values, delays):
        for index, (value, delay_ms) in enumerate(zip(values, delays, strict=True)):
            time.sleep(int(delay_ms) / 1000)
            outputs = [
                pb_utils.Tensor("IDX", np.array([index], self.idx_dtype)),
                pb_utils.Tensor("OUT", np.array([value], self.out_dtype)),
            ]
            sender.send(pb_utils.InferenceResponse(output_tensors=outputs))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        with self.lock:
            senders, self.senders = self.senders, []
        for thread in senders:
            thread.join()
