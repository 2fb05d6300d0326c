"""Triton's system shared memory on REST, in process: regions registered, told and unregistered; inputs read from
them, outputs written into them and answered without data, as Triton answers; every wrong request a 4xx in
Triton's words, after which the server goes on serving; CUDA's status and unregister as a Triton without GPUs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest

from examples.models import models as example_models
from oip_asgi import Model, OIPApp, TensorSpec, oip_app
from tests.support.client import binary_request, bytes_tensor, client, split_response
from tests.support.shared_memory import Object, shm_object
from tests.support.waiting import until

pytestmark = pytest.mark.anyio

INT32 = [1, 16]
SIZE = 64  # bytes of an INT32 [1, 16] tensor


def shm(region: str, byte_size: int, offset: int | None = None) -> dict[str, Any]:
    parameters: dict[str, Any] = {"shared_memory_region": region, "shared_memory_byte_size": byte_size}
    if offset is not None:
        parameters["shared_memory_offset"] = offset
    return parameters


def simple_request(**changes: Any) -> dict[str, Any]:
    """tritonclient's request of simple_http_shm_client.py: both inputs in one region, both outputs in another."""
    request: dict[str, Any] = {
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": INT32, "parameters": shm("input", SIZE)},
            {"name": "INPUT1", "datatype": "INT32", "shape": INT32, "parameters": shm("input", SIZE, SIZE)},
        ],
        "outputs": [
            {"name": "OUTPUT0", "parameters": {"binary_data": False, **shm("output", SIZE)}},
            {"name": "OUTPUT1", "parameters": {"binary_data": False, **shm("output", SIZE, SIZE)}},
        ],
    }
    request.update(changes)
    return request


@pytest.fixture
def regions() -> Iterator[tuple[Object, Object]]:
    with shm_object(2 * SIZE) as inputs, shm_object(2 * SIZE) as outputs:
        inputs.write(np.arange(16, dtype=np.int32))
        inputs.write(np.ones(16, dtype=np.int32), SIZE)
        yield inputs, outputs


@pytest.fixture
async def app(regions: tuple[Object, Object]) -> AsyncIterator[OIPApp]:
    app = oip_app(example_models)
    inputs, outputs = regions
    async with client(app) as http:
        for name, made in (("input", inputs), ("output", outputs)):
            answer = await http.post(
                f"/systemsharedmemory/region/{name}/register", json={"key": made.key, "byte_size": 2 * SIZE}
            )
            assert (answer.status_code, answer.content) == (200, b"")
    yield app
    app.core.shared_memory.close()


async def test_the_regions_are_told_and_unregistered(app: OIPApp, regions: tuple[Object, Object]) -> None:
    inputs, outputs = regions
    async with client(app) as http:
        assert (await http.get("/systemsharedmemory/status")).json() == [
            {"name": "input", "key": inputs.key, "offset": 0, "byte_size": 128},
            {"name": "output", "key": outputs.key, "offset": 0, "byte_size": 128},
        ]
        told = await http.get("/systemsharedmemory/region/output/status")
        assert told.json() == [{"name": "output", "key": outputs.key, "offset": 0, "byte_size": 128}]
        assert (await http.post("/systemsharedmemory/region/input/unregister")).status_code == 200
        unknown = await http.get("/systemsharedmemory/region/input/status")
        assert (unknown.status_code, unknown.json()) == (
            404,
            {"error": "Unable to find system shared memory region: 'input'"},
        )
        assert (await http.post("/systemsharedmemory/unregister")).status_code == 200
        assert (await http.get("/systemsharedmemory/status")).json() == []


async def test_inputs_are_read_from_regions_and_outputs_written_into_them(
    app: OIPApp, regions: tuple[Object, Object]
) -> None:
    _, outputs = regions
    async with client(app) as http:
        answer = await http.post("/models/simple/infer", json=simple_request())
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"  # no binary part: nothing after the JSON
    assert answer.json()["outputs"] == [  # as Triton answers: no data, no binary_data_size
        {"name": "OUTPUT0", "datatype": "INT32", "shape": INT32},
        {"name": "OUTPUT1", "datatype": "INT32", "shape": INT32},
    ]
    assert outputs.array(np.int32, [2, 16]).tolist() == [list(range(1, 17)), list(range(-1, 15))]


