"""MLServer serving the identity models in-process (parallel_workers=0), started programmatically."""

from __future__ import annotations

import argparse
import asyncio

from mlserver import MLModel, MLServer
from mlserver.codecs import NumpyCodec
from mlserver.settings import ModelSettings, Settings
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput


class Identity(MLModel):
    """Decodes each input to numpy and encodes it back, as a real model's codecs would."""

    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        outputs = []
        for tensor in payload.inputs:
            if tensor.datatype == "BYTES":
                # MLServer's NumpyCodec treats BYTES as fixed-width; hand the strings back unchanged.
                outputs.append(
                    ResponseOutput(name=tensor.name, shape=tensor.shape, datatype=tensor.datatype, data=tensor.data)
                )
            else:
                outputs.append(NumpyCodec.encode_output(tensor.name, NumpyCodec.decode_input(tensor)))
        return InferenceResponse(model_name=self.name, id=payload.id, outputs=outputs)


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
    )
    models = [
        ModelSettings(name=name, implementation="mlserver_app.Identity") for name in ("identity", "identity_bytes")
    ]
    asyncio.run(MLServer(settings).start(models))


if __name__ == "__main__":
    main()
