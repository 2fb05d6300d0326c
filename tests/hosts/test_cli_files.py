"""`oip-asgi serve FILE ...`: model files from the command line, as a newcomer serves them (issue 30).

Several files each under its stem, the trust a file needs, its labels from a file beside it, an input
datatype for tritonclient's float32 rows, Triton's batch dimension, and refusals whose advice is the
command line's. Models are trained here on iris; the served ones are called with tritonclient.
"""

from __future__ import annotations

import logging.config
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")
import joblib
import onnxruntime
import skops.io
import tritonclient.http as httpclient
from skl2onnx import to_onnx
from sklearn.datasets import load_iris
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from oip_asgi._hosts.cli import load_target, main
from oip_asgi._hosts.cli.target import FileOptions, TargetError, file_models
from tests.support.servers import HOST, free_port, serving

IRIS_X, IRIS_Y = load_iris(return_X_y=True)
SPECIES = ["setosa", "versicolor", "virginica"]
ROWS = IRIS_X[::30]  # 5 rows, every class


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """forest.joblib (a pickle), forest.skops (holds a type skops does not trust), flowers.onnx, species labels."""
    directory = tmp_path_factory.mktemp("cli-files")
    forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(IRIS_X, IRIS_Y)
    joblib.dump(forest, directory / "forest.joblib")
    skops.io.dump(forest, directory / "forest.skops")
    regression = LogisticRegression(max_iter=1000).fit(IRIS_X, IRIS_Y)
    onnx_model = to_onnx(regression, IRIS_X[:1].astype(np.float32), options={"zipmap": False})
    (directory / "flowers.onnx").write_bytes(onnx_model.SerializeToString())
    (directory / "forest.labels.txt").write_text("\n".join(SPECIES) + "\n")
    return directory


