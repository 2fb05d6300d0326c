"""`Model.from_file`: model files trained here from the libraries' own data, served by a real server
(`oip-asgi serve tests.apps.files:models`) and called by NVIDIA's tritonclient over HTTP and gRPC;
what the file says becomes the metadata, what the caller says wins, and what cannot load says why."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import joblib
import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("onnxruntime")
pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")
import onnxruntime
import pandas
import skops.io
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.datasets import load_diabetes, load_digits, load_iris, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from oip_asgi import BadRequest, Model, ModelNotReady, TensorSpec
from tests.support.model_files import export
from tests.support.servers import HOST, child_env, free_port, serving

# Trains a model of each kind and starts a server: the slow part of the suite.
pytestmark = pytest.mark.slow

IRIS = load_iris(as_frame=True).data.to_numpy()[::10]  # 15 rows, every class
DIGITS = load_digits().data[:20].astype(np.float32)
ROWS = make_classification(n_samples=300, n_features=6, n_informative=4, random_state=0)[0][:12]
DIABETES = load_diabetes().data[:12]
TEXT = np.array(["ünïcode".encode(), b"ascii", b""], dtype=np.object_)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    directory = tmp_path_factory.mktemp("model-files")
    return directory, export(directory)


@pytest.fixture(scope="module")
def server(files: tuple[Path, dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """The files served by `oip-asgi serve`: its REST and gRPC addresses."""
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "tests.apps.files:models", "--port", str(port), "--grpc-port", str(grpc_port)]
    # "broken" never loads, so the server is never ready: wait for one model instead.
    with serving(argv, port, ready_path="/v2/models/iris/ready", env={"OIP_MODEL_FILES": str(files[0])}):
        yield f"{HOST}:{port}", f"{HOST}:{grpc_port}"


Infer = Callable[..., dict[str, np.ndarray]]


@pytest.fixture(scope="module", params=["http", "grpc"])
def infer(request: pytest.FixtureRequest, server: tuple[str, str]) -> Iterator[Infer]:
    """Inference by tritonclient over one wire: model, {input: array}, [outputs], class_count -> {output: array}."""
    wire = request.param
    module: Any = httpclient if wire == "http" else grpcclient
    client = module.InferenceServerClient(server[0] if wire == "http" else server[1])

    def call(model: str, inputs: dict[str, tuple[np.ndarray, str]], outputs: list[str], classes: int = 0) -> Any:
        tensors = []
        for name, (array, datatype) in inputs.items():
            tensor = module.InferInput(name, list(array.shape), datatype)
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        requested = [module.InferRequestedOutput(name, class_count=classes) for name in outputs]
        result = client.infer(model, tensors, outputs=requested)
        return {name: result.as_numpy(name) for name in outputs}

    yield call
    client.close()


def frame(rows: np.ndarray) -> pandas.DataFrame:
    return pandas.DataFrame(rows, columns=load_iris(as_frame=True).data.columns)


def expected(fitted: dict[str, Any], directory: Path) -> dict[str, tuple[dict[str, tuple[np.ndarray, str]], dict]]:
    """Each served model's input, and its outputs as the library itself computes them."""
    iris, pca, scaled = fitted["iris.skops"], fitted["pca.skops"], fitted["scaled.joblib"]
    session = onnxruntime.InferenceSession(str(directory / "digits.onnx"), providers=["CPUExecutionProvider"])
    labels, probabilities = session.run(None, {"X": DIGITS})
    xgb_iris, xgb_binary, lgb_iris = fitted["iris.json"], fitted["binary.ubj"], fitted["iris.txt"]
    return {
        "iris": (
            {"input-0": (IRIS, "FP64")},
            {"predict": iris.predict(frame(IRIS)), "predict_proba": iris.predict_proba(frame(IRIS))},
        ),
        "pca": ({"input-0": (IRIS, "FP64")}, {"transform": pca.transform(IRIS)}),
        "scaled": (
            {"input-0": (ROWS, "FP64")},
            {"predict": scaled.predict(ROWS), "predict_proba": scaled.predict_proba(ROWS)},
        ),
        "digits": ({"X": (DIGITS, "FP32")}, {"label": labels, "probabilities": probabilities}),
        "strings": (
            {"text": (TEXT, "BYTES"), "x": (IRIS[:, :3], "FP64")},
            {"echo": np.array([text.decode() for text in TEXT]), "doubled": IRIS[:, :3] * 2},
        ),
        "xgb_iris": (
            {"input-0": (IRIS.astype(np.float32), "FP32")},
            {"predict": xgb_iris.predict(IRIS), "predict_proba": xgb_iris.predict_proba(IRIS)},
        ),
        "xgb_binary": (
            {"input-0": (ROWS.astype(np.float32), "FP32")},
            {"predict": xgb_binary.predict(ROWS), "predict_proba": xgb_binary.predict_proba(ROWS)},
        ),
        "xgb_diabetes": (
            {"input-0": (DIABETES.astype(np.float32), "FP32")},
            {"predict": fitted["diabetes.json"].predict(DIABETES.astype(np.float32))},
        ),
        "lgb_iris": (
            {"input-0": (IRIS, "FP64")},
            {"predict": lgb_iris.predict(IRIS), "predict_proba": lgb_iris.predict_proba(IRIS)},
        ),
        "lazy": (
            {"input-0": (IRIS.astype(np.float32), "FP32")},
            {"predict": xgb_iris.predict(IRIS), "predict_proba": xgb_iris.predict_proba(IRIS)},
        ),
    }


