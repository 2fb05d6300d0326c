"""MLServer serving the identity models in-process (parallel_workers=0), started programmatically.

With `--mlp-weights`, also W8's MLP as `mlp`, with MLServer's adaptive batching (max_batch_size 32,
max_batch_time 2 ms: the settings ours is measured with).
"""

from __future__ import annotations

from pathlib import Path

import _mlserver  # siblings: the apps run as scripts
from _cli import parser
from _mlp import MLP
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.settings import ModelParameters, ModelSettings
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


class MultilayerPerceptron(MLModel):
    """W8: decodes `x` [n,64], runs the MLP on the loop (as MLServer runs `predict`), encodes `y` [n,10]."""

    async def load(self) -> bool:
        assert self.settings.parameters is not None and self.settings.parameters.uri is not None
        self.mlp = MLP(self.settings.parameters.uri)
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = NumpyCodec.decode_input(payload.inputs[0])
        outputs = [NumpyCodec.encode_output("y", self.mlp(x))]
        return InferenceResponse(model_name=self.name, id=payload.id, outputs=outputs)


def main() -> None:
    options = parser("--grpc-port", "--metrics-port")
    options.add_argument("--mlp-weights", type=Path)
    options.add_argument("--w9-files", type=Path, help="W9: serve each model-settings.json under DIR/mlserver/")
    args = options.parse_args()
    models = [
        ModelSettings(name=name, implementation="mlserver_app.Identity") for name in ("identity", "identity_bytes")
    ]
    if args.mlp_weights is not None:
        models.append(
            ModelSettings(
                name="mlp",
                implementation="mlserver_app.MultilayerPerceptron",
                parameters=ModelParameters(uri=str(args.mlp_weights.resolve())),
                max_batch_size=32,
                max_batch_time=0.002,
            )
        )
    if args.w9_files is not None:
        # MLServer's own runtimes (mlserver_sklearn.SKLearnModel, mlserver_xgboost.XGBoostModel) on the same files.
        for path in sorted((args.w9_files / "mlserver").glob("*/model-settings.json")):
            models.append(ModelSettings.model_validate_json(path.read_text()))
    _mlserver.serve(args, models)


if __name__ == "__main__":
    main()