async def test_tensors_in_regions_mix_with_binary_and_json_ones(app: OIPApp, regions: tuple[Object, Object]) -> None:
    _, outputs = regions
    header = simple_request()
    header["inputs"][1] = {
        "name": "INPUT1",
        "datatype": "INT32",
        "shape": INT32,
        "parameters": {"binary_data_size": SIZE},
    }
    header["outputs"][1] = {"name": "OUTPUT1", "parameters": {"binary_data": True}}
    body, headers = binary_request(header, (np.ones(16, dtype=np.int32) * 2).tobytes())
    async with client(app) as http:
        answer = await http.post("/models/simple/infer", content=body, headers=headers)
        assert answer.status_code == 200, answer.text
        json_header, binary = split_response(answer)
        assert np.frombuffer(binary, np.int32).tolist() == [value - 2 for value in range(16)]
        assert json_header["outputs"][0] == {"name": "OUTPUT0", "datatype": "INT32", "shape": INT32}
        assert outputs.array(np.int32, [16]).tolist() == [value + 2 for value in range(16)]
        as_json = simple_request()
        as_json["inputs"][0] = {"name": "INPUT0", "datatype": "INT32", "shape": INT32, "data": [5] * 16}
        del as_json["outputs"]
        answer = await http.post("/models/simple/infer", json=as_json)
        assert [output["data"] for output in answer.json()["outputs"]] == [[6] * 16, [4] * 16]


async def test_bytes_tensors_in_regions_as_triton_serializes_them(app: OIPApp) -> None:
    values = [str(value).encode() for value in range(16)]
    serialized = bytes_tensor(values)
    with shm_object(len(serialized)) as text_in, shm_object(256) as text_out:
        text_in.write(serialized)
        async with client(app) as http:
            for name, made in (("text_in", text_in), ("text_out", text_out)):
                body = {"key": made.key, "byte_size": len(serialized) if name == "text_in" else 256}
                assert (await http.post(f"/systemsharedmemory/region/{name}/register", json=body)).status_code == 200
            request = {
                "inputs": [
                    {
                        "name": "INPUT0",
                        "datatype": "BYTES",
                        "shape": INT32,
                        "parameters": shm("text_in", len(serialized)),
                    },
                    {
                        "name": "INPUT1",
                        "datatype": "BYTES",
                        "shape": INT32,
                        "parameters": shm("text_in", len(serialized)),
                    },
                ],
                "outputs": [{"name": "OUTPUT0", "parameters": shm("text_out", 256)}, {"name": "OUTPUT1"}],
            }
            answer = await http.post("/models/simple_string/infer", json=request)
            assert answer.status_code == 200, answer.text
            assert answer.json()["outputs"][1]["data"] == ["0"] * 16
            await http.post("/systemsharedmemory/unregister")
        doubled = bytes_tensor([str(2 * value).encode() for value in range(16)])
        assert text_out.read(len(doubled)) == doubled


BAD_REQUESTS = [
    (
        "unknown-region",
        lambda r: r["inputs"][0]["parameters"].update(shared_memory_region="nope"),
        404,
        "Unable to find shared memory region: 'nope'",
    ),
    (
        "offset-out-of-bounds",
        lambda r: r["inputs"][1]["parameters"].update(shared_memory_offset=128),
        400,
        "Invalid offset for shared memory region: 'input'",
    ),
    (
        "size-out-of-bounds",
        lambda r: r["inputs"][1]["parameters"].update(shared_memory_offset=65),
        400,
        "Invalid offset + byte size for shared memory region: 'input'",
    ),
    (
        "size-not-the-tensor-s",
        lambda r: r["inputs"][1]["parameters"].update(shared_memory_byte_size=60),
        400,
        "input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 60",
    ),
    (
        "output-too-small",
        lambda r: r["outputs"][1]["parameters"].update(shared_memory_byte_size=32),
        400,
        "shared memory size specified with the request for output 'OUTPUT1' (32 bytes) should be at least 64 bytes",
    ),
    (
        "data-and-region",
        lambda r: r["inputs"][0].update(data=[0] * 16),
        400,
        "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
        "'shared_memory_region' in 'parameters'. But set 'data' 'shared_memory_region'",
    ),
    (
        "no-byte-size",
        lambda r: r["inputs"][0]["parameters"].pop("shared_memory_byte_size"),
        400,
        "'shared_memory_byte_size' must be specified with 'shared_memory_region' parameter for tensor 'INPUT0'",
    ),
    (
        "region-not-a-string",
        lambda r: r["inputs"][0]["parameters"].update(shared_memory_region=7),
        400,
        "shared_memory_region",
    ),
    (
        "negative-offset",
        lambda r: r["inputs"][1]["parameters"].update(shared_memory_offset=-64),
        400,
        "shared_memory_offset",
    ),
    (
        "classification-and-region",
        lambda r: r["outputs"][0]["parameters"].update(classification=2),
        400,
        "Output can't set both 'shared_memory_region' and 'classification'",
    ),
    (
        "binary-and-region",
        lambda r: r["outputs"][0]["parameters"].update(binary_data=True),
        400,
        "Output can't set both 'shared_memory_region' and 'binary_data'",
    ),
]


