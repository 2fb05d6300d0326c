"""PyTriton serving the identity models (FP32 and BYTES), one instance each.

Dimension 0 is declared the batch (up to 64) because that is how Triton's classification extension
ranks each row of a [64, 1000] output; without it Triton ranks the whole tensor at once. There is no
dynamic batcher: like the other servers, each request runs on its own.

With `--mlp-weights`, also W8's MLP as `mlp`, behind Triton's dynamic batcher (max_batch_size 32,
max_queue_delay 2 ms: the settings ours is measured with).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _pytriton  # siblings: the apps run as scripts
import numpy as np
import numpy.typing as npt
from _cli import parser
from _mlp import MLP
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import DEFAULT_PROTECTED_ENDPOINTS, Triton, TritonSecurityConfig


def identity(requests: list[Any]) -> list[dict[str, npt.NDArray[Any]]]:
    return [{name: request[name] for name in request} for request in requests]


def bind_mlp(triton: Triton, weights: Path) -> None:
    mlp = MLP(weights)

    @batch
    def infer(x: npt.NDArray[np.float32]) -> dict[str, npt.NDArray[np.float32]]:
        return {"y": mlp(x)}

    triton.bind(
        model_name="mlp",
        infer_func=infer,
        inputs=[Tensor(name="x", dtype=np.float32, shape=(64,))],
        outputs=[Tensor(name="y", dtype=np.float32, shape=(10,))],
        config=ModelConfig(batching=True, max_batch_size=32, batcher=DynamicBatcher(max_queue_delay_microseconds=2000)),
    )


def bind_onnx(triton: Triton, file: Path) -> None:
    """W9: the ONNX MLP in an onnxruntime session inside the bound function, one request per call."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(file), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]

    def infer(requests: list[Any]) -> list[dict[str, npt.NDArray[Any]]]:
        return [dict(zip(names, session.run(None, {"X": request["X"]}), strict=True)) for request in requests]

    triton.bind(
        model_name="w9_onnx",
        infer_func=infer,
        inputs=[Tensor(name="X", dtype=np.float32, shape=(-1, 100))],
        outputs=[
            Tensor(name="label", dtype=np.int64, shape=(-1,)),
            Tensor(name="probabilities", dtype=np.float32, shape=(-1, 2)),
        ],
        config=ModelConfig(batching=False),
    )


def main() -> None:
    options = parser("--grpc-port", "--metrics-port")
    options.add_argument("--mlp-weights", type=Path)
    options.add_argument("--w9-files", type=Path)
    # PyTriton 0.7 puts Triton's statistics behind an access token by default; perf_analyzer reads them.
    options.add_argument("--open-statistics", action="store_true", help="serve statistics without PyTriton's token")
    args = options.parse_args()
    # Input and output share a name so the response matches the other servers' identity models.
    models = {"identity": np.float32, "identity_bytes": np.bytes_}
    security = None
    if args.open_statistics:
        restricted = [endpoint for endpoint in DEFAULT_PROTECTED_ENDPOINTS if endpoint != "statistics"]
        security = TritonSecurityConfig(restricted_endpoints=restricted)
    with Triton(config=_pytriton.config(args), security_config=security) as triton:
        for name, dtype in models.items():
            triton.bind(
                model_name=name,
                infer_func=identity,
                inputs=[Tensor(name="x", dtype=dtype, shape=(-1,))],
                outputs=[Tensor(name="x", dtype=dtype, shape=(-1,))],
                config=ModelConfig(batching=True, max_batch_size=64, batcher=None),
            )
        if args.mlp_weights is not None:
            bind_mlp(triton, args.mlp_weights)
        if args.w9_files is not None:
            bind_onnx(triton, args.w9_files / "mlp.onnx")
        _pytriton.serve(triton)


if __name__ == "__main__":
    main()
