"""Model files for the tests, trained from the data the libraries ship (nothing downloaded) and saved
as a data scientist saves them; tests/apps/files.py serves them, the tests call the libraries directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import joblib
import lightgbm
import numpy as np
import onnx
import skops.io
import xgboost
from skl2onnx import to_onnx
from sklearn.datasets import load_diabetes, load_digits, load_iris, make_classification
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


def export(directory: Path) -> dict[str, Any]:
    """Every model file the server app serves, written into `directory`; the fitted objects by file name."""
    iris = load_iris(as_frame=True)
    features = iris.data  # a DataFrame: the classifier keeps its feature names
    species = iris.target_names[iris.target]  # class names, not numbers
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, random_state=0)
    digits_X, digits_y = load_digits(return_X_y=True)
    diabetes_X, diabetes_y = load_diabetes(return_X_y=True)

    fitted: dict[str, Any] = {
        "iris.skops": LogisticRegression(max_iter=1000).fit(features, species),
        "pca.skops": PCA(n_components=2).fit(iris.data.to_numpy()),
        "scaled.joblib": make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=10, random_state=0)).fit(
            X, y
        ),
        "digits.onnx": LogisticRegression(max_iter=2000).fit(digits_X, digits_y),
        "iris.json": xgboost.XGBClassifier(n_estimators=8, max_depth=3).fit(iris.data.to_numpy(), iris.target),
        "binary.ubj": xgboost.XGBClassifier(n_estimators=8, max_depth=3).fit(X, y),
        "diabetes.json": xgboost.XGBRegressor(n_estimators=8, max_depth=3).fit(diabetes_X, diabetes_y),
        "iris.txt": lightgbm.LGBMClassifier(n_estimators=8, verbose=-1).fit(iris.data.to_numpy(), iris.target),
    }
    for name, model in fitted.items():
        file = directory / name
        if name.endswith(".skops"):
            skops.io.dump(model, file)
        elif name.endswith(".joblib"):
            joblib.dump(model, file)
        elif name.endswith(".onnx"):
            onnx_model = to_onnx(model, digits_X[:1].astype(np.float32), options={"zipmap": False})
            file.write_bytes(onnx_model.SerializeToString())
        elif name.endswith(".txt"):
            model.booster_.save_model(file)
        else:
            model.save_model(file)
    (directory / "strings.onnx").write_bytes(strings_graph().SerializeToString())
    (directory / "corrupt.onnx").write_bytes(b"\x08\x07" + bytes(range(256)) * 4)
    return fitted


def strings_graph() -> onnx.ModelProto:
    """An ONNX graph with a BYTES input and output, a symbolic and an unknown dimension: text echoed, x doubled."""
    helper = onnx.helper
    graph = helper.make_graph(
        [helper.make_node("Identity", ["text"], ["echo"]), helper.make_node("Add", ["x", "x"], ["doubled"])],
        "strings",
        [
            helper.make_tensor_value_info("text", onnx.TensorProto.STRING, ["N"]),
            helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [None, 3]),
        ],
        [
            helper.make_tensor_value_info("echo", onnx.TensorProto.STRING, ["N"]),
            helper.make_tensor_value_info("doubled", onnx.TensorProto.DOUBLE, [None, 3]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
