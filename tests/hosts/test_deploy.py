"""Dockerfile and deploy/kserve/: manifests valid for KServe and Kubernetes, offline, and in step with the image.

No image is built here (no Docker engine, no base image to pull): the image's own command runs
instead, on the same module laid out as the image lays it out.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

from oip_asgi import __version__  # noqa: E402
from oip_asgi._declarations.files import FORMATS  # noqa: E402
from oip_asgi._hosts.cli import parser  # noqa: E402
from tests.support.servers import HOST, ROOT, free_port, serving, triton_round_trip  # noqa: E402

KSERVE = ROOT / "deploy" / "kserve"
SCHEMAS = Path(__file__).parent / "schemas" / "kserve"
SCHEMA_FILES = {
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): "servingruntime_v1alpha1.json",
    ("serving.kserve.io/v1beta1", "InferenceService"): "inferenceservice_v1beta1.json",
}
KUBERNETES = "1.30"  # the oldest Kubernetes that KServe's current releases support


def manifests() -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(KSERVE.glob("*.yaml")):
        for number, document in enumerate(yaml.safe_load_all(path.read_text())):
            found[f"{path.name}#{number}"] = document
    return found


def kserve_errors(manifest: dict[str, Any]) -> list[str]:
    key = (manifest.get("apiVersion"), manifest.get("kind"))
    if key not in SCHEMA_FILES:
        return [f"no KServe schema for {key}"]
    schema = json.loads((SCHEMAS / SCHEMA_FILES[key]).read_text())
    validator = jsonschema.Draft7Validator(schema)
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(manifest)]


def runtime(file: str = "servingruntime.yaml") -> dict[str, Any]:
    """The runtime for the image's own models, or (servingruntime-models.yaml) the one for model files."""
    return manifests()[f"{file}#0"]


def inference_service(file: str = "inferenceservice.yaml") -> dict[str, Any]:
    return manifests()[f"{file}#0"]


