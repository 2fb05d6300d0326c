"""A Triton-style model repository folder read into `Model` declarations (`_declarations.repository`), in-process.

Every model is trained here from the data scikit-learn ships; the config.pbtxt files are written for these tests.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest
import skops.io
from skl2onnx import to_onnx
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

from oip_asgi import Model
from oip_asgi._declarations.repository import RepositoryError, fingerprint, model_names, read_model
from oip_asgi._hosts.cli.kserve import storage_repository

IRIS_X, IRIS_Y = load_iris(return_X_y=True)
SPECIES = ["setosa", "versicolor", "virginica"]


@pytest.fixture(scope="module")
def classifier() -> LogisticRegression:
    return LogisticRegression(max_iter=1000).fit(IRIS_X, IRIS_Y)


def put(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    return path


def skops_file(path: Path, estimator: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    skops.io.dump(estimator, path)
    return path


EVERY_HONOURED_FIELD = """
name: "iris"
backend: "sklearn"
max_batch_size: 16
default_model_filename: "classifier.skops"
version_policy: { specific: { versions: [1, 3] } }
input [ { name: "input-0", data_type: TYPE_FP64, dims: [ 4 ] } ]
output [
  { name: "predict", data_type: TYPE_INT64, dims: [ ], label_filename: "species.txt" },
  { name: "predict_proba", data_type: TYPE_FP64, dims: [ 3 ] }
]
dynamic_batching { max_queue_delay_microseconds: 500 }
parameters { key: "team" value: { string_value: "flowers" } }
"""


def test_every_honoured_field_of_config_pbtxt(tmp_path: Path, classifier: LogisticRegression) -> None:
    for version in ("1", "2", "3"):
        skops_file(tmp_path / "iris" / version / "classifier.skops", classifier)
    put(tmp_path / "iris" / "config.pbtxt", EVERY_HONOURED_FIELD)
    put(tmp_path / "iris" / "species.txt", "\n".join(SPECIES) + "\n")

    read = read_model(tmp_path, "iris")

    assert [model.version for model in read.versions] == ["1", "3"]  # the specific policy, ascending
    model = read.versions[-1]
    assert model.name == "iris"
    assert model.platform == "sklearn"
    assert [(spec.name, spec.datatype, list(spec.shape)) for spec in model.inputs or ()] == [
        ("input-0", "FP64", [-1, 4])
    ]
    assert [(spec.name, spec.datatype, list(spec.shape)) for spec in model.outputs or ()] == [
        ("predict", "INT64", [-1]),
        ("predict_proba", "FP64", [-1, 3]),
    ]
    assert (model.max_batch_size, model.max_batch_delay) == (16, 0.0005)
    assert model.labels_for("predict") == SPECIES
    assert model.properties == {"estimator": "LogisticRegression", "team": "flowers"}  # the file's and the config's
    answer = model.predict(**{"input-0": IRIS_X[:5]})
    np.testing.assert_array_equal(answer["predict"], classifier.predict(IRIS_X[:5]))
    np.testing.assert_allclose(answer["predict_proba"], classifier.predict_proba(IRIS_X[:5]))
    assert read.config is not None
    assert read.config["version_policy"] == {"specific": {"versions": [1, 3]}}
    assert read.config["dynamic_batching"] == {"max_queue_delay_microseconds": 500}  # a number, as Triton writes it
    assert read.config["output"][0] == {
        "name": "predict",
        "data_type": "TYPE_INT64",
        "label_filename": "species.txt",
    }
    assert read.warnings == []


def test_batching_without_dynamic_batching_takes_batches_one_call_each(
    tmp_path: Path, classifier: LogisticRegression
) -> None:
    skops_file(tmp_path / "iris" / "1" / "model.skops", classifier)
    config = 'max_batch_size: 8\ninput [{ name: "input-0", data_type: TYPE_FP64, dims: [4] }]'
    put(tmp_path / "iris" / "config.pbtxt", config)
    model = read_model(tmp_path, "iris").versions[0]
    assert model.max_batch_size is None
    assert [list(spec.shape) for spec in model.inputs or ()] == [[-1, 4]]


@pytest.mark.parametrize(
    ("policy", "served"),
    [
        ("", ["10"]),  # Triton's default: the newest one
        ("version_policy: { latest: { num_versions: 2 } }", ["2", "10"]),
        ("version_policy: { all: { } }", ["1", "2", "10"]),
        ("version_policy: { specific: { versions: [2] } }", ["2"]),
    ],
    ids=["default", "latest-2", "all", "specific"],
)
def test_version_policies_choose_integer_folders_in_numeric_order(
    tmp_path: Path, classifier: LogisticRegression, policy: str, served: list[str]
) -> None:
    for version in ("1", "2", "10"):
        skops_file(tmp_path / "iris" / version / "model.skops", classifier)
    (tmp_path / "iris" / "notes").mkdir()  # not an integer: not a version
    put(tmp_path / "iris" / "config.pbtxt", policy)
    assert [model.version for model in read_model(tmp_path, "iris").versions] == served


def test_a_specific_version_without_its_folder_is_refused(tmp_path: Path, classifier: LogisticRegression) -> None:
    skops_file(tmp_path / "iris" / "1" / "model.skops", classifier)
    put(tmp_path / "iris" / "config.pbtxt", "version_policy: { specific: { versions: [1, 4] } }")
    with pytest.raises(RepositoryError, match="no folder: 4"):
        read_model(tmp_path, "iris")


def test_without_a_config_everything_comes_from_the_file(tmp_path: Path, classifier: LogisticRegression) -> None:
    skops_file(tmp_path / "iris" / "1" / "iris.skops", classifier)  # the one file, whatever its name
    read = read_model(tmp_path, "iris")
    assert read.config is None and read.warnings == []
    (model,) = read.versions
    assert (model.name, model.version, model.platform) == ("iris", "1", "sklearn")
    assert [spec.name for spec in model.outputs or ()] == ["predict", "predict_proba"]


def test_the_config_is_completed_from_the_file_as_triton_completes_it(
    tmp_path: Path, classifier: LogisticRegression
) -> None:
    onnx = to_onnx(classifier, IRIS_X[:1].astype(np.float32), options={"zipmap": False})
    put(tmp_path / "iris" / "1" / "model.onnx", onnx.SerializeToString())
    put(tmp_path / "iris" / "config.pbtxt", 'platform: "onnxruntime_onnx"')
    read = read_model(tmp_path, "iris")
    assert read.config is not None
    assert {key: read.config[key] for key in ("name", "platform", "backend", "version_policy")} == {
        "name": "iris",
        "platform": "onnxruntime_onnx",
        "backend": "onnxruntime",
        "version_policy": {"latest": {"num_versions": 1}},
    }
    assert [tensor["name"] for tensor in read.config["input"]] == ["X"]
    assert [tensor["name"] for tensor in read.config["output"]] == ["label", "probabilities"]
    answer = read.versions[0].predict(X=IRIS_X[:3].astype(np.float32))
    np.testing.assert_array_equal(answer["label"], classifier.predict(IRIS_X[:3]))


def test_a_config_naming_another_model_is_refused(tmp_path: Path, classifier: LogisticRegression) -> None:
    skops_file(tmp_path / "iris" / "1" / "model.skops", classifier)
    put(tmp_path / "iris" / "config.pbtxt", 'name: "roses"')
    with pytest.raises(RepositoryError, match="'roses'"):
        read_model(tmp_path, "iris")


def test_an_override_config_replaces_config_pbtxt(tmp_path: Path, classifier: LogisticRegression) -> None:
    for version in ("1", "2"):
        skops_file(tmp_path / "iris" / version / "model.skops", classifier)
    put(tmp_path / "iris" / "config.pbtxt", "version_policy: { all: { } }")
    read = read_model(tmp_path, "iris", config={"version_policy": {"specific": {"versions": ["1"]}}})
    assert [model.version for model in read.versions] == ["1"]
    assert read.config is not None and read.config["version_policy"] == {"specific": {"versions": [1]}}
    with pytest.raises(RepositoryError, match="not a valid Triton ModelConfig"):
        read_model(tmp_path, "iris", config={"max_batch_sise": 4})


def test_default_model_filename_picks_among_several_files(tmp_path: Path, classifier: LogisticRegression) -> None:
    other = LogisticRegression(max_iter=1000).fit(IRIS_X[:, :2], IRIS_Y)
    skops_file(tmp_path / "iris" / "1" / "wide.skops", classifier)
    skops_file(tmp_path / "iris" / "1" / "narrow.skops", other)
    with pytest.raises(RepositoryError, match="default_model_filename"):
        read_model(tmp_path, "iris")
    put(tmp_path / "iris" / "config.pbtxt", 'default_model_filename: "narrow.skops"')
    (model,) = read_model(tmp_path, "iris").versions
    assert [list(spec.shape) for spec in model.inputs or ()] == [[-1, 2]]


def test_a_pickle_loads_only_where_the_config_trusts_it(tmp_path: Path, classifier: LogisticRegression) -> None:
    (tmp_path / "iris" / "1").mkdir(parents=True)
    joblib.dump(classifier, tmp_path / "iris" / "1" / "model.joblib")
    with pytest.raises(RepositoryError, match="trust"):
        read_model(tmp_path, "iris")
    put(tmp_path / "iris" / "config.pbtxt", 'parameters { key: "trusted" value: { string_value: "true" } }')
    (model,) = read_model(tmp_path, "iris").versions
    np.testing.assert_array_equal(model.predict(**{"input-0": IRIS_X[:4]})["predict"], classifier.predict(IRIS_X[:4]))


MODEL_PY_CALLABLE = """
import numpy as np

