"""BLS into a decoupled model: `exec(decoupled=True)` yields square_int32's responses one by one."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            inner = pb_utils.InferenceRequest(
                model_name="square_int32",
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["OUT"],
            )
            total = np.zeros(1, np.int32)
            for answer in inner.exec(decoupled=True):
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                # The last response only carries the final flag: no tensors.
                if answer.output_tensors():
                    total += pb_utils.get_output_tensor_by_name(answer, "OUT").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SUM", total)]))
        return responses
