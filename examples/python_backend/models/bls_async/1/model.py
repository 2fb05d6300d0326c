"""Business logic scripting with `async_exec`: two models asked at once, their answers combined."""

import asyncio

import triton_python_backend_utils as pb_utils

# Both compute INPUT0 + INPUT1 and INPUT0 - INPUT1; the second has no config.pbtxt (auto-completed).
TARGETS = ("add_sub", "nobatch_auto_complete")


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            inputs = [
                pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                pb_utils.get_input_tensor_by_name(request, "INPUT1"),
            ]
            pending = [
                pb_utils.InferenceRequest(
                    model_name=name, inputs=inputs, requested_output_names=["OUTPUT0", "OUTPUT1"]
                ).async_exec()
                for name in TARGETS
            ]
            answers = await asyncio.gather(*pending)
            for answer in answers:
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
            outputs = [
                pb_utils.get_output_tensor_by_name(answers[0], "OUTPUT0"),
                pb_utils.get_output_tensor_by_name(answers[1], "OUTPUT1"),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
