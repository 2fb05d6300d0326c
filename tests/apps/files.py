"""The model files tests/support/model_files.py wrote into $OIP_MODEL_FILES, served by `Model.from_file`."""

from __future__ import annotations

import os
from pathlib import Path

from oip_asgi import Model, TensorSpec

directory = Path(os.environ["OIP_MODEL_FILES"])

models = {
    "iris": Model.from_file(directory / "iris.skops"),
    "pca": Model.from_file(directory / "pca.skops"),
    "scaled": Model.from_file(directory / "scaled.joblib", trusted=True),
    "digits": Model.from_file(directory / "digits.onnx"),
    "digits_batched": Model.from_file(directory / "digits.onnx", max_batch_size=64, max_batch_delay=0.05),
    "strings": Model.from_file(directory / "strings.onnx"),
    "xgb_iris": Model.from_file(directory / "iris.json"),
    "xgb_binary": Model.from_file(directory / "binary.ubj"),
    "xgb_diabetes": Model.from_file(directory / "diabetes.json"),
    "lgb_iris": Model.from_file(directory / "iris.txt"),
    "lazy": Model.from_file(directory / "iris.json", lazy=True),
    "broken": Model.from_file(directory / "corrupt.onnx", lazy=True),
    "missing": Model.from_file(directory / "missing.onnx", lazy=True),
    "overridden": Model.from_file(
        directory / "iris.skops",
        version="3",
        inputs=[TensorSpec("features", "FP32", [-1, 4])],
        outputs=[TensorSpec("predict_proba", "FP64", [-1, 3])],
        labels=["Iris setosa", "Iris versicolor", "Iris virginica"],
        properties={"team": "botany"},
        platform="scikit-learn",
    ),
}
