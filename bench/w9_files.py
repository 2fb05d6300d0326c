"""W9's model files: trained once, the libraries' own answers to the requests, and one library call's CPU time.

Runs in the `ours` environment (scikit-learn, XGBoost, onnxruntime, skl2onnx), called by the harness:

    python bench/w9_files.py train DIR   # DIR/hgb.joblib, xgb.json, mlp.onnx; requests.npz; expected.npz
    python bench/w9_files.py time DIR    # CPU ms of one library call on the [1,100] request, per file kind

Every server loads these very files. The requests are FP32 and the expected answers are what each
library returns when called directly on them (the answer checks compare every server's with these).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20240409
FEATURES = 100
ROWS = (1, 64)
FILES = {"sklearn": "hgb.joblib", "xgboost": "xgb.json", "onnx": "mlp.onnx"}
# MLServer has no ONNX runtime: PyTriton serves that file (apps/pytriton_app.py).
MLSERVER_RUNTIMES = {"sklearn": "mlserver_sklearn.SKLearnModel", "xgboost": "mlserver_xgboost.XGBoostModel"}
ONNX_INPUT = "X"


def train(directory: Path) -> None:
    import joblib
    import xgboost
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.datasets import make_classification
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.neural_network import MLPClassifier

    x, y = make_classification(n_samples=4000, n_features=FEATURES, n_informative=30, random_state=SEED)
    x = x.astype(np.float32)
    joblib.dump(HistGradientBoostingClassifier(max_iter=100, random_state=SEED).fit(x, y), directory / FILES["sklearn"])
    booster = xgboost.XGBClassifier(n_estimators=100, max_depth=6, random_state=SEED, n_jobs=1).fit(x, y)
    booster.save_model(directory / FILES["xgboost"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a ConvergenceWarning at max_iter: the weights are what they are
        mlp = MLPClassifier(hidden_layer_sizes=(128, 64), max_iter=200, random_state=SEED).fit(x, y)
    # No ZipMap: the probabilities stay a tensor, which Triton and oip-asgi both serve.
    graph = to_onnx(mlp, initial_types=[(ONNX_INPUT, FloatTensorType([None, FEATURES]))], options={"zipmap": False})
    (directory / FILES["onnx"]).write_bytes(graph.SerializeToString())
    for kind, runtime in MLSERVER_RUNTIMES.items():
        settings = {
            "name": f"w9_{kind}",
            "implementation": runtime,
            "parameters": {"uri": str((directory / FILES[kind]).resolve())},
        }
        folder = directory / "mlserver" / f"w9_{kind}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model-settings.json").write_text(json.dumps(settings, indent=1) + "\n")
    rng = np.random.default_rng(SEED + 1)
    requests = {f"x{rows}": rng.standard_normal((rows, FEATURES)).astype(np.float32) for rows in ROWS}
    np.savez(directory / "requests.npz", **requests)
    expected = {}
    calls = library_calls(directory)
    for kind, call in calls.items():
        for rows in ROWS:
            for name, array in call(requests[f"x{rows}"]).items():
                expected[f"{kind}{rows}.{name}"] = array
    np.savez(directory / "expected.npz", **expected)


def library_calls(directory: Path) -> dict[str, Callable[[np.ndarray], dict[str, np.ndarray]]]:
    """Each file's library called directly, as the servers call it: only the probabilities, plus ONNX's label."""
    import joblib
    import onnxruntime
    import xgboost

    estimator = joblib.load(directory / FILES["sklearn"])
    booster = xgboost.Booster(model_file=str(directory / FILES["xgboost"]))
    session = onnxruntime.InferenceSession(str(directory / FILES["onnx"]), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]

    def xgboost_call(x: np.ndarray) -> dict[str, np.ndarray]:
        positive = booster.inplace_predict(x)
        return {"predict_proba": np.stack([1 - positive, positive], axis=1)}

    return {
        "sklearn": lambda x: {"predict_proba": estimator.predict_proba(x)},
        "xgboost": xgboost_call,
        "onnx": lambda x: dict(zip(names, session.run(None, {ONNX_INPUT: x}), strict=True)),
    }


def cpu_per_call(call: Callable[[np.ndarray], Any], x: np.ndarray, calls: int, repeats: int) -> float:
    """CPU seconds (this process, all threads) per call: the median of `repeats` loops of `calls` calls."""
    from apps._mlp import per_call  # bench/apps/, found from bench/ (this file's folder)

    return per_call(lambda: call(x), calls, repeats, warmup=calls // 10, clock=time.process_time)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("train", "time"))
    parser.add_argument("directory", type=Path)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.command == "train":
        args.directory.mkdir(parents=True, exist_ok=True)
        train(args.directory)
        return
    x = np.load(args.directory / "requests.npz")["x1"]
    times = {
        kind: cpu_per_call(call, x, args.calls, args.repeats) * 1000
        for kind, call in library_calls(args.directory).items()
    }
    print(json.dumps({"call_ms": times}))


if __name__ == "__main__":
    main()