MODELS = ["iris", "pca", "scaled", "digits", "strings", "xgb_iris", "xgb_binary", "xgb_diabetes", "lgb_iris", "lazy"]


@pytest.mark.parametrize("model", MODELS)
def test_answers_equal_the_library(files: tuple[Path, dict[str, Any]], infer: Infer, model: str) -> None:
    inputs, outputs = expected(files[1], files[0])[model]
    got = infer(model, inputs, list(outputs))
    for name, want in outputs.items():
        if want.dtype.kind in "OU":  # class names come back as BYTES
            assert got[name].tolist() == [label.encode() for label in want.tolist()], name
        elif want.dtype.kind == "f":
            np.testing.assert_allclose(got[name], want, rtol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], want, err_msg=name)


def test_classification_answers_with_class_names(files: tuple[Path, dict[str, Any]], infer: Infer) -> None:
    iris = files[1]["iris.skops"]
    scores = iris.predict_proba(frame(IRIS))
    got = infer("iris", {"input-0": (IRIS, "FP64")}, ["predict_proba"], classes=1)["predict_proba"]
    best = scores.argmax(axis=1)
    assert [entry.decode().split(":")[1:] for entry in got[:, 0]] == [
        [str(index), iris.classes_[index]] for index in best
    ]
    assert {entry.decode().split(":")[2] for entry in got[:, 0]} == {"setosa", "versicolor", "virginica"}
    digits = infer("digits", {"X": (DIGITS, "FP32")}, ["probabilities"], classes=2)["probabilities"]
    assert [entry.decode().split(":", 1)[1] for entry in digits[:3, 0]] == ["0:0", "1:1", "2:2"]


def test_overrides_win(infer: Infer, server: tuple[str, str], files: tuple[Path, dict[str, Any]]) -> None:
    metadata = httpx.get(f"http://{server[0]}/v2/models/overridden").json()
    assert metadata == {
        "name": "overridden",
        "versions": ["3"],
        "platform": "scikit-learn",
        "inputs": [{"name": "features", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "predict_proba", "datatype": "FP64", "shape": [-1, 3]}],
        "properties": {
            "estimator": "LogisticRegression",
            "feature_names": '["sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)"]',
            "team": "botany",
        },
    }
    got = infer("overridden", {"features": (IRIS[:1].astype(np.float32), "FP32")}, ["predict_proba"], classes=1)
    assert got["predict_proba"][0, 0].decode().endswith(":0:Iris setosa")