@pytest.fixture(autouse=True)
def command_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """`main` as the command runs it, but leaving this process's sys.path and logging as they were."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command adds --app-dir to it
    monkeypatch.setattr(logging.config, "dictConfig", lambda config: None)  # uvicorn's, set before the app is built


def error_of(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str]:
    status = main(["serve", *arguments])
    return status, capsys.readouterr().err


def test_a_pickle_is_trusted_with_trust_pickles_and_refused_with_the_options_advice(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, error = error_of(capsys, str(files / "forest.joblib"))
    assert status == 3
    assert "is a pickle" in error and "add --trust-pickles to oip-asgi serve" in error
    assert "Model.from_file" not in error and "trusted=True" not in error  # the Python advice is not this place's
    app = load_target([str(files / "forest.joblib")], files=FileOptions(trust_pickles=True))
    assert app.core.served.names() == ["forest"]


def test_skops_types_are_trusted_by_name_from_the_command_line(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, error = error_of(capsys, str(files / "forest.skops"))
    assert status == 3
    assert "does not trust by default: sklearn.tree._tree.Tree" in error
    assert "add --trust-skops-types sklearn.tree._tree.Tree to oip-asgi serve" in error
    app = load_target([str(files / "forest.skops")], files=FileOptions(trust_skops_types=("sklearn.tree._tree.Tree",)))
    assert app.core.served.names() == ["forest"]


def test_a_label_file_beside_a_model_file_names_its_classes(files: Path) -> None:
    (model,) = file_models([str(files / "forest.joblib")], FileOptions(trust_pickles=True)).values()
    assert model.labels == {"predict_proba": SPECIES}  # forest.labels.txt, in place of the classes 0, 1, 2


def test_a_label_file_that_fits_no_output_says_so(files: Path, tmp_path: Path) -> None:
    (tmp_path / "forest.skops").write_bytes((files / "forest.skops").read_bytes())
    (tmp_path / "forest.labels.txt").write_text("cat\ndog\n")
    options = FileOptions(trust_skops_types=("sklearn.tree._tree.Tree",))
    with pytest.raises(TargetError, match=r"lists 2 classes, and no output of the model has one score per class"):
        load_target([str(tmp_path / "forest.skops")], files=options)


def test_two_files_with_one_stem_are_refused(files: Path, tmp_path: Path) -> None:
    (tmp_path / "flowers.joblib").write_bytes((files / "forest.joblib").read_bytes())
    with pytest.raises(TargetError, match="two model files would be served as 'flowers'"):
        load_target([str(files / "flowers.onnx"), str(tmp_path / "flowers.joblib")], files=FileOptions(True))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["nonexist.onnx"], "oip-asgi: error: no such file: 'nonexist.onnx'\n"),
        (["models/forest.skops"], "oip-asgi: error: no such file: 'models/forest.skops'\n"),
        (["examples.models:models", "--trust-pickles"], "--trust-pickles goes with model files"),
        (["examples.models:models", "--trust-skops-types", "x"], "--trust-skops-types goes with model files"),
        (["examples.models:models", "--input-datatype", "FP32"], "--input-datatype goes with model files"),
        (["--model-repository", ".", "--trust-pickles"], 'in its config.pbtxt (parameters { key: "trusted"'),
    ],
)
def test_usage_errors_of_model_files_exit_2(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    status, error = error_of(capsys, *arguments)
    assert status == 2
    assert message in error


def test_a_file_of_no_known_format_is_advised_in_the_command_lines_terms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes").write_text("hello")
    status, error = error_of(capsys, str(tmp_path / "notes"))
    assert status == 3
    assert "cannot tell which library" in error and "name it with its library's extension (.joblib, .onnx" in error
    assert "format=" not in error  # the command line has no such option


def test_input_datatype_is_for_tabular_files(files: Path) -> None:
    with pytest.raises(TargetError, match="--input-datatype re-declares a tabular file's inputs .*other files take"):
        load_target([str(files / "flowers.onnx")], files=FileOptions(input_datatype="FP32"))
    with pytest.raises(TargetError, match="datatype"):
        load_target([str(files / "forest.joblib")], files=FileOptions(trust_pickles=True, input_datatype="FP80"))


@pytest.fixture(scope="module")
def server(files: Path) -> Iterator[str]:
    """forest.joblib and flowers.onnx served by one command, the forest taking FP32 rows."""
    port = free_port()
    argv = ["-m", "oip_asgi", "serve", "--host", HOST, "--port", str(port), "--log-level", "warning"]
    argv += [str(files / "forest.joblib"), str(files / "flowers.onnx"), "--trust-pickles", "--input-datatype", "FP32"]
    with serving(argv, port) as running:
        yield running.address


@pytest.mark.slow
def test_several_files_are_served_each_under_its_stem(server: str, files: Path) -> None:
    forest = joblib.load(files / "forest.joblib")
    client = httpclient.InferenceServerClient(server)
    try:
        rows = ROWS.astype(np.float32)  # tritonclient users' usual rows; the forest was fitted on float64
        tensor = httpclient.InferInput("input-0", list(rows.shape), "FP32")
        tensor.set_data_from_numpy(rows)
        wanted = httpclient.InferRequestedOutput("predict_proba", class_count=1)
        result = client.infer("forest", [tensor], outputs=[wanted])
        best = [SPECIES[label].encode() for label in forest.predict(rows)]
        assert [row[0].split(b":")[-1] for row in result.as_numpy("predict_proba")] == best  # the label file's names

        flowers = httpclient.InferInput("X", list(rows.shape), "FP32")
        flowers.set_data_from_numpy(rows)
        session = onnxruntime.InferenceSession(str(files / "flowers.onnx"), providers=["CPUExecutionProvider"])
        (labels,) = session.run(["label"], {"X": rows})
        assert client.infer("flowers", [flowers]).as_numpy("label").tolist() == labels.tolist()
    finally:
        client.close()


@pytest.mark.slow
def test_a_files_batch_dimension_is_tritons_so_perf_analyzer_needs_no_shape(server: str) -> None:
    client = httpclient.InferenceServerClient(server)
    try:
        for model, input_name in (("forest", "input-0"), ("flowers", "X")):
            config = client.get_model_config(model)
            assert config["max_batch_size"] == 64
            assert config["input"][0]["name"] == input_name and config["input"][0]["dims"] == [4]
            assert "dynamic_batching" in config
            assert client.get_model_metadata(model)["inputs"][0]["shape"] == [-1, 4]
    finally:
        client.close()


@pytest.mark.slow
def test_an_fp32_request_to_an_fp64_file_says_the_way_forward(files: Path, tmp_path: Path) -> None:
    port = free_port()
    argv = ["-m", "oip_asgi", "serve", "--host", HOST, "--port", str(port), "--log-level", "warning"]
    with serving([*argv, str(files / "forest.joblib"), "--trust-pickles"], port) as running:
        client = httpclient.InferenceServerClient(running.address)
        try:
            tensor = httpclient.InferInput("input-0", [1, 4], "FP32")
            tensor.set_data_from_numpy(ROWS[:1].astype(np.float32))
            with pytest.raises(Exception, match=r"expects FP64; send FP64 .*--input-datatype FP32"):
                client.infer("forest", [tensor])
        finally:
            client.close()


@pytest.mark.slow
def test_worker_processes_get_the_files_options(files: Path) -> None:
    port = free_port()
    argv = ["-m", "oip_asgi", "serve", "--host", HOST, "--port", str(port), "--log-level", "warning", "--workers", "2"]
    argv += [str(files / "forest.skops"), "--trust-skops-types", "sklearn.tree._tree.Tree", "--input-datatype", "FP32"]
    with serving(argv, port) as running:
        client = httpclient.InferenceServerClient(running.address)
        try:
            assert client.get_model_metadata("forest")["inputs"][0]["datatype"] == "FP32"
        finally:
            client.close()
