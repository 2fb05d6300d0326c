"""The workloads: deterministic request bodies written to files, and checks of the answers."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20240404
JSON = "application/json"
OCTETS = "application/octet-stream"
HEADER_LENGTH = "inference-header-content-length"


@dataclass(frozen=True)
class Workload:
    key: str
    title: str
    model: str
    body_path: Path
    content_type: str
    header_length: int | None
    payload_bytes: int
    check: Callable[[dict[str, str], bytes], str | None]
    concurrency: tuple[int, ...]
    floor_model: str | None = None
    servers: tuple[str, ...] | None = None  # only these are asked (W1s: ours' sync model, and the floor); None: all


def float32_json(values: np.ndarray) -> str:
    # str() of a numpy float32 is its shortest round-tripping form: 0.1, not 0.10000000149011612.
    return "[" + ",".join(str(v) for v in values.astype(np.float32).ravel()) + "]"


def json_request(name: str, array: np.ndarray, outputs: str = "") -> bytes:
    shape = json.dumps(list(array.shape))
    tensor = f'{{"name":"{name}","shape":{shape},"datatype":"FP32","data":{float32_json(array)}}}'
    return f'{{"inputs":[{tensor}]{outputs}}}'.encode()


def binary_request(
    name: str, datatype: str, shape: list[int], raw: bytes, outputs: list[dict[str, object]]
) -> tuple[bytes, int]:
    header = {
        "inputs": [{"name": name, "shape": shape, "datatype": datatype, "parameters": {"binary_data_size": len(raw)}}],
        "outputs": outputs,
    }
    encoded = json.dumps(header, separators=(",", ":")).encode()
    return encoded + raw, len(encoded)


def serialize_bytes(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


def split_response(headers: dict[str, str], body: bytes) -> tuple[dict[str, Any], list[bytes]]:
    """The JSON part of an answer and the binary buffers of its outputs, in output order."""
    length = headers.get(HEADER_LENGTH)
    json_part, rest = (body[: int(length)], body[int(length) :]) if length is not None else (body, b"")
    document = json.loads(json_part)
    buffers, offset = [], 0
    for output in document.get("outputs", []):
        size = (output.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            buffers.append(rest[offset : offset + size])
            offset += size
    return document, buffers


def _single_output(document: dict[str, Any], datatype: str, shape: list[int]) -> dict[str, Any] | str:
    outputs = document.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != 1 or not isinstance(outputs[0], dict):
        return f"expected one output, got {str(outputs)[:200]}"
    output: dict[str, Any] = outputs[0]
    if output.get("name") != "x" or output.get("datatype") != datatype or output.get("shape") != shape:
        return f"expected x {datatype} {shape}, got {output.get('name')} {output.get('datatype')} {output.get('shape')}"
    return output


def check_json_identity(array: np.ndarray) -> Callable[[dict[str, str], bytes], str | None]:
    def check(headers: dict[str, str], body: bytes) -> str | None:
        document, _ = split_response(headers, body)
        output = _single_output(document, "FP32", list(array.shape))
        if isinstance(output, str):
            return output
        got = np.asarray(output.get("data"), dtype=np.float64).astype(np.float32).reshape(array.shape)
        return None if np.array_equal(got, array) else "data differs from the input"

    return check


def check_binary_identity(datatype: str, shape: list[int], raw: bytes) -> Callable[[dict[str, str], bytes], str | None]:
    def check(headers: dict[str, str], body: bytes) -> str | None:
        document, buffers = split_response(headers, body)
        output = _single_output(document, datatype, shape)
        if isinstance(output, str):
            return output
        if len(buffers) != 1:
            return "output is not binary"
        return None if buffers[0] == raw else "binary data differs from the input"

    return check


def check_classification(array: np.ndarray, k: int) -> Callable[[dict[str, str], bytes], str | None]:
    top = [set(row) for row in np.argpartition(-array, k - 1, axis=1)[:, :k].tolist()]

    def check(headers: dict[str, str], body: bytes) -> str | None:
        document, buffers = split_response(headers, body)
        output = _single_output(document, "BYTES", [array.shape[0], k])
        if isinstance(output, str):
            return output
        data = output.get("data")
        if not isinstance(data, list) or len(data) != array.shape[0] * k:
            return f"expected {array.shape[0] * k} JSON strings, got {str(data)[:200]}"
        got = [
            {int(str(item).split(":")[1]) for item in data[row * k : (row + 1) * k]} for row in range(array.shape[0])
        ]
        return None if got == top else "top-k indices differ from argpartition's"

    return check


def check_echo(body_sent: bytes) -> Callable[[dict[str, str], bytes], str | None]:
    def check(headers: dict[str, str], body: bytes) -> str | None:
        return None if body == body_sent else "echo differs from the request"

    return check


def check_fixed(expected: bytes) -> Callable[[dict[str, str], bytes], str | None]:
    def check(headers: dict[str, str], body: bytes) -> str | None:
        return None if body == expected else "fixed response differs"

    return check


def check_mlp(expected: np.ndarray) -> Callable[[dict[str, str], bytes], str | None]:
    """The MLP's output `y`: FP32 of the expected shape, equal to numpy's up to float32 rounding."""

    def check(headers: dict[str, str], body: bytes) -> str | None:
        document, _ = split_response(headers, body)
        outputs = document.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != 1 or not isinstance(outputs[0], dict):
            return f"expected one output, got {str(outputs)[:200]}"
        output = outputs[0]
        shape = list(expected.shape)
        if output.get("name") != "y" or output.get("datatype") != "FP32" or output.get("shape") != shape:
            return f"expected y FP32 {shape}, got {output.get('name')} {output.get('datatype')} {output.get('shape')}"
        got = np.asarray(output.get("data"), dtype=np.float64).reshape(expected.shape)
        # Another numpy, BLAS or batch size may sum in another order: equal up to float32 rounding, not bit for bit.
        if not np.allclose(got, expected, rtol=1e-4, atol=1e-5):
            return f"data differs from numpy's: {got.ravel()[:4]} against {expected.ravel()[:4]}"
        return None

    return check


# The MLP of W8: FP32 [n,64] -> 256 -> 256 -> 10, ReLU between. Its weights are written once to
# MLP_WEIGHTS beside the bodies and every server loads that file (apps/_mlp.py): the same numbers
# everywhere, whatever numpy each server's environment has.
MLP_INPUT = 64
MLP_LAYERS = (MLP_INPUT, 256, 256, 10)
MLP_WEIGHTS = "mlp.npz"
BATCHING_SERVERS = ("ours", "mlserver", "pytriton")


def mlp_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    weights = {}
    for index, (fan_in, fan_out) in enumerate(zip(MLP_LAYERS, MLP_LAYERS[1:], strict=False)):
        weights[f"w{index}"] = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2 / fan_in)).astype(np.float32)
        weights[f"b{index}"] = (rng.standard_normal(fan_out) * 0.1).astype(np.float32)
    return weights


def mlp_forward(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    layers = len(MLP_LAYERS) - 1
    for index in range(layers):
        x = x @ weights[f"w{index}"] + weights[f"b{index}"]
        if index < layers - 1:
            x = np.maximum(x, 0)
    return x


@dataclass(frozen=True)
class Bodies:
    workloads: dict[str, Workload]
    fixed_response: Path
    w4: Workload
    mlp_weights: Path
    w9_files: Path | None = None


def build(directory: Path, w4_elements: int = 16 * 1024 * 1024, w9_files: Path | None = None) -> Bodies:
    """Write every request body under `directory` (same seed, same bytes on every run).

    `w9_files` is the folder `w9_files.py train` wrote (W9's model files, requests and expected answers).
    """
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    workloads: dict[str, Workload] = {}

    def add(workload: Workload, body: bytes) -> None:
        workload.body_path.write_bytes(body)
        workloads[workload.key] = workload

    w1 = rng.standard_normal((1, 16)).astype(np.float32)
    body = json_request("x", w1)
    w1_workload = Workload(
        "W1",
        "small JSON FP32 [1,16]",
        "identity",
        directory / "w1.json",
        JSON,
        None,
        w1.nbytes,
        check_json_identity(w1),
        (1, 16),
        floor_model="fixed",
    )
    add(w1_workload, body)
    # The same request to a plain sync function: the cost of running it in a worker thread.
    sync_title = "small JSON FP32 [1,16], sync model"
    add(replace(w1_workload, key="W1s", title=sync_title, model="identity_sync", servers=("floor", "ours")), body)
    output = f'{{"name":"x","datatype":"FP32","shape":[1,16],"data":{float32_json(w1)}}}'
    fixed = f'{{"model_name":"identity","model_version":"1","outputs":[{output}]}}'
    fixed_path = directory / "w1_response.json"
    fixed_path.write_bytes(fixed.encode())

    w2 = rng.standard_normal((1, 1024 * 1024)).astype(np.float32)
    body, length = binary_request(
        "x", "FP32", list(w2.shape), w2.tobytes(), [{"name": "x", "parameters": {"binary_data": True}}]
    )
    add(
        Workload(
            "W2",
            "binary FP32 [1,1048576] in/out",
            "identity",
            directory / "w2.bin",
            OCTETS,
            length,
            w2.nbytes,
            check_binary_identity("FP32", list(w2.shape), w2.tobytes()),
            (1, 4),
            floor_model="echo",
        ),
        body,
    )

    w3 = rng.standard_normal((1, 65536)).astype(np.float32)
    body = json_request("x", w3)
    add(
        Workload(
            "W3",
            "JSON FP32 [1,65536] in/out",
            "identity",
            directory / "w3.json",
            JSON,
            None,
            w3.nbytes,
            check_json_identity(w3),
            (1,),
            floor_model="echo",
        ),
        body,
    )

    w6 = rng.standard_normal((64, 1000)).astype(np.float32)
    body, length = binary_request(
        "x", "FP32", list(w6.shape), w6.tobytes(), [{"name": "x", "parameters": {"classification": 5}}]
    )
    add(
        Workload(
            "W6",
            "classification top-5 of [64,1000] FP32 (binary in)",
            "identity",
            directory / "w6.bin",
            OCTETS,
            length,
            w6.nbytes,
            check_classification(w6, 5),
            (1,),
        ),
        body,
    )

    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", dtype=np.uint8)
    strings = [alphabet[rng.integers(0, len(alphabet), int(n))].tobytes() for n in rng.integers(90, 111, 1000)]
    raw = serialize_bytes(strings)
    body, length = binary_request("x", "BYTES", [1, 1000], raw, [{"name": "x", "parameters": {"binary_data": True}}])
    add(
        Workload(
            "W7",
            "BYTES 1000 x ~100 B, binary in/out",
            "identity_bytes",
            directory / "w7.bin",
            OCTETS,
            length,
            len(raw),
            check_binary_identity("BYTES", [1, 1000], raw),
            (1,),
        ),
        body,
    )

    # W8: one row to a small MLP, 64 clients at once, served by the servers that batch (W8u: ours unbatched).
    weights = mlp_weights(np.random.default_rng(SEED + 8))
    np.savez(directory / MLP_WEIGHTS, **weights)
    w8 = rng.standard_normal((1, MLP_INPUT)).astype(np.float32)
    body = json_request("x", w8)
    w8_workload = Workload(
        "W8",
        "MLP [1,64] FP32 JSON, batched",
        "mlp",
        directory / "w8.json",
        JSON,
        None,
        w8.nbytes,
        check_mlp(mlp_forward(weights, w8)),
        (64,),
        # The floor answers W1's fixed response: the HTTP ceiling under the same 64 clients and body.
        floor_model="fixed",
        servers=("floor", *BATCHING_SERVERS),
    )
    add(w8_workload, body)
    add(replace(w8_workload, key="W8u", title="the same, unbatched", model="mlp_unbatched", servers=("ours",)), body)

    if w9_files is not None:
        for workload, body in w9_workloads(directory, w9_files):
            add(workload, body)

    # W4 is one request, sent by the harness itself rather than wrk; its array is written in slices.
    w4_path = directory / "w4.bin"
    w4_rng = np.random.default_rng(SEED + 4)
    header = {
        "inputs": [
            {
                "name": "x",
                "shape": [1, w4_elements],
                "datatype": "FP32",
                "parameters": {"binary_data_size": w4_elements * 4},
            }
        ],
        "outputs": [{"name": "x", "parameters": {"binary_data": True}}],
    }
    encoded = json.dumps(header, separators=(",", ":")).encode()
    with w4_path.open("wb") as file:
        file.write(encoded)
        file.write(w4_rng.standard_normal(w4_elements, dtype=np.float32).tobytes())
    w4 = Workload(
        "W4",
        "one 64 MiB binary FP32 identity request",
        "identity",
        w4_path,
        OCTETS,
        len(encoded),
        w4_elements * 4,
        lambda headers, body: None,
        (1,),
        floor_model="echo",
    )
    return Bodies(workloads, fixed_path, w4, directory / MLP_WEIGHTS, w9_files)


def check_w4(workload: Workload, headers: dict[str, str], body: bytes, sent: bytes) -> str | None:
    """Identity over 64 MiB: the answer's binary buffer must equal the request's."""
    assert workload.header_length is not None
    raw = memoryview(sent)[workload.header_length :]
    document, buffers = split_response(headers, body)
    output = _single_output(document, "FP32", [1, workload.payload_bytes // 4])
    if isinstance(output, str):
        return output
    if len(buffers) != 1:
        return "output is not binary"
    return None if buffers[0] == raw else "binary data differs from the input"


# W9: one model file per kind, each served by ours and by the peer that runs that kind of file. The
# tabular files are asked for `predict_proba` alone, which MLServer's runtimes then compute alone.
W9_KINDS = {
    "s": ("sklearn", "HistGradientBoostingClassifier (joblib)", "input-0", ["predict_proba"], ("ours", "mlserver")),
    "x": ("xgboost", "XGBClassifier (JSON)", "input-0", ["predict_proba"], ("ours", "mlserver")),
    "o": ("onnx", "MLP exported by skl2onnx (ONNX)", "X", [], ("ours", "pytriton")),
}
W9_ROWS = (1, 64)
W9_KEYS = tuple(f"W9{letter}{rows}" for letter in W9_KINDS for rows in W9_ROWS)


def w9_workloads(directory: Path, files: Path) -> list[tuple[Workload, bytes]]:
    found = []
    with np.load(files / "requests.npz") as requests, np.load(files / "expected.npz") as expected:
        for letter, (kind, title, input_name, outputs, servers) in W9_KINDS.items():
            for rows in W9_ROWS:
                x = requests[f"x{rows}"]
                wanted = {
                    key.split(".", 1)[1]: expected[key] for key in expected.files if key.startswith(f"{kind}{rows}.")
                }
                requested = "" if not outputs else ',"outputs":[' + ",".join(f'{{"name":"{o}"}}' for o in outputs) + "]"
                key = f"W9{letter}{rows}"
                workload = Workload(
                    key,
                    f"{title}, JSON FP32 [{rows},100]",
                    f"w9_{kind}",
                    directory / f"{key.lower()}.json",
                    JSON,
                    None,
                    x.nbytes,
                    check_library_answer(wanted),
                    (1, 16),
                    servers=servers,
                )
                found.append((workload, json_request(input_name, x, requested)))
    return found


def check_library_answer(expected: dict[str, np.ndarray]) -> Callable[[dict[str, str], bytes], str | None]:
    """Every output the library returned, by name, of its shape and equal to its values up to float rounding."""

    def check(headers: dict[str, str], body: bytes) -> str | None:
        document, _ = split_response(headers, body)
        outputs = {output.get("name"): output for output in document.get("outputs") or [] if isinstance(output, dict)}
        if set(outputs) != set(expected):
            return f"expected outputs {sorted(expected)}, got {sorted(map(str, outputs))}"
        for name, array in expected.items():
            output = outputs[name]
            if output.get("shape") != list(array.shape):
                return f"{name}: expected shape {list(array.shape)}, got {output.get('shape')}"
            got = np.asarray(output.get("data"), dtype=np.float64).reshape(array.shape)
            # FP32 results travel as JSON numbers (a peer may widen them to FP64): equal within float32 rounding.
            if not np.allclose(got, array.astype(np.float64), rtol=1e-6, atol=1e-7):
                return f"{name} differs from the library's: {got.ravel()[:4]} against {array.ravel()[:4]}"
        return None

    return check