@pytest.mark.parametrize(("case", "change", "status", "message"), BAD_REQUESTS, ids=[case[0] for case in BAD_REQUESTS])
async def test_a_wrong_request_is_refused_in_triton_s_words_and_holds_nothing(
    app: OIPApp, regions: tuple[Object, Object], case: str, change: Any, status: int, message: str
) -> None:
    _, outputs = regions
    request = simple_request()
    change(request)
    async with client(app) as http:
        answer = await http.post("/models/simple/infer", json=request)
        assert answer.status_code == status
        assert message in answer.json()["error"]
        assert outputs.read(2 * SIZE) == bytes(2 * SIZE)  # nothing written for a request refused
        assert (await http.post("/models/simple/infer", json=simple_request())).status_code == 200  # serving on
        assert (await http.post("/systemsharedmemory/unregister")).status_code == 200  # none left held


REGISTER_ERRORS = [
    ("no-key", {"byte_size": 8}, 400, "Shared memory register request has no 'key' field"),
    ("no-byte-size", {"key": "/k"}, 400, "Shared memory register request has no 'byte_size' field"),
    ("key-with-a-path", {"key": "/../../etc/passwd", "byte_size": 8}, 400, "names no POSIX shared-memory object"),
    ("no-such-object", {"key": "/oip_test_never_made", "byte_size": 8}, 400, "Unable to open shared memory region"),
    ("negative-size", {"key": "/k", "byte_size": -1}, 400, "byte_size"),
    ("not-json", b"{", 400, "malformed request JSON"),
]


@pytest.mark.parametrize(("case", "body", "status", "message"), REGISTER_ERRORS, ids=[c[0] for c in REGISTER_ERRORS])
async def test_a_wrong_register_request_is_refused(
    app: OIPApp, case: str, body: Any, status: int, message: str
) -> None:
    async with client(app) as http:
        options = {"content": body} if isinstance(body, bytes) else {"json": body}
        answer = await http.post("/systemsharedmemory/region/r/register", **options)
        assert (answer.status_code, message in answer.json()["error"]) == (status, True), answer.text
        assert [region["name"] for region in (await http.get("/systemsharedmemory/status")).json()] == [
            "input",
            "output",
        ]


async def test_register_needs_a_region_name_and_a_new_one(app: OIPApp, regions: tuple[Object, Object]) -> None:
    async with client(app) as http:
        nameless = await http.post("/systemsharedmemory/register", json={"key": regions[0].key, "byte_size": 8})
        assert nameless.json() == {"error": "'region name' is necessary to register system shared memory region"}
        again = await http.post(
            "/systemsharedmemory/region/input/register", json={"key": regions[0].key, "byte_size": 8}
        )
        assert (again.status_code, again.json()) == (400, {"error": "shared memory region 'input' already in manager"})


async def test_a_region_in_use_is_not_unregistered_until_its_request_is_answered(
    regions: tuple[Object, Object],
) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow_add_sub(INPUT0: np.ndarray, INPUT1: np.ndarray) -> dict[str, np.ndarray]:
        entered.set()
        release.wait(30)
        return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}

    spec = [TensorSpec("INPUT0", "INT32", [-1, 16]), TensorSpec("INPUT1", "INT32", [-1, 16])]
    outputs_spec = [TensorSpec("OUTPUT0", "INT32", [-1, 16]), TensorSpec("OUTPUT1", "INT32", [-1, 16])]
    app = oip_app({"simple": Model(slow_add_sub, inputs=spec, outputs=outputs_spec)})
    inputs, outputs = regions
    async with client(app) as http:
        for name, made in (("input", inputs), ("output", outputs)):
            await http.post(f"/systemsharedmemory/region/{name}/register", json={"key": made.key, "byte_size": 128})
        inference = asyncio.ensure_future(http.post("/models/simple/infer", json=simple_request()))
        await until(entered.is_set, "the model is called")
        busy = await http.post("/systemsharedmemory/region/input/unregister")
        assert (busy.status_code, busy.json()) == (
            409,
            {"error": "Cannot unregister shared memory region 'input', it is currently in use."},
        )
        every = await http.post("/systemsharedmemory/unregister")
        assert every.json() == {
            "error": "Failed to unregister the following system shared memory regions: input ,output ,"
        }
        assert len((await http.get("/systemsharedmemory/status")).json()) == 2
        release.set()
        assert (await inference).status_code == 200
        assert outputs.array(np.int32, [16]).tolist() == list(range(1, 17))
        assert (await http.post("/systemsharedmemory/unregister")).status_code == 200
        assert (await http.get("/systemsharedmemory/status")).json() == []


