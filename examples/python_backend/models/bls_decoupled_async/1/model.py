"""BLS into a decoupled model, twice at once: `await async_exec(decoupled=True)` gives each request's responses."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            pending = [
                pb_utils.InferenceRequest(
                    model_name="square_int32",
                    inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                    requested_output_names=["OUT"],
                ).async_exec(decoupled=True)
                for _ in range(2)
            ]
            total = np.zeros(1, np.int32)
            for answers in await asyncio.gather(*pending):
                for answer in answers:
                    if answer.has_error():
                        raise pb_utils.TritonModelException(answer.error().message())
                    if answer.output_tensors():
                        total += pb_utils.get_output_tensor_by_name(answer, "OUT").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SUM", total)]))
        return responses