def test_metadata_as_derived_from_the_files(server: tuple[str, str]) -> None:
    def described(model: str) -> dict[str, Any]:
        metadata: dict[str, Any] = httpx.get(f"http://{server[0]}/v2/models/{model}").json()
        tensors = [(t["name"], t["datatype"], t["shape"]) for t in metadata["inputs"] + metadata["outputs"]]
        return {"platform": metadata["platform"], "tensors": tensors, "properties": metadata.get("properties")}

    assert described("iris")["tensors"] == [
        ("input-0", "FP64", [-1, 4]),
        ("predict", "BYTES", [-1]),
        ("predict_proba", "FP64", [-1, 3]),
    ]
    assert described("pca") == {
        "platform": "sklearn",
        "tensors": [("input-0", "FP64", [-1, 4]), ("transform", "FP64", [-1, 2])],
        "properties": {"estimator": "PCA"},
    }
    assert described("scaled")["tensors"] == [
        ("input-0", "FP64", [-1, 6]),
        ("predict", "INT64", [-1]),
        ("predict_proba", "FP64", [-1, 2]),
    ]
    digits = described("digits")
    assert digits["platform"] == "onnxruntime_onnx"
    assert digits["tensors"] == [("X", "FP32", [-1, 64]), ("label", "INT64", [-1]), ("probabilities", "FP32", [-1, 10])]
    assert digits["properties"]["producer"] == "skl2onnx"
    assert described("strings")["tensors"] == [
        ("text", "BYTES", [-1]),
        ("x", "FP64", [-1, 3]),
        ("echo", "BYTES", [-1]),
        ("doubled", "FP64", [-1, 3]),
    ]
    assert described("xgb_iris") == {
        "platform": "xgboost",
        "tensors": [("input-0", "FP32", [-1, 4]), ("predict", "INT64", [-1]), ("predict_proba", "FP32", [-1, 3])],
        "properties": {"objective": "multi:softprob"},
    }
    assert described("xgb_binary")["tensors"][2] == ("predict_proba", "FP32", [-1, 2])
    assert described("xgb_diabetes")["tensors"] == [("input-0", "FP32", [-1, 10]), ("predict", "FP32", [-1])]
    assert described("lgb_iris") == {
        "platform": "lightgbm",
        "tensors": [("input-0", "FP64", [-1, 4]), ("predict", "INT64", [-1]), ("predict_proba", "FP64", [-1, 3])],
        "properties": {"objective": "multiclass num_class:3"},
    }
    grpc = grpcclient.InferenceServerClient(server[1])
    try:
        metadata = grpc.get_model_metadata("digits", as_json=True)
    finally:
        grpc.close()
    assert (metadata["platform"], [(t["name"], t["datatype"]) for t in metadata["outputs"]]) == (
        "onnxruntime_onnx",
        [("label", "INT64"), ("probabilities", "FP32")],
    )


def test_batching_through_a_file_model(server: tuple[str, str]) -> None:
    rows = load_digits().data.astype(np.float32)[:48]

    def one(row: int) -> np.ndarray:
        client = httpclient.InferenceServerClient(server[0])
        try:
            tensor = httpclient.InferInput("X", [1, 64], "FP32")
            tensor.set_data_from_numpy(rows[row : row + 1])
            return np.asarray(client.infer("digits_batched", [tensor]).as_numpy("probabilities"))
        finally:
            client.close()

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(len(rows))))
    alone = [one(row) for row in range(3)]
    # The same rows, alone or in a batch (onnxruntime vectorises by batch size: the last bits may differ).
    np.testing.assert_allclose(np.concatenate(answers[:3]), np.concatenate(alone), rtol=1e-5, atol=1e-7)
    statistics = httpx.get(f"http://{server[0]}/v2/models/digits_batched/stats").json()["model_stats"][0]
    assert statistics["inference_count"] == len(rows) + 3
    assert statistics["execution_count"] < statistics["inference_count"]  # some requests shared a call


def test_a_corrupt_or_missing_file_loaded_in_the_background_is_a_503_that_says_why(server: tuple[str, str]) -> None:
    response = httpx.post(
        f"http://{server[0]}/v2/models/broken/infer",
        json={"inputs": [{"name": "X", "datatype": "FP32", "shape": [1], "data": [1.0]}]},
    )
    assert response.status_code == 503
    assert "failed to load: ModelFileError: cannot load ONNX model file" in response.json()["error"]
    assert "corrupt.onnx" in response.json()["error"]
    assert httpx.get(f"http://{server[0]}/v2/models/broken/ready").status_code != 200
    missing = httpx.post(
        f"http://{server[0]}/v2/models/missing/infer",
        json={"inputs": [{"name": "X", "datatype": "FP32", "shape": [1], "data": [1.0]}]},
    )
    assert missing.status_code == 503
    assert "failed to load: FileNotFoundError: no model file at" in missing.json()["error"]


# In process: what is refused, and why.


