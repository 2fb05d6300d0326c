"""oip-asgi serving the identity models at /v2 under uvicorn (uvloop + httptools, one worker)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from _mlp import MLP  # siblings: the apps run as scripts
from _uvicorn import HOSTS, serve_oip

import oip_asgi
from oip_asgi import Model, TensorSpec

BATCHING = {"max_batch_size": 32, "max_batch_delay": 0.002}


async def identity(**inputs: Any) -> dict[str, Any]:
    # Async, as the peers' identities are (`async def predict` in MLServer and KServe): it runs on the loop.
    return inputs


def identity_sync(**inputs: Any) -> dict[str, Any]:
    return inputs  # a plain function runs in a worker thread (W1s measures that hop)


def mlp_models(weights: Path) -> dict[str, Model]:
    """W8: the MLP as a plain function (as most models are written), batched and not."""
    mlp = MLP(weights)

    def predict(x: Any) -> Any:
        return mlp(x)

    specs: dict[str, Any] = {
        "inputs": [TensorSpec("x", "FP32", [-1, 64])],
        "outputs": [TensorSpec("y", "FP32", [-1, 10])],
    }
    return {"mlp": Model(predict, **specs, **BATCHING), "mlp_unbatched": Model(predict, **specs)}


def file_models(files: Path) -> dict[str, Model]:
    """W9: the model files as `Model.from_file` serves them; the tabular ones declare the one output asked for."""
    return {
        # Declared FP32 (the file says FP64, as scikit-learn computes): the requests are FP32 for every server.
        "w9_sklearn": Model.from_file(
            files / "hgb.joblib",
            trusted=True,
            inputs=[TensorSpec("input-0", "FP32", [-1, 100])],
            outputs=[TensorSpec("predict_proba", "FP64", [-1, 2])],
        ),
        "w9_xgboost": Model.from_file(files / "xgb.json", outputs=[TensorSpec("predict_proba", "FP32", [-1, 2])]),
        "w9_onnx": Model.from_file(files / "mlp.onnx"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mlp-weights", type=Path)
    parser.add_argument("--w9-files", type=Path)
    parser.add_argument("--stages", type=Path, help="record each request's stages to this file (bench/stages.py)")
    parser.add_argument("--host", choices=HOSTS, default="serve", help="what serves /v2 (apps/_uvicorn.py)")
    args = parser.parse_args()
    if args.stages is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        import stages

        stages.install(args.stages)
    models: dict[str, Any] = {"identity": identity, "identity_sync": identity_sync, "identity_bytes": identity}
    if args.mlp_weights is not None:
        models.update(mlp_models(args.mlp_weights))
    if args.w9_files is not None:
        models.update(file_models(args.w9_files))
    try:
        # As the serve command does: the loaded heap out of the garbage collector's full passes (issue 31).
        oip = oip_asgi.oip_app(models, freeze_heap=True)
    except TypeError:  # `base`: a commit from before that option
        oip = oip_asgi.oip_app(models)
    serve_oip(oip, args.port, load=True, host=args.host)


if __name__ == "__main__":
    main()
