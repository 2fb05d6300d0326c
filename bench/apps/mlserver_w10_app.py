"""W10 on MLServer: `tokens`, an `MLModel` whose `predict_stream` yields one `InferenceResponse` per token,
served in-process (parallel_workers=0) over REST (`generate_stream`, SSE) and gRPC (`ModelStreamInfer`).
GZip is off, as MLServer's streaming guide says: its middleware would hold the events back to compress them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import _mlserver  # siblings: the apps run as scripts
from _cli import ports
from _tokens import MODEL, TOKEN
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.settings import ModelSettings
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput


class Tokens(MLModel):
    async def load(self) -> bool:
        self.token = TOKEN.encode()  # bytes: its gRPC encoder takes nothing else for BYTES (REST decodes them)
        return True

    async def predict_stream(self, payloads: AsyncIterator[InferenceRequest]) -> AsyncIterator[InferenceResponse]:
        async for payload in payloads:
            inputs = {tensor.name: tensor for tensor in payload.inputs}
            count = int(NumpyCodec.decode_input(inputs["max_tokens"])[0])
            for _ in range(count):
                output = ResponseOutput(name="text_output", datatype="BYTES", shape=[1], data=[self.token])
                yield InferenceResponse(model_name=self.name, id=payload.id, outputs=[output])


if __name__ == "__main__":
    models = [ModelSettings(name=MODEL, implementation="mlserver_w10_app.Tokens")]
    _mlserver.serve(ports("--grpc-port", "--metrics-port"), models, gzip_enabled=False)