class Doubler(TransformerMixin, BaseEstimator):  # a type skops has never heard of
    def fit(self, X: Any, y: Any = None) -> Doubler:
        return self

    def transform(self, X: Any) -> Any:
        return np.asarray(X) * 2


class NeedsALibrary(TransformerMixin, BaseEstimator):  # as a step that imports its library only when called
    def fit(self, X: Any, y: Any = None) -> NeedsALibrary:
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def transform(self, X: Any) -> Any:
        import oip_asgi_test_absent_library  # type: ignore[import-not-found]  # noqa: F401

        return X


def test_a_model_that_cannot_run_for_a_missing_library_fails_its_load(tmp_path: Path) -> None:
    path = tmp_path / "needs.joblib"
    joblib.dump(NeedsALibrary().fit(IRIS), path)
    with pytest.raises(
        ImportError, match=r"needs\.joblib' cannot run: .*No module named 'oip_asgi_test_absent_library'"
    ):
        Model.from_file(path, trusted=True)


def test_clusters_and_outliers_are_integers(tmp_path: Path) -> None:
    from sklearn.cluster import KMeans
    from sklearn.ensemble import IsolationForest

    X = load_iris().data
    for estimator in (KMeans(n_clusters=3, n_init=1, random_state=0), IsolationForest(random_state=0)):
        path = tmp_path / f"{type(estimator).__name__}.skops"
        skops.io.dump(estimator.fit(X), path)
        model = Model.from_file(path, trusted=True)  # skops trusts no tree (sklearn.tree._tree.Tree) by default
        assert model.outputs is not None and model.outputs[0] == TensorSpec("predict", "INT64", [-1])
        assert model.predict(**{"input-0": X})["predict"].tolist() == estimator.predict(X).tolist()


def test_a_pickle_is_refused_until_trusted(files: tuple[Path, dict[str, Any]]) -> None:
    path = files[0] / "scaled.joblib"
    with pytest.raises(ValueError, match=r"runs whatever code it holds.*trusted=True") as refused:
        Model.from_file(path)
    assert str(path) in str(refused.value)
    model = Model.from_file(path, trusted=True)
    assert model.name == "scaled" and model.platform == "sklearn"


def test_an_untrusted_skops_type_is_refused_by_name(tmp_path: Path) -> None:
    iris = load_iris()
    path = tmp_path / "doubled.skops"
    skops.io.dump(make_pipeline(Doubler(), LogisticRegression(max_iter=1000)).fit(iris.data, iris.target), path)
    name = f"{__name__}.Doubler"
    with pytest.raises(ValueError, match=rf"does not trust by default: {name}; .*trusted=\['{name}'\]"):
        Model.from_file(path)
    model = Model.from_file(path, trusted=[name])
    result = model.predict(**{"input-0": iris.data[:5]})
    assert result["predict"].tolist() == [0] * 5


def test_corrupt_and_unreadable_files_say_so(files: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot load ONNX model file .*corrupt\.onnx"):
        Model.from_file(files[0] / "corrupt.onnx")
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"learner": 1}')
    with pytest.raises(ValueError, match=r"cannot load XGBoost model file .*garbage\.json"):
        Model.from_file(garbage)
    (tmp_path / "broken.skops").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(ValueError, match=r"cannot read model file .*broken\.skops' with skops: BadZipFile"):
        Model.from_file(tmp_path / "broken.skops")
    with pytest.raises(FileNotFoundError, match="no model file at"):
        Model.from_file(tmp_path / "missing.onnx")
    (tmp_path / "notes").write_text("hello")
    with pytest.raises(ValueError, match=r"cannot tell which library .*format= one of 'onnx'"):
        Model.from_file(tmp_path / "notes")


def test_a_zipmap_output_is_refused_with_how_to_export_without_it(tmp_path: Path) -> None:
    from skl2onnx import to_onnx

    X, y = load_iris(return_X_y=True)
    path = tmp_path / "zipmap.onnx"
    path.write_bytes(to_onnx(LogisticRegression(max_iter=1000).fit(X, y), X[:1].astype(np.float32)).SerializeToString())
    with pytest.raises(
        ValueError, match=r"output 'output_probability' is seq\(map\(int64,tensor\(float\)\)\).*'zipmap': False"
    ):
        Model.from_file(path)


