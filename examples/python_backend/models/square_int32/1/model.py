"""A decoupled model: each request gets IN[0] responses, sent from a thread after `execute` has returned."""

import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(
                f"{args['model_name']} answers a request any number of times: its config needs "
                "model_transaction_policy { decoupled: true }"
            )
        declared = [pb_utils.get_input_config_by_name(config, "IN"), pb_utils.get_output_config_by_name(config, "OUT")]
        for spec in declared:
            if spec["data_type"] != "TYPE_INT32" or list(spec["dims"]) != [1]:
                raise pb_utils.TritonModelException(f"{spec['name']} must be TYPE_INT32 with dims [1]")
        self.senders = []  # the threads still answering, joined by finalize
        self.lock = threading.Lock()

    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            thread = threading.Thread(target=self.answer, args=(request.get_response_sender(), n), daemon=True)
            with self.lock:
                self.senders.append(thread)
            thread.start()
        return None  # decoupled: the answers go through the senders

    def answer(self, sender, n):
        for _ in range(n):
            sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUT", np.array([n], np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        # Let every request still being answered finish before the model goes.
        with self.lock:
            senders, self.senders = self.senders, []
        for thread in senders:
            thread.join()