def runtime_pod(runtime: dict[str, Any]) -> dict[str, Any]:
    """The pod a ServingRuntime becomes, as far as its own spec says: what Kubernetes itself checks."""
    spec = runtime["spec"]
    pod_spec = {key: spec[key] for key in ("containers", "volumes", "nodeSelector", "tolerations") if key in spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": runtime["metadata"]["name"]}, "spec": pod_spec}


def kubernetes_errors(resource: dict[str, Any]) -> list[str]:
    try:
        kubernetes_validate.validate(resource, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'.'.join(map(str, error.path))}: {error.message}"]
    return []


def test_the_manifests_are_two_runtimes_and_a_service_using_each() -> None:
    kinds = {name: manifest["kind"] for name, manifest in manifests().items()}
    assert kinds == {
        "inferenceservice.yaml#0": "InferenceService",
        "inferenceservice-sklearn.yaml#0": "InferenceService",
        "servingruntime.yaml#0": "ServingRuntime",
        "servingruntime-models.yaml#0": "ServingRuntime",
    }


@pytest.mark.parametrize("name", list(manifests()))
def test_manifest_is_valid_for_kserve(name: str) -> None:
    assert kserve_errors(manifests()[name]) == []


@pytest.mark.parametrize("file", ["servingruntime.yaml", "servingruntime-models.yaml"])
def test_runtime_pod_is_valid_for_kubernetes(file: str) -> None:
    assert kubernetes_errors(runtime_pod(runtime(file))) == []


def broken(change: str) -> dict[str, Any]:
    manifest = copy.deepcopy(runtime())
    container = manifest["spec"]["containers"][0]
    if change == "misspelled field":
        container["readinesProbe"] = container.pop("readinessProbe")
    elif change == "port as text":
        container["ports"][0]["containerPort"] = "eighty"
    elif change == "model format without a name":
        del manifest["spec"]["supportedModelFormats"][0]["name"]
    elif change == "probe without a port":
        del container["readinessProbe"]["httpGet"]["port"]
    return manifest


@pytest.mark.parametrize("change", ["misspelled field", "port as text", "model format without a name"])
def test_a_broken_manifest_fails_kserves_schema(change: str) -> None:
    assert kserve_errors(broken(change)) != []


@pytest.mark.parametrize("change", ["misspelled field", "port as text", "probe without a port"])
def test_a_broken_runtime_pod_fails_kubernetes_schema(change: str) -> None:
    assert kubernetes_errors(runtime_pod(broken(change))) != []


def test_inference_service_uses_the_runtime_and_its_protocol() -> None:
    spec = runtime()["spec"]
    model = inference_service()["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime()["metadata"]["name"]
    assert model["modelFormat"]["name"] in [form["name"] for form in spec["supportedModelFormats"]]
    assert model["protocolVersion"] == "v2" and {"v2", "grpc-v2"} <= set(spec["protocolVersions"])


# The runtime and the image agree


def dockerfile() -> dict[str, Any]:
    """The Dockerfile's build arguments (with their defaults), USER, ENTRYPOINT and CMD."""
    text = (ROOT / "Dockerfile").read_text()
    found: dict[str, Any] = {"ARG": dict(re.findall(r"^ARG (\w+)=(.*)$", text, re.MULTILINE))}
    for instruction in ("USER", "ENTRYPOINT", "CMD", "WORKDIR"):
        (value,) = re.findall(rf"^{instruction} (.*)$", text, re.MULTILINE)
        found[instruction] = json.loads(value) if value.startswith("[") else value
    return found


def test_runtime_runs_the_images_command_on_kserves_ports() -> None:
    (container,) = runtime()["spec"]["containers"]
    assert container["name"] == "kserve-container"
    assert container["args"] == dockerfile()["CMD"]
    args = parser().parse_args(container["args"])  # every option is one the command has
    assert args.host == "0.0.0.0"
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports == {"http1": args.port, "h2c": args.grpc_port} == {"http1": 8080, "h2c": 8081}
    for probe, path in [("startupProbe", "live"), ("livenessProbe", "live"), ("readinessProbe", "ready")]:
        assert container[probe]["httpGet"] == {"path": f"/v2/health/{path}", "port": args.port}
    assert container["image"].endswith(f"/oip-asgi:{__version__}")


def test_image_and_runtime_run_as_the_same_non_root_user() -> None:
    user = dockerfile()["USER"].split(":")[0]
    assert user.isdigit() and int(user) != 0  # numeric: Kubernetes can check runAsNonRoot
    (container,) = runtime()["spec"]["containers"]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["runAsUser"] == int(user)


def test_image_installs_extras_the_project_has() -> None:
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(dockerfile()["ARG"]["EXTRAS"].split(",")) <= set(extras)
    assert (ROOT / dockerfile()["ARG"]["MODELS"]).is_file()


@pytest.mark.slow
def test_the_images_command_serves_its_module_laid_out_as_in_the_image(tmp_path: Path) -> None:
    """What `docker run` would run: CMD in WORKDIR, beside models.py copied from MODELS."""
    image = dockerfile()
    shutil.copy(ROOT / image["ARG"]["MODELS"], tmp_path / "models.py")
    port, grpc_port = free_port(), free_port()
    ports = {"0.0.0.0": HOST, "8080": str(port), "8081": str(grpc_port)}
    command = [ports.get(part, part) for part in image["CMD"]]
    argv = ["-m", "oip_asgi", *command, "--app-dir", str(tmp_path)]  # the image's WORKDIR, as "." is there
    assert image["ENTRYPOINT"] == ["oip-asgi"] and image["WORKDIR"] == "/srv"
    with serving(argv, port) as server:
        triton_round_trip(server.address)
        grpc_round_trip(f"{HOST}:{grpc_port}")


def grpc_round_trip(address: str) -> None:
    import numpy as np

    grpcclient = pytest.importorskip("tritonclient.grpc")
    client = grpcclient.InferenceServerClient(address)
    try:
        assert client.is_server_ready() and client.is_model_ready("simple")
        a = np.arange(32, dtype=np.int32).reshape(2, 16)
        inputs = [grpcclient.InferInput(name, [2, 16], "INT32") for name in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        result = client.infer("simple", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * a)
    finally:
        client.close()


# The runtime for model files: KServe with no code


def test_the_models_runtime_declares_the_formats_we_read() -> None:
    formats = {form["name"]: form for form in runtime("servingruntime-models.yaml")["spec"]["supportedModelFormats"]}
    # KServe's names for the formats Model.from_file reads (PyTorch is KServe's "pytorch").
    assert set(formats) == {"pytorch" if name == "torch" else name for name in FORMATS}
    built = set(re.findall(r"EXTRAS=([\w,]+)", (KSERVE / "servingruntime-models.yaml").read_text())[0].split(","))
    for name, form in formats.items():
        assert form["autoSelect"] is ({"pytorch": "torch"}.get(name, name) in built), name


def test_a_sklearn_inference_service_selects_the_models_runtime_by_its_format_alone() -> None:
    model = inference_service("inferenceservice-sklearn.yaml")["spec"]["predictor"]["model"]
    assert "runtime" not in model and model["storageUri"]
    selecting = [
        manifest["metadata"]["name"]
        for manifest in manifests().values()
        if manifest["kind"] == "ServingRuntime"
        and any(
            form["name"] == model["modelFormat"]["name"] and form.get("autoSelect")
            for form in manifest["spec"]["supportedModelFormats"]
        )
    ]
    assert selecting == ["oip-asgi-models"]
    assert model["protocolVersion"] in runtime("servingruntime-models.yaml")["spec"]["protocolVersions"]


def test_the_models_runtime_serves_mnt_models_under_the_inference_services_name_on_kserves_ports() -> None:
    (container,) = runtime("servingruntime-models.yaml")["spec"]["containers"]
    assert container["command"] == ["oip-asgi", "serve"]
    args = parser().parse_args(["serve", *container["args"]])
    assert (args.model_repository, args.kserve_name) == ("/mnt/models", "{{.Name}}")
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports == {"http1": args.port, "h2c": args.grpc_port} == {"http1": 8080, "h2c": 8081}
    assert args.host == "0.0.0.0"
    assert {mount["mountPath"] for mount in container["volumeMounts"]} == {"/tmp"}  # where the repository is laid
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["model file", "repository"])
def test_the_models_runtimes_command_serves_mnt_models_as_the_storage_initializer_lays_it(
    tmp_path: Path, layout: str
) -> None:
    """KServe's storage initializer copies the storageUri's contents into /mnt/models: here, a tmp folder."""
    import numpy as np
    import skops.io
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    httpclient = pytest.importorskip("tritonclient.http")
    grpcclient = pytest.importorskip("tritonclient.grpc")
    X, y = load_iris(return_X_y=True)
    classifier = LogisticRegression(max_iter=1000).fit(X, y)
    mounted = tmp_path / "mnt" / "models"
    model_folder = mounted if layout == "model file" else mounted / "iris" / "1"
    model_folder.mkdir(parents=True)
    skops.io.dump(classifier, model_folder / "model.skops")
    served = "sklearn-iris" if layout == "model file" else "iris"

    (container,) = runtime("servingruntime-models.yaml")["spec"]["containers"]
    port, grpc_port = free_port(), free_port()
    values = {"/mnt/models": str(mounted), "{{.Name}}": "sklearn-iris", "0.0.0.0": HOST}
    values |= {"8080": str(port), "8081": str(grpc_port)}
    program, *command = container["command"]
    assert program == "oip-asgi"  # the console script: python -m oip_asgi here, with this test's interpreter
    argv = ["-m", "oip_asgi", *command, *(values.get(arg, arg) for arg in container["args"])]
    with serving(argv, port, env={"TMPDIR": str(tmp_path)}, timeout=60) as server:
        client = httpclient.InferenceServerClient(server.address)
        assert client.is_model_ready(served)
        tensor = httpclient.InferInput("input-0", [5, 4], "FP64")
        tensor.set_data_from_numpy(X[:5])
        answer = client.infer(served, [tensor]).as_numpy("predict")
        np.testing.assert_array_equal(answer, classifier.predict(X[:5]))
        channel = grpcclient.InferenceServerClient(f"{HOST}:{grpc_port}")
        try:
            assert channel.get_model_metadata(served).name == served
        finally:
            channel.close()