def model(x):
    return {"y": np.asarray(x) * 2}
"""

MODEL_PY_MODEL = """
from oip_asgi import Model, TensorSpec

def double(x):
    return x * 2

model = Model(double, inputs=[TensorSpec("x", "FP32", [-1])], outputs=[TensorSpec("y", "FP32", [-1])],
              max_concurrency=3, version="99", name="ignored")
"""

TENSORS_XY = """
input [ { name: "x", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ -1 ] } ]
"""


def test_model_py_defines_a_callable_the_config_describes(tmp_path: Path) -> None:
    put(tmp_path / "double" / "1" / "model.py", MODEL_PY_CALLABLE)
    put(tmp_path / "double" / "config.pbtxt", 'backend: "python"\n' + TENSORS_XY)
    read = read_model(tmp_path, "double")
    (model,) = read.versions
    assert (model.name, model.version, model.platform) == ("double", "1", "python")
    assert [spec.name for spec in model.inputs or ()] == ["x"]
    np.testing.assert_array_equal(model.predict(x=np.array([1.0, 2.0]))["y"], [2.0, 4.0])


def test_model_py_defines_a_model_served_under_its_folder_and_version(tmp_path: Path) -> None:
    put(tmp_path / "double" / "2" / "model.py", MODEL_PY_MODEL)
    (model,) = read_model(tmp_path, "double").versions
    assert (model.name, model.version, model.max_concurrency) == ("double", "2", 3)
    np.testing.assert_array_equal(model.predict(x=np.array([3.0])), [6.0])


def test_model_py_without_model_or_raising_is_a_repository_error(tmp_path: Path) -> None:
    put(tmp_path / "empty" / "1" / "model.py", "answer = 42\n")
    with pytest.raises(RepositoryError, match="defines no `model`"):
        read_model(tmp_path, "empty")
    put(tmp_path / "broken" / "1" / "model.py", "raise RuntimeError('no GPU here')\n")
    with pytest.raises(RepositoryError, match="RuntimeError: no GPU here"):
        read_model(tmp_path, "broken")


def test_a_corrupt_model_file_is_a_repository_error_with_its_reason(tmp_path: Path) -> None:
    put(tmp_path / "iris" / "1" / "model.skops", b"PK\x03\x04 not really a zip")
    with pytest.raises(RepositoryError, match="model.skops") as raised:
        read_model(tmp_path, "iris")
    assert "skops" in str(raised.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("max_batch_size: many", "not a valid Triton ModelConfig"),
        ("colour: blue", "not a valid Triton ModelConfig"),
        ('input [{ name: "x", dims: [1] }]', "has no data_type"),
        ('output [{ name: "y", data_type: TYPE_FP32, dims: [1], label_filename: "../labels" }]', "label file"),
    ],
    ids=["bad-value", "unknown-field", "no-datatype", "label-file-outside"],
)
def test_a_bad_config_is_a_repository_error(
    tmp_path: Path, classifier: LogisticRegression, config: str, message: str
) -> None:
    skops_file(tmp_path / "iris" / "1" / "model.skops", classifier)
    put(tmp_path / "iris" / "config.pbtxt", config)
    with pytest.raises(RepositoryError, match=message):
        read_model(tmp_path, "iris")


def test_no_versions_or_no_model_is_a_repository_error(tmp_path: Path) -> None:
    (tmp_path / "hollow").mkdir()
    with pytest.raises(RepositoryError, match="no version folders"):
        read_model(tmp_path, "hollow")
    with pytest.raises(RepositoryError, match="no model 'absent'"):
        read_model(tmp_path, "absent")


def test_warnings_name_every_field_not_acted_on_in_one_message(tmp_path: Path, classifier: LogisticRegression) -> None:
    skops_file(tmp_path / "iris" / "1" / "model.skops", classifier)
    put(
        tmp_path / "iris" / "config.pbtxt",
        """
        max_batch_size: 4
        input [{ name: "input-0", data_type: TYPE_FP64, format: FORMAT_NCHW, dims: [4] }]
        instance_group [{ kind: KIND_CPU, count: 2 }]
        dynamic_batching { max_queue_delay_microseconds: 100, preferred_batch_size: [2] }
        """,
    )
    read = read_model(tmp_path, "iris")
    assert read.warnings == [
        "config fields not acted on: "  # the control's log line names the model, once
        "input[0].format, instance_group, dynamic_batching.preferred_batch_size"
    ]


def test_model_names_are_the_servable_folders(tmp_path: Path) -> None:
    root = tmp_path / "repository"
    for name in ("b", "a", ".hidden", "with space"):
        (root / name).mkdir(parents=True)
    put(root / "file.txt", "not a model")
    (tmp_path / "outside").mkdir()
    (root / "escape").symlink_to(tmp_path / "outside")
    (root / "alias").symlink_to(root / "a")  # a link that stays inside is a model
    assert model_names(root) == ["a", "alias", "b", "with space"]
    assert model_names(tmp_path / "missing") == []


@pytest.mark.parametrize("name", ["..", ".", "../repository", "a/b", "/etc", ".hidden", "", "escape"])
def test_model_names_that_leave_the_repository_are_refused(tmp_path: Path, name: str) -> None:
    root = tmp_path / "repository"
    (root / "a" / "b" / "1").mkdir(parents=True)
    (tmp_path / "outside" / "1").mkdir(parents=True)
    (root / "escape").symlink_to(tmp_path / "outside")
    with pytest.raises(RepositoryError):
        read_model(root, name)
    assert fingerprint(root, name) is None


def test_file_overrides_write_into_the_model_folder_only_when_allowed(tmp_path: Path) -> None:
    files = {"1/model.py": MODEL_PY_CALLABLE.encode()}
    config = {"backend": "python", "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1]}]}
    with pytest.raises(RepositoryError, match="off"):
        read_model(tmp_path, "double", config=config, files=files)
    assert not (tmp_path / "double").exists()
    with pytest.raises(RepositoryError, match="not a valid Triton ModelConfig"):
        read_model(tmp_path, "double", config={"inputs": []}, files=files, allow_files=True)
    assert not (tmp_path / "double").exists()  # nothing written for a request refused
    (model,) = read_model(tmp_path, "double", config=config, files=files, allow_files=True).versions
    assert (tmp_path / "double" / "1" / "model.py").read_bytes() == files["1/model.py"]
    np.testing.assert_array_equal(model.predict(x=np.array([5.0]))["y"], [10.0])


@pytest.mark.parametrize(
    "name",
    ["../escape.py", "1/../../escape.py", "/tmp/escape.py", "1//model.py", "./1/model.py", "", "linked/model.py"],
)
def test_file_overrides_that_leave_the_model_folder_are_refused(tmp_path: Path, name: str) -> None:
    root = tmp_path / "repository"
    (root / "double").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "double" / "linked").symlink_to(tmp_path / "outside")
    files = {"1/model.py": MODEL_PY_CALLABLE.encode(), name: b"model = print\n"}  # refused as a whole
    with pytest.raises(RepositoryError, match="override file"):
        read_model(root, "double", files=files, allow_files=True)
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert written == []
    if not name.startswith("linked/"):  # a model folder not there yet is not made for a refused request
        with pytest.raises(RepositoryError, match="override file"):
            read_model(root, "new", files={name: b""}, allow_files=True)
        assert not (root / "new").exists()


def test_the_fingerprint_changes_with_the_folder_and_only_then(tmp_path: Path, classifier: LogisticRegression) -> None:
    file = skops_file(tmp_path / "iris" / "1" / "model.skops", classifier)
    first = fingerprint(tmp_path, "iris")
    assert fingerprint(tmp_path, "iris") == first
    put(tmp_path / "iris" / "config.pbtxt", "max_batch_size: 0")
    second = fingerprint(tmp_path, "iris")
    assert second != first
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert fingerprint(tmp_path, "iris") != second
    skops_file(tmp_path / "iris" / "2" / "model.skops", classifier)
    assert len({first, second, fingerprint(tmp_path, "iris")}) == 3


def test_read_models_are_ordinary_models(tmp_path: Path, classifier: LogisticRegression) -> None:
    skops_file(tmp_path / "iris" / "1" / "model.skops", classifier)
    assert all(isinstance(model, Model) for model in read_model(tmp_path, "iris").versions)


def test_the_documented_repository_reads_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Built as the page builds it: its two files saved under models/, then its build recipe run beside them.
    doc = (Path(__file__).parents[2] / "docs" / "repository.md").read_text()
    examples = dict(re.findall(r"<!-- example: (\S+) -->\n```\w+\n(.*?)```", doc, re.DOTALL))
    assert set(examples) == {"double/1/model.py", "iris/config.pbtxt", "quadruple/config.pbtxt"}
    del examples["quadruple/config.pbtxt"]  # an ensemble of double: tests/core/test_ensembles.py serves it
    for name, text in examples.items():
        put(tmp_path / "models" / name, text)
    (build,) = re.findall(r"<!-- recipe: build -->\n```python\n(.*?)```", doc, re.DOTALL)
    monkeypatch.chdir(tmp_path)
    exec(compile(build, "docs/repository.md (build)", "exec"), {"__name__": "recipe"})
    models = tmp_path / "models"
    assert model_names(models) == ["double", "iris"]
    iris = read_model(models, "iris").versions
    assert [model.version for model in iris] == ["1", "3"]
    assert iris[-1].labels_for("predict") == SPECIES
    (double,) = read_model(models, "double").versions
    np.testing.assert_array_equal(double.predict(x=np.array([2]))["y"], [4])


# KServe: what its storage initializer puts at /mnt/models, as a repository (oip_asgi._hosts.cli.kserve)


def test_kserve_bare_model_files_are_one_model_named_as_the_inference_service(
    tmp_path: Path, classifier: LogisticRegression
) -> None:
    mounted = skops_file(tmp_path / "mnt" / "models" / "model.skops", classifier).parent
    repository = storage_repository(mounted, "sklearn-iris", tmp_path / "scratch")
    assert model_names(repository) == ["sklearn-iris"]
    (model,) = read_model(repository, "sklearn-iris").versions
    assert (model.name, model.version) == ("sklearn-iris", "1")
    assert storage_repository(mounted, "sklearn-iris", tmp_path / "scratch") == repository  # a restart lays it again


def test_kserve_a_pickle_loads_where_the_runtime_trusts_them(tmp_path: Path, classifier: LogisticRegression) -> None:
    (tmp_path / "mnt").mkdir()
    joblib.dump(classifier, tmp_path / "mnt" / "model.joblib")
    untrusted = storage_repository(tmp_path / "mnt", "iris", tmp_path / "untrusted")
    with pytest.raises(RepositoryError, match="pickle"):
        read_model(untrusted, "iris")
    trusted = storage_repository(tmp_path / "mnt", "iris", tmp_path / "trusted", trusted=True)
    (model,) = read_model(trusted, "iris").versions
    np.testing.assert_array_equal(model.predict(**{"input-0": IRIS_X[:3]})["predict"], classifier.predict(IRIS_X[:3]))


def test_kserve_one_models_folder_is_served_under_the_inference_services_name(
    tmp_path: Path, classifier: LogisticRegression
) -> None:
    mounted = tmp_path / "mnt"
    skops_file(mounted / "2" / "model.skops", classifier)
    put(mounted / "config.pbtxt", 'backend: "sklearn"')
    repository = storage_repository(mounted, "flowers", tmp_path / "scratch")
    read = read_model(repository, "flowers")
    assert [model.version for model in read.versions] == ["2"]
    assert read.config is not None and read.config["name"] == "flowers"


def test_kserve_a_repository_is_served_as_it_is(tmp_path: Path, classifier: LogisticRegression) -> None:
    mounted = tmp_path / "mnt"
    skops_file(mounted / "iris" / "1" / "model.skops", classifier)
    put(mounted / "double" / "1" / "model.py", MODEL_PY_CALLABLE)
    assert storage_repository(mounted, "ignored", tmp_path / "scratch") == mounted
    assert model_names(mounted) == ["double", "iris"]
    for empty in (tmp_path / "empty", tmp_path / "absent"):
        (tmp_path / "empty").mkdir(exist_ok=True)
        with pytest.raises(ValueError, match=str(empty)):
            storage_repository(empty, "iris", tmp_path / "scratch")


def test_reading_a_model_py_leaves_its_folder_as_it_was(tmp_path: Path) -> None:
    put(tmp_path / "double" / "1" / "model.py", MODEL_PY_CALLABLE)
    before = fingerprint(tmp_path, "double")
    read_model(tmp_path, "double")
    assert fingerprint(tmp_path, "double") == before  # no __pycache__: poll mode would take it for a change
    put(tmp_path / "double" / "1" / "model.py", MODEL_PY_CALLABLE.replace("* 2", "* 3"))
    (model,) = read_model(tmp_path, "double").versions
    np.testing.assert_array_equal(model.predict(x=np.array([1.0]))["y"], [3.0])  # the new source, never stale


def test_the_example_repository_reads_without_warnings_and_answers() -> None:
    root = Path(__file__).parents[2] / "examples" / "repository"
    assert model_names(root) == ["animals", "simple"]
    animals, simple = (read_model(root, name) for name in ("animals", "simple"))
    assert animals.warnings == simple.warnings == []
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    answer = simple.versions[0].predict(INPUT0=a, INPUT1=a)
    np.testing.assert_array_equal(answer["OUTPUT0"], 2 * a)
    (model,) = animals.versions
    assert (model.max_batch_size, model.labels_for("SCORES")) == (32, ["cat", "dog", "bird"])
    assert np.argmax(model.predict(FEATURES=np.array([[0, 0, 0, 1]], dtype=np.float32))) == 2  # bird


RESHAPED = """
backend: "sklearn"
max_batch_size: 8
input [ { name: "input-0", data_type: TYPE_FP64, dims: [ 2, 2 ], reshape: { shape: [ 4 ] } } ]
output [ { name: "predict", data_type: TYPE_FP64, dims: [ 1 ], reshape: { shape: [ ] } } ]
"""


@pytest.mark.anyio
async def test_reshape_the_client_sees_the_declared_dims_and_the_model_the_reshaped_ones(tmp_path: Path) -> None:
    from sklearn.linear_model import LinearRegression

    from oip_asgi import ModelRepository, oip_app
    from tests.support.client import client

    # Petal width from the other three measurements and a constant: a per-row scalar, as Triton's dims [1].
    features = np.column_stack([IRIS_X[:, :3], np.ones(len(IRIS_X))])
    regressor = LinearRegression().fit(features, IRIS_X[:, 3])
    skops_file(tmp_path / "width" / "1" / "model.skops", regressor)
    put(tmp_path / "width" / "config.pbtxt", RESHAPED)
    assert read_model(tmp_path, "width").warnings == []  # acted on, not merely read

    app = oip_app(model_repository=ModelRepository(tmp_path))
    rows = features[:5].reshape(5, 2, 2)
    async with client(app) as http:
        await app.load()
        assert (await http.get("/health/ready")).status_code == 200
        metadata = (await http.get("/models/width")).json()
        assert metadata["inputs"][0]["shape"] == [-1, 2, 2]
        assert metadata["outputs"][0]["shape"] == [-1, 1]
        request = {
            "inputs": [{"name": "input-0", "datatype": "FP64", "shape": [5, 2, 2], "data": rows.ravel().tolist()}]
        }
        answer = await http.post("/models/width/infer", json=request)
        assert answer.status_code == 200, answer.text
        (output,) = answer.json()["outputs"]
        assert output["shape"] == [5, 1]
        np.testing.assert_allclose(output["data"], regressor.predict(features[:5]))

        wrong = {"inputs": [{"name": "input-0", "datatype": "FP64", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 1.0]}]}
        refused = await http.post("/models/width/infer", json=wrong)
        assert refused.status_code == 400  # the declared dims [2, 2] are what a client must send


def test_a_refused_pickle_is_advised_in_the_configs_terms(tmp_path: Path, classifier: LogisticRegression) -> None:
    (tmp_path / "iris" / "1").mkdir(parents=True)
    joblib.dump(classifier, tmp_path / "iris" / "1" / "model.joblib")
    with pytest.raises(RepositoryError, match="is a pickle") as refused:
        read_model(tmp_path, "iris")
    assert 'parameters { key: "trusted" value: { string_value: "true" } } in its config.pbtxt' in str(refused.value)
    assert "Model.from_file" not in str(refused.value) and "--trust-pickles" not in str(refused.value)