async def test_the_model_gets_a_copy_the_client_cannot_change(regions: tuple[Object, Object]) -> None:
    seen: list[np.ndarray] = []

    def keep(INPUT0: np.ndarray) -> np.ndarray:
        seen.append(INPUT0)
        INPUT0 += 100  # its own array: writing into it touches no region
        return INPUT0

    app = oip_app(
        {
            "keep": Model(
                keep, inputs=[TensorSpec("INPUT0", "INT32", [-1])], outputs=[TensorSpec("OUTPUT0", "INT32", [-1])]
            )
        }
    )
    inputs, _ = regions
    async with client(app) as http:
        await http.post("/systemsharedmemory/region/input/register", json={"key": inputs.key, "byte_size": 128})
        request = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [16], "parameters": shm("input", SIZE)}]}
        assert (await http.post("/models/keep/infer", json=request)).status_code == 200
    inputs.write(np.zeros(16, dtype=np.int32))
    assert seen[0].tolist() == [value + 100 for value in range(16)]
    assert inputs.array(np.int32, [16]).tolist() == [0] * 16


async def test_cuda_shared_memory_has_no_region_and_registers_none() -> None:
    app = oip_app(example_models)
    async with client(app) as http:
        assert (await http.get("/cudasharedmemory/status")).json() == []
        assert (await http.post("/cudasharedmemory/unregister")).status_code == 200
        assert (await http.post("/cudasharedmemory/region/r/unregister")).status_code == 200
        unknown = await http.get("/cudasharedmemory/region/r/status")
        assert (unknown.status_code, unknown.json()) == (
            404,
            {"error": "Unable to find cuda shared memory region: 'r'"},
        )
        refused = await http.post(
            "/cudasharedmemory/region/r/register", json={"raw_handle": {"b64": ""}, "byte_size": 8}
        )
        assert refused.status_code == 501
        assert "it runs no GPU code; use system shared memory" in refused.json()["error"]
        with shm_object(8) as made:
            await http.post("/systemsharedmemory/region/r/register", json={"key": made.key, "byte_size": 8})
            system = await http.get("/cudasharedmemory/region/r/status")
            assert (
                system.json()["error"]
                == "The region named 'r' is registered as system shared memory, not CUDA shared memory"
            )
            await http.post("/systemsharedmemory/unregister")


async def test_where_the_platform_has_no_shared_memory_it_says_so() -> None:
    app = oip_app(
        example_models, shared_memory_unavailable="this platform has no POSIX shared memory (/dev/shm is missing)"
    )
    async with client(app) as http:
        assert "system_shared_memory" not in (await http.get("")).json()["extensions"]
        for method, path in (("GET", "/systemsharedmemory/status"), ("POST", "/systemsharedmemory/region/r/register")):
            answer = await http.request(method, path, json={"key": "/k", "byte_size": 8})
            assert answer.status_code == 501
            assert answer.json()["error"].startswith("system shared memory is not available here: this platform has no")
        refused = await http.post("/models/simple/infer", json=simple_request())
        assert refused.status_code == 501


async def test_the_extension_is_behind_the_shared_memory_group() -> None:
    app = oip_app(example_models, restricted_apis=["shared-memory:admin-key=k"])
    async with client(app) as http:
        for method, path in (("GET", "/systemsharedmemory/status"), ("POST", "/systemsharedmemory/unregister")):
            assert (await http.request(method, path)).status_code == 403
            assert (await http.request(method, path, headers={"admin-key": "k"})).status_code == 200
