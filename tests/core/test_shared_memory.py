"""The core's system shared memory (`_core/shared_memory.py`): regions of POSIX shared-memory objects registered,
told and unregistered in Triton's words; only shared-memory objects open; a region a request holds is not
unregistered; an object shrunk under a region is an error, never a crash."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest

from oip_asgi._core import shared_memory as module
from oip_asgi._core.request import DecodedRequest, RequestedOutput
from oip_asgi._core.shared_memory import (
    Holds,
    Place,
    RegionExists,
    RegionInUse,
    RegionStatus,
    SharedMemory,
    hold_regions,
    object_name,
    read_input,
    write_output,
)
from oip_asgi._core.unsupported import Unsupported
from oip_asgi._declarations.errors import BadRequest, NotFound
from tests.support.shared_memory import DIRECTORY, Object, shm_object


@pytest.fixture
def memory() -> Iterator[SharedMemory]:
    memory = SharedMemory()
    yield memory
    memory.close()


@pytest.fixture
def block() -> Iterator[Object]:
    with shm_object(256) as made:
        yield made


def test_a_region_registers_tells_its_status_and_unregisters(memory: SharedMemory, block: Object) -> None:
    memory.register("a", block.key, 64, 128)
    memory.register("b", block.key, 0, 256)  # one object under two names, as Triton allows
    assert memory.status() == [RegionStatus("a", block.key, 64, 128), RegionStatus("b", block.key, 0, 256)]
    assert memory.status("b") == [RegionStatus("b", block.key, 0, 256)]
    memory.unregister("a")
    memory.unregister("a")  # one not registered: nothing to do, as in Triton
    assert [region.name for region in memory.status()] == ["b"]
    memory.unregister()
    assert memory.status() == []
    with pytest.raises(NotFound, match="^Unable to find system shared memory region: 'a'$"):
        memory.status("a")


def test_registering_a_name_twice_is_refused_in_triton_s_words(memory: SharedMemory, block: Object) -> None:
    memory.register("a", block.key, 0, 8)
    with pytest.raises(RegionExists, match="^shared memory region 'a' already in manager$") as refused:
        memory.register("a", block.key, 0, 8)
    assert (refused.value.status_code, refused.value.grpc_code) == (400, "ALREADY_EXISTS")


@pytest.mark.parametrize(
    ("offset", "byte_size"),
    [(0, 257), (1, 256), (256, 1), (257, 0), (0, 0)],
    ids=["past-the-end", "offset-pushes-past", "offset-at-the-end", "offset-beyond", "empty"],
)
def test_a_region_the_object_does_not_hold_is_refused(
    memory: SharedMemory, block: Object, offset: int, byte_size: int
) -> None:
    with pytest.raises(BadRequest, match="^failed to register shared memory region 'r': invalid args"):
        memory.register("r", block.key, offset, byte_size)
    assert memory.status() == []


@pytest.mark.parametrize(
    "key",
    [
        "/../etc/passwd",
        "/a/b",
        "../x",
        "/..",
        "/.",
        "",
        "/",
        "//x",
        "/x\0y",
        "/" + "x" * 256,
    ],
    ids=[
        "dot-dot-path",
        "slash-inside",
        "relative-up",
        "dot-dot",
        "dot",
        "empty",
        "slash",
        "two-slashes",
        "nul",
        "long",
    ],
)
def test_a_key_that_names_no_shared_memory_object_never_reaches_the_file_system(
    memory: SharedMemory, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr(module, "_open", lambda name, key: opened.append(name))
    with pytest.raises(BadRequest, match="names no POSIX shared-memory object"):
        memory.register("r", key, 0, 1)
    assert opened == []


def test_object_names_are_shm_open_s() -> None:
    assert object_name("/input_simple") == "input_simple"
    assert object_name("input_simple") == "input_simple"  # shm_open takes it without the slash too
    assert object_name("/" + "x" * 255) == "x" * 255


def test_only_a_regular_shared_memory_object_opens(memory: SharedMemory, tmp_path: os.PathLike[str]) -> None:
    outside = os.path.join(tmp_path, "secret")
    with open(outside, "wb") as file:
        file.write(b"x" * 64)
    link = os.path.join(DIRECTORY, f"oip_test_link_{os.getpid()}")
    directory = os.path.join(DIRECTORY, f"oip_test_dir_{os.getpid()}")
    os.symlink(outside, link)
    os.mkdir(directory)
    try:
        for name in (link, directory, os.path.join(DIRECTORY, "oip_test_never_made")):
            key = "/" + os.path.basename(name)
            with pytest.raises(BadRequest, match=f"^Unable to open shared memory region: '{key}'$"):
                memory.register("r", key, 0, 8)
    finally:
        os.unlink(link)
        os.rmdir(directory)
    assert memory.status() == []


def test_a_region_in_use_is_not_unregistered(memory: SharedMemory, block: Object) -> None:
    for name in ("in", "out", "idle"):
        memory.register(name, block.key, 0, 64)
    holds = Holds()
    memory.slice(holds, "in", 0, 64)
    memory.slice(holds, "out", 0, 64)
    with pytest.raises(RegionInUse, match=r"^Cannot unregister shared memory region 'in', it is currently in use\.$"):
        memory.unregister("in")
    with pytest.raises(
        RegionInUse, match="^Failed to unregister the following system shared memory regions: in ,out ,$"
    ) as refused:
        memory.unregister()
    assert (refused.value.status_code, refused.value.grpc_code) == (409, "FAILED_PRECONDITION")
    assert [region.name for region in memory.status()] == ["in", "out"]  # the idle one went
    holds.release()
    holds.release()  # once only
    memory.unregister()
    assert memory.status() == []


@pytest.mark.parametrize(
    ("offset", "byte_size", "message"),
    [
        (64, 0, "Invalid offset for shared memory region: 'r'"),
        (-1, 4, "Invalid offset for shared memory region: 'r'"),
        (60, 8, r"Invalid offset \+ byte size for shared memory region: 'r'"),
        (0, 65, r"Invalid offset \+ byte size for shared memory region: 'r'"),
    ],
)
def test_a_tensor_outside_its_region_is_refused_and_holds_nothing(
    memory: SharedMemory, block: Object, offset: int, byte_size: int, message: str
) -> None:
    memory.register("r", block.key, 64, 64)
    holds = Holds()
    with pytest.raises(BadRequest, match=f"^{message}$"):
        memory.slice(holds, "r", offset, byte_size)
    with pytest.raises(NotFound, match="^Unable to find shared memory region: 'nope'$"):
        memory.slice(holds, "nope", 0, 1)
    memory.unregister("r")  # not held


def test_an_input_is_read_at_its_offset_into_an_array_of_its_own(memory: SharedMemory, block: Object) -> None:
    values = np.arange(16, dtype=np.int32)
    block.write(values, 96)
    memory.register("r", block.key, 64, 128)  # the region's offset and the tensor's add up
    holds = Holds()
    array = read_input(memory, holds, "m", "INPUT0", "INT32", [1, 16], Place("r", 32, 64))
    block.write(np.zeros(16, dtype=np.int32), 96)  # the client reuses its region: the model's copy stays
    assert array.tolist() == [values.tolist()] and array.flags.writeable
    with pytest.raises(
        BadRequest, match="^input byte size mismatch for input 'INPUT0' for model 'm'. Expected 64, got 32$"
    ):
        read_input(memory, holds, "m", "INPUT0", "INT32", [1, 16], Place("r", 0, 32))


def test_bytes_tensors_go_with_each_element_s_length_first(memory: SharedMemory, block: Object) -> None:
    memory.register("r", block.key, 0, 256)
    holds = Holds()
    strings = np.array([b"one", b"", b"three"], dtype=object)
    write_output(memory.slice(holds, "r", 0, 24), "OUT", strings, "BYTES")
    assert block.read(24) == b"\x03\x00\x00\x00one\x00\x00\x00\x00\x05\x00\x00\x00three" + bytes(4)
    assert read_input(memory, holds, "m", "IN", "BYTES", [3], Place("r", 0, 20)).tolist() == strings.tolist()
    with pytest.raises(BadRequest, match="cannot hold 3 BYTES elements"):
        read_input(memory, holds, "m", "IN", "BYTES", [3], Place("r", 0, 8))


def test_an_output_larger_than_its_place_is_refused_in_triton_s_words(memory: SharedMemory, block: Object) -> None:
    memory.register("r", block.key, 0, 64)
    with pytest.raises(
        BadRequest,
        match=r"^shared memory size specified with the request for output 'OUT' \(32 bytes\) should be at least "
        r"64 bytes to hold the results$",
    ):
        write_output(memory.slice(Holds(), "r", 0, 32), "OUT", np.ones(16, dtype=np.int32), "INT32")
    assert block.read(64) == bytes(64)


def test_an_object_shrunk_under_its_region_is_an_error_not_a_crash(memory: SharedMemory, block: Object) -> None:
    memory.register("r", block.key, 0, 256)
    block.resize(16)
    holds = Holds()
    with pytest.raises(BadRequest, match="no longer holds the 256 bytes registered"):
        read_input(memory, holds, "m", "IN", "UINT8", [256], Place("r", 0, 256))
    with pytest.raises(BadRequest, match="no longer holds the 256 bytes registered"):
        write_output(memory.slice(holds, "r", 0, 256), "OUT", np.ones(256, dtype=np.uint8), "UINT8")
    assert os.fstat(block.fd).st_size == 16  # never grown back by a write


def test_a_request_holds_its_regions_or_releases_them_all_when_one_fails(memory: SharedMemory, block: Object) -> None:
    memory.register("in", block.key, 0, 64)
    memory.register("out", block.key, 64, 64)
    request = DecodedRequest({}, outputs=[RequestedOutput("OUT", placed=Place("out", 0, 64))])
    hold_regions(memory, request, "m", [("IN", "INT32", [16], Place("in", 0, 64))])
    assert request.held is not None and request.inputs["IN"].shape == (16,)
    with pytest.raises(RegionInUse):
        memory.unregister("out")
    request.held.release()
    failing = DecodedRequest({}, outputs=[RequestedOutput("OUT", placed=Place("out", 0, 64))])
    with pytest.raises(BadRequest, match="Expected 64, got 60"):
        hold_regions(memory, failing, "m", [("IN", "INT32", [16], Place("in", 0, 60))])
    memory.unregister()  # nothing held


def test_without_shared_memory_every_call_says_why(block: Object) -> None:
    memory = SharedMemory(unavailable="this platform has no POSIX shared memory (/dev/shm is missing)")
    for call in (
        lambda: memory.register("r", block.key, 0, 8),
        memory.status,
        memory.unregister,
        lambda: memory.slice(Holds(), "r", 0, 8),
    ):
        with pytest.raises(Unsupported, match=r"/dev/shm is missing\); send the tensors in the request instead"):
            call()


def test_the_number_of_regions_is_bounded(memory: SharedMemory, block: Object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "MAX_REGIONS", 2)
    memory.register("a", block.key, 0, 8)
    memory.register("b", block.key, 0, 8)
    with pytest.raises(BadRequest, match="2 regions are registered already"):
        memory.register("c", block.key, 0, 8)


def test_on_aws_lambda_there_is_no_shared_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "oip")
    memory = SharedMemory()
    assert memory.unavailable == "AWS Lambda shares no memory with its clients (and has no /dev/shm)"
    with pytest.raises(Unsupported, match="^system shared memory is not available here: AWS Lambda"):
        memory.status()