def test_the_format_is_read_from_the_content_where_the_name_says_nothing(
    files: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    for source, format in [
        ("iris.skops", "sklearn"),
        ("digits.onnx", "onnx"),
        ("iris.json", "xgboost"),
        ("iris.txt", "lightgbm"),
    ]:
        copy = tmp_path / f"{format}-model"
        shutil.copyfile(files[0] / source, copy)
        assert Model.from_file(copy).platform == {"onnx": "onnxruntime_onnx"}.get(format, format)
    shutil.copyfile(files[0] / "scaled.joblib", tmp_path / "scaled.bin")
    with pytest.raises(ValueError, match="is a pickle"):
        Model.from_file(tmp_path / "scaled.bin")
    assert Model.from_file(files[0] / "iris.txt", format="lightgbm", name="flowers").name == "flowers"
    with pytest.raises(ValueError, match="unknown model file format 'keras'"):
        Model.from_file(files[0] / "iris.txt", format="keras")


def test_options_the_format_does_not_take_are_refused(files: tuple[Path, dict[str, Any]]) -> None:
    with pytest.raises(TypeError, match=r"unknown option device for a XGBoost file; it takes .*max_batch_size"):
        Model.from_file(files[0] / "iris.json", device="cuda")
    with pytest.raises(ValueError, match=r"has no output 'scores'; its outputs are 'predict', 'predict_proba'"):
        Model.from_file(files[0] / "iris.json", outputs=[TensorSpec("scores", "FP32", [-1])])


def test_onnx_session_options_and_providers_reach_the_session(files: tuple[Path, dict[str, Any]]) -> None:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    model = Model.from_file(files[0] / "digits.onnx", session_options=options, providers=["CPUExecutionProvider"])
    assert model.properties is not None and model.properties["providers"] == "CPUExecutionProvider"
    session = model.predict.session  # type: ignore[attr-defined]
    assert session.get_session_options().intra_op_num_threads == 1


def test_a_missing_library_names_its_extra(files: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xgboost", None)  # as if not installed
    with pytest.raises(ImportError, match=r"needs the xgboost package: pip install -e '\.\[xgboost\]' in a clone"):
        Model.from_file(files[0] / "iris.json")


def test_import_oip_asgi_imports_no_model_library() -> None:
    libraries = ["onnxruntime", "onnx", "sklearn", "skops", "joblib", "xgboost", "lightgbm", "torch", "pandas"]
    script = f"import sys, oip_asgi; print([name for name in {libraries!r} if name in sys.modules])"
    result = subprocess.run([sys.executable, "-c", script], env=child_env(), capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_lazy_model_is_not_ready_until_its_file_loads(files: tuple[Path, dict[str, Any]]) -> None:
    model = Model.from_file(files[0] / "iris.txt", lazy=True)
    assert model.platform == "lightgbm" and model.name == "iris" and model.load is not None
    with pytest.raises(ModelNotReady, match="has not loaded yet"):
        model.predict(**{"input-0": IRIS})
    model.load()  # what the server core runs before the model serves
    assert model.predict(**{"input-0": IRIS})["predict"].tolist() == files[1]["iris.txt"].predict(IRIS).tolist()
    with pytest.raises(BadRequest, match="takes inputs input-0; the request has X"):
        model.predict(X=IRIS)
    declared = Model.from_file(
        files[0] / "iris.txt",
        lazy=True,
        inputs=[TensorSpec("features", "FP64", [-1, 4])],
        outputs=[TensorSpec("predict_proba", "FP64", [-1, 3])],
    )
    assert [spec.name for spec in declared.inputs or ()] == ["features"]
    assert declared.load is not None
    declared.load()
    assert list(declared.predict(features=IRIS)) == ["predict_proba"]


def test_a_model_fitted_on_named_columns_without_pandas_fails_its_load_naming_pandas(
    files: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if not installed
    with pytest.raises(ImportError, match=r"fitted on named columns .*needs the pandas package: pip install"):
        Model.from_file(files[0] / "iris.skops")  # its load fails, rather than every request after it
    lazy = Model.from_file(files[0] / "iris.skops", lazy=True)
    assert lazy.load is not None
    with pytest.raises(ImportError, match="needs the pandas package"):
        lazy.load()  # in the background: the model is not ready, with this reason
    assert Model.from_file(files[0] / "pca.skops").name == "pca"  # fitted on an array: no pandas needed
