"""`Model.from_file` on PyTorch files: a torch.export program and TorchScript, trained here on the digits
scikit-learn ships, served by `oip-asgi serve` and called by tritonclient over HTTP and gRPC.

Marked `torch` and skipped without torch (a large install): pip install -e ".[torch]" to run them."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason='PyTorch is not installed: pip install -e ".[torch]"')
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from oip_asgi import Model  # noqa: E402
from tests.support.servers import HOST, free_port, serving  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

PIXELS = load_digits().data.astype(np.float32)[:40] / 16


class Digits(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))

    def forward(self, pixels: Any) -> dict[str, Any]:
        logits = self.layers(pixels)
        return {"logits": logits, "probabilities": torch.softmax(logits, dim=1)}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Digits]:
    """A small network trained on the digits, saved with torch.export (a dynamic batch) and as TorchScript."""
    torch.manual_seed(0)
    digits = load_digits()
    X = torch.tensor(digits.data / 16, dtype=torch.float32)
    y = torch.tensor(digits.target)
    model = Digits()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(100):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(X)["logits"], y).backward()
        optimizer.step()
    model.eval()
    directory = tmp_path_factory.mktemp("torch-files")
    batch = torch.export.Dim("batch")
    program = torch.export.export(model, (X[:2],), dynamic_shapes={"pixels": {0: batch}})
    torch.export.save(program, directory / "digits.pt2")
    with warnings.catch_warnings():  # TorchScript is deprecated: the point is that such files still serve
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.trace(model, X[:2], strict=False).save(str(directory / "digits.pt"))
    return directory, model


@pytest.fixture(scope="module")
def server(trained: tuple[Path, Digits]) -> Iterator[tuple[str, str]]:
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "tests.apps.torch:models", "--port", str(port), "--grpc-port", str(grpc_port)]
    with serving(argv, port, env={"OIP_MODEL_FILES": str(trained[0])}, timeout=60):
        yield f"{HOST}:{port}", f"{HOST}:{grpc_port}"


def direct(model: Digits, rows: np.ndarray) -> dict[str, np.ndarray]:
    with torch.inference_mode():
        return {name: value.numpy() for name, value in model(torch.from_numpy(rows)).items()}


@pytest.mark.parametrize("wire", ["http", "grpc"])
@pytest.mark.parametrize(("name", "input_name"), [("digits", "pixels"), ("scripted", "pixels")])
def test_answers_equal_torch(
    trained: tuple[Path, Digits], server: tuple[str, str], wire: str, name: str, input_name: str
) -> None:
    module: Any = httpclient if wire == "http" else grpcclient
    client = module.InferenceServerClient(server[0] if wire == "http" else server[1])
    try:
        tensor = module.InferInput(input_name, list(PIXELS.shape), "FP32")
        tensor.set_data_from_numpy(PIXELS)
        outputs = [module.InferRequestedOutput("logits"), module.InferRequestedOutput("probabilities", class_count=1)]
        result = client.infer(name, [tensor], outputs=outputs)
    finally:
        client.close()
    want = direct(trained[1], PIXELS)
    np.testing.assert_allclose(result.as_numpy("logits"), want["logits"], rtol=1e-5, atol=1e-6)
    best = [entry.decode().split(":") for entry in result.as_numpy("probabilities")[:, 0]]
    assert [int(index) for _, index, *_ in best] == want["probabilities"].argmax(axis=1).tolist()
    if name == "scripted":
        assert all(label == index for _, index, label in best)  # its declared labels


def test_metadata_from_the_program(server: tuple[str, str]) -> None:
    metadata = httpx.get(f"http://{server[0]}/v2/models/digits").json()
    assert metadata["platform"] == "torch_export"
    assert metadata["inputs"] == [{"name": "pixels", "datatype": "FP32", "shape": [-1, 64]}]
    assert metadata["outputs"] == [
        {"name": "logits", "datatype": "FP32", "shape": [-1, 10]},
        {"name": "probabilities", "datatype": "FP32", "shape": [-1, 10]},
    ]
    assert metadata["properties"] == {"device": "cpu"}
    assert httpx.get(f"http://{server[0]}/v2/models/scripted").json()["platform"] == "pytorch_libtorch"


def test_batching_through_an_exported_program(trained: tuple[Path, Digits], server: tuple[str, str]) -> None:
    def one(row: int) -> np.ndarray:
        client = httpclient.InferenceServerClient(server[0])
        try:
            tensor = httpclient.InferInput("pixels", [1, 64], "FP32")
            tensor.set_data_from_numpy(PIXELS[row : row + 1])
            return np.asarray(client.infer("digits_batched", [tensor]).as_numpy("logits"))
        finally:
            client.close()

    with ThreadPoolExecutor(16) as pool:
        answers = np.concatenate(list(pool.map(one, range(len(PIXELS)))))
    np.testing.assert_allclose(answers, direct(trained[1], PIXELS)["logits"], rtol=1e-5, atol=1e-5)
    statistics = httpx.get(f"http://{server[0]}/v2/models/digits_batched/stats").json()["model_stats"][0]
    assert statistics["execution_count"] < statistics["inference_count"] == len(PIXELS)


def test_torchscript_needs_declared_tensors(trained: tuple[Path, Digits]) -> None:
    with pytest.raises(ValueError, match=r"is TorchScript, which does not say what its tensors are: declare them"):
        Model.from_file(trained[0] / "digits.pt")


def test_a_corrupt_program_says_so(tmp_path: Path) -> None:
    (tmp_path / "broken.pt2").write_bytes(b"PK\x03\x04 not a program")
    with pytest.raises(ValueError, match=r"cannot load PyTorch model file .*broken\.pt2"):
        Model.from_file(tmp_path / "broken.pt2")
