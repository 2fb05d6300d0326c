"""W10 on MLServer: `tokens`, an `MLModel` whose `predict_stream` yields one `InferenceResponse` per token,
served in-process (parallel_workers=0) over REST (`generate_stream`, SSE) and gRPC (`ModelStreamInfer`).
GZip is off, as MLServer's streaming guide says: its middleware would hold the events back to compress them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator

from _w10 import MODEL, TOKEN  # a sibling: the apps run as scripts
from mlserver import MLModel, MLServer
from mlserver.codecs import NumpyCodec
from mlserver.settings import ModelSettings, Settings
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput


class Tokens(MLModel):
    async def load(self) -> bool:
        self.token = TOKEN  # bytes: its gRPC encoder takes nothing else for BYTES (REST decodes them)
        return True

    async def predict_stream(self, payloads: AsyncIterator[InferenceRequest]) -> AsyncIterator[InferenceResponse]:
        async for payload in payloads:
            inputs = {tensor.name: tensor for tensor in payload.inputs}
            count = int(NumpyCodec.decode_input(inputs["max_tokens"])[0])
            for _ in range(count):
                output = ResponseOutput(name="text_output", datatype="BYTES", shape=[1], data=[self.token])
                yield InferenceResponse(model_name=self.name, id=payload.id, outputs=[output])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    args = parser.parse_args()
    settings = Settings(
        host="127.0.0.1",
        http_port=args.port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        parallel_workers=0,
        debug=False,
        load_models_at_startup=True,
        gzip_enabled=False,
    )
    asyncio.run(MLServer(settings).start([ModelSettings(name=MODEL, implementation="mlserver_w10_app.Tokens")]))


if __name__ == "__main__":
    main()
