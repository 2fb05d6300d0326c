"""Business logic scripting: this model asks another model of the same server, the one MODEL_NAME names."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            # A TYPE_STRING tensor reads as an array of bytes.
            target = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
            if isinstance(target, bytes):
                target = target.decode()
            inner = pb_utils.InferenceRequest(
                model_name=target,
                inputs=[
                    pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                    pb_utils.get_input_tensor_by_name(request, "INPUT1"),
                ],
                requested_output_names=["OUTPUT0", "OUTPUT1"],
            )
            answer = inner.exec()  # blocks until the other model answered
            if answer.has_error():
                # Raised, it fails this request with a 500 that carries the inner model's message.
                raise pb_utils.TritonModelException(answer.error().message())
            responses.append(pb_utils.InferenceResponse(output_tensors=answer.output_tensors()))
        return responses
