"""KServe's ModelServer serving the identity models over the V2 REST protocol, one uvicorn worker."""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer


class LoopbackConfig(uvicorn.Config):
    """KServe's REST server binds 0.0.0.0 unconditionally; the benchmark keeps everything on 127.0.0.1."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["host"] = "127.0.0.1"
        super().__init__(*args, **kwargs)


class Identity(Model):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.ready = True

    async def predict(
        self,
        payload: InferRequest,
        headers: dict[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> InferResponse:
        outputs = []
        for tensor in payload.inputs:
            array = tensor.as_numpy()
            output = InferOutput(name=tensor.name, shape=list(array.shape), datatype=tensor.datatype)
            output.set_data_from_numpy(array, binary_data=False)
            outputs.append(output)
        return InferResponse(
            response_id=payload.id or "",
            model_name=self.name,
            infer_outputs=outputs,
            use_binary_outputs=payload.use_binary_outputs,
            requested_outputs=payload.request_outputs,
        )


def main(enable_grpc: bool = False) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    args, _ = parser.parse_known_args()  # KServe reads its own options from the command line too
    uvicorn.Config = LoopbackConfig  # type: ignore[misc]
    server = ModelServer(http_port=args.port, grpc_port=args.grpc_port, workers=1, enable_grpc=enable_grpc)
    server.start([Identity("identity"), Identity("identity_bytes")])


if __name__ == "__main__":
    main()
