"""Triton's system shared memory extension: regions of POSIX shared-memory objects a client registers, and
the tensors a request reads from them or has written into them.

A region is a key (a shared-memory object's name, as ``shm_open`` takes it: ``/input_simple``), an offset
into that object and a byte size, registered under a name. Only shared-memory objects can be opened: a
key is one name (no ``/`` but a leading one, never ``.`` or ``..``), opened inside ``/dev/shm`` alone and
never through a symbolic link, and it must be a regular file whose size holds the region.

Nothing is mapped: the server keeps the object's descriptor and copies a tensor in with ``preadv`` and out
with ``pwritev``. A client that shrinks its object after registering it then gets an error, not a server
killed by SIGBUS, and the model gets an array of its own, which the client cannot change under it.

A request holds the regions it names from its decoding to its response (`Holds`): a region in use is not
unregistered (Triton 2.51's "it is currently in use"). Each process has its registry (see
docs/shared-memory.md on worker processes); every operation runs on the event loop, so none needs a lock.
"""

from __future__ import annotations

import math
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np

from .._declarations.errors import BadRequest, NotFound, OIPError, quoted
from .request import DecodedRequest
from .tensors import array_from_binary, binary_chunks, binary_size
from .unsupported import Unsupported

DIRECTORY = "/dev/shm"
# Regions one process keeps at once: each holds a descriptor, and a server out of descriptors accepts no connection.
MAX_REGIONS = 1024
NAME_MAX = 255
# The parameters that put a tensor in shared memory, on either wire.
REGION, OFFSET, BYTE_SIZE = "shared_memory_region", "shared_memory_offset", "shared_memory_byte_size"
PARAMETERS = frozenset((REGION, OFFSET, BYTE_SIZE))


class RegionInUse(OIPError, status_code=409, grpc_code="FAILED_PRECONDITION"):
    """An unregister of a region a request in flight reads or writes (Triton: INTERNAL; a conflict here)."""


class RegionExists(OIPError, status_code=400, grpc_code="ALREADY_EXISTS"):
    """A name registered already (Triton's ALREADY_EXISTS, which its HTTP answers with 400)."""


class RegionStatus(msgspec.Struct, gc=False):
    """A region as its status tells it, on every wire (REST's JSON, gRPC's RegionStatus)."""

    name: str
    key: str
    offset: int
    byte_size: int


@dataclass(slots=True, eq=False)
class Region:
    name: str
    key: str
    offset: int  # into the object
    byte_size: int
    fd: int
    uses: int = 0  # the requests in flight that hold it

    def status(self) -> RegionStatus:
        return RegionStatus(self.name, self.key, self.offset, self.byte_size)


@dataclass(slots=True, frozen=True)
class Slice:
    """Where a tensor is in a region: `offset` and `byte_size` within it, as the request gave them."""

    region: Region
    offset: int
    byte_size: int

    def read(self) -> np.ndarray:
        """The slice's bytes, copied into a new uint8 array of its own."""
        buffer = np.empty(self.byte_size, dtype=np.uint8)
        view = buffer.data
        position, filled = self.region.offset + self.offset, 0
        while filled < self.byte_size:
            count = os.preadv(self.region.fd, [view[filled:]], position + filled)
            if count == 0:
                raise _shrunk(self.region)
            filled += count
        return buffer

    def write(self, parts: Sequence[bytes | memoryview], size: int) -> None:
        region = self.region
        position = region.offset + self.offset
        if os.fstat(region.fd).st_size < position + size:  # writing would grow the client's object
            raise _shrunk(region)
        for part in parts:
            view = memoryview(part).cast("B")
            while len(view):
                count = os.pwritev(region.fd, [view], position)
                position += count
                view = view[count:]


def _shrunk(region: Region) -> BadRequest:
    return BadRequest(
        f"shared memory region {quoted(region.name)}: its object {quoted(region.key)} no longer holds "
        f"the {region.byte_size} bytes registered at offset {region.offset}"
    )


@dataclass(slots=True)
class Holds:
    """The regions one request reads or writes, held until it is responded to (`release`, once)."""

    regions: list[Region] = field(default_factory=list)

    def take(self, region: Region) -> None:
        region.uses += 1
        self.regions.append(region)

    def release(self) -> None:
        regions, self.regions = self.regions, []
        for region in regions:
            region.uses -= 1


def object_name(key: str) -> str | None:
    """The name of the shared-memory object `key` names (as ``shm_open`` reads it), or None for a key that names
    none: empty, longer than NAME_MAX, with a ``/`` past its first character, a NUL, or ``.`` or ``..``."""
    name = key[1:] if key.startswith("/") else key
    if not name or len(name.encode(errors="surrogateescape")) > NAME_MAX or "/" in name or "\0" in name:
        return None
    return None if name in (".", "..") else name


def _available() -> str:
    """Why this platform has no POSIX shared memory to register; empty where it has."""
    if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        return "AWS Lambda shares no memory with its clients (and has no /dev/shm)"
    if not sys.platform.startswith("linux"):
        return f"this server maps POSIX shared memory through {DIRECTORY}, which {sys.platform} does not have"
    if not os.path.isdir(DIRECTORY):  # AWS Lambda, some sandboxes
        return f"this platform has no POSIX shared memory ({DIRECTORY} is missing)"
    return ""


class SharedMemory:
    """The system shared-memory regions registered with one server (one process)."""

    def __init__(self, *, unavailable: str | None = None) -> None:
        self.unavailable = _available() if unavailable is None else unavailable
        self._regions: dict[str, Region] = {}

    def check_available(self) -> None:
        if self.unavailable:
            raise Unsupported(
                f"system shared memory is not available here: {self.unavailable}; send the tensors in the "
                "request instead (binary data after the JSON, or raw_input_contents on gRPC)"
            )

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        self.check_available()
        if not name:
            raise BadRequest("'region name' is necessary to register system shared memory region")
        if name in self._regions:
            raise RegionExists(f"shared memory region {quoted(name)} already in manager")
        failed = f"failed to register shared memory region {quoted(name)}"
        if len(self._regions) >= MAX_REGIONS:
            raise BadRequest(f"{failed}: {MAX_REGIONS} regions are registered already; unregister some first")
        if offset < 0 or byte_size < 0:
            raise BadRequest(f"{failed}: invalid args (offset and byte_size are byte counts, at least 0)")
        found = object_name(key)
        if found is None:
            raise BadRequest(
                f"{failed}: invalid args: key {quoted(key)} names no POSIX shared-memory object "
                "(shm_open's name: '/' then up to 255 characters, none of them '/', not '.' or '..')"
            )
        fd = _open(found, key)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise BadRequest(f"Unable to open shared memory region: {quoted(key)}")
            if byte_size == 0 or offset + byte_size > info.st_size:
                raise BadRequest(
                    f"{failed}: invalid args (offset {offset} and byte_size {byte_size} "
                    f"in an object of {info.st_size} bytes)"
                )
        except BaseException:
            os.close(fd)
            raise
        self._regions[name] = Region(name, key, offset, byte_size, fd)

    def status(self, name: str | None = None) -> list[RegionStatus]:
        self.check_available()
        if not name:
            return [region.status() for region in self._regions.values()]
        region = self._regions.get(name)
        if region is None:
            raise NotFound(f"Unable to find system shared memory region: {quoted(name)}")
        return [region.status()]

    def unregister(self, name: str | None = None) -> None:
        """Unregister `name` (nothing to do for one not registered, as in Triton), or every region (None)."""
        self.check_available()
        if name:
            region = self._regions.get(name)
            if region is not None:
                if region.uses:
                    raise RegionInUse(f"Cannot unregister shared memory region {quoted(name)}, it is currently in use.")
                self._close(region)
            return
        busy = [region.name for region in self._regions.values() if region.uses]
        for region in [region for region in self._regions.values() if not region.uses]:
            self._close(region)
        if busy:  # Triton's words, its separators too
            listed = "".join(f"{region} ," for region in busy)
            raise RegionInUse(f"Failed to unregister the following system shared memory regions: {listed}")

    def _close(self, region: Region) -> None:
        del self._regions[region.name]
        os.close(region.fd)

    def close(self) -> None:
        """Forget every region, in use or not: the server stops."""
        for region in list(self._regions.values()):
            self._close(region)

    def no_cuda_region(self, name: str) -> NotFound:
        """Triton's answer to the status of the CUDA region `name`: none is ever registered here."""
        if name in self._regions:
            return NotFound(
                f"The region named {quoted(name)} is registered as system shared memory, not CUDA shared memory"
            )
        return NotFound(f"Unable to find cuda shared memory region: {quoted(name)}")

    def __len__(self) -> int:
        return len(self._regions)

    def slice(self, holds: Holds, name: str, offset: int, byte_size: int) -> Slice:
        """Where a tensor is, checked against its region (Triton's words), the region held by `holds`."""
        self.check_available()
        region = self._regions.get(name)
        if region is None:
            raise NotFound(f"Unable to find shared memory region: {quoted(name)}")
        if not 0 <= offset < region.byte_size:
            raise BadRequest(f"Invalid offset for shared memory region: {quoted(name)}")
        if byte_size < 0 or offset + byte_size > region.byte_size:
            raise BadRequest(f"Invalid offset + byte size for shared memory region: {quoted(name)}")
        holds.take(region)
        return Slice(region, offset, byte_size)


def _open(name: str, key: str) -> int:
    """The object's descriptor, opened as shm_open opens it: in /dev/shm, never through a link."""
    directory = os.open(DIRECTORY, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=directory)
    except OSError:
        raise BadRequest(f"Unable to open shared memory region: {quoted(key)}") from None
    finally:
        os.close(directory)


@dataclass(slots=True, frozen=True)
class Place:
    """A tensor's shared-memory parameters as a request gave them, before its region is looked up."""

    region: str
    offset: int
    byte_size: int


def placement(tensor: str, region: str | None, offset: int | None, byte_size: int | None) -> Place | None:
    """A tensor's place from its three parameters (None where it names no region), in Triton's words when wrong.

    Each wire has read the parameters' values (and refused a value of the wrong type in its own words).
    """
    if region is None:
        for given, parameter in ((offset, OFFSET), (byte_size, BYTE_SIZE)):
            if given is not None:
                raise BadRequest(
                    f"'{parameter}' can not be specified without '{REGION}' parameter for tensor {quoted(tensor)}"
                )
        return None
    if byte_size is None:
        raise BadRequest(f"'{BYTE_SIZE}' must be specified with '{REGION}' parameter for tensor {quoted(tensor)}")
    return Place(region, 0 if offset is None else offset, byte_size)


def hold_regions(
    memory: SharedMemory, request: DecodedRequest, model: str, inputs: Sequence[tuple[str, str, list[int], Place]]
) -> None:
    """Look up the regions of the request's outputs placed in shared memory (each `RequestedOutput.placed`, a
    `Place`, becomes its `Slice`) and read its `inputs` placed there (name, datatype, shape, place): the regions
    held by the request until it is responded to, or released again if one fails."""
    request.held = holds = Holds()
    try:
        for output in request.outputs or ():
            if output.placed is not None:
                place: Place = output.placed
                output.placed = memory.slice(holds, place.region, place.offset, place.byte_size)
        for name, datatype, shape, place in inputs:
            request.inputs[name] = read_input(memory, holds, model, name, datatype, shape, place)
    except BaseException:
        holds.release()
        raise


def read_input(
    memory: SharedMemory, holds: Holds, model: str, name: str, datatype: str, shape: list[int], place: Place
) -> np.ndarray:
    """The input `name` read from its region: copied once into an array of its own."""
    where = memory.slice(holds, place.region, place.offset, place.byte_size)
    expected = binary_size(datatype, shape)
    if expected is not None and expected != place.byte_size:  # Triton's words
        raise BadRequest(
            f"input byte size mismatch for input {quoted(name)} for model {quoted(model)}. "
            f"Expected {expected}, got {place.byte_size}"
        )
    if expected is None and math.prod(shape) * 4 > place.byte_size:
        raise BadRequest(
            f"input {quoted(name)}: {place.byte_size} bytes of shared memory cannot hold "
            f"{math.prod(shape)} BYTES elements"
        )
    return array_from_binary(name, datatype, shape, where.read())


@dataclass(slots=True, frozen=True)
class Written:
    """An output ready to go into its place: checked to fit, written by `write`."""

    where: Slice
    parts: list[bytes | memoryview]
    size: int

    def write(self) -> None:
        self.where.write(self.parts, self.size)


def output_to_write(where: Slice, name: str, array: np.ndarray, datatype: str) -> Written:
    """The output `name` as binary data (BYTES with each element's 4-byte length) checked to fit its place; a
    request writes its outputs once all of them fit, so that a refused one writes none."""
    size, parts = binary_chunks(array, datatype)
    if size > where.byte_size:  # Triton's words
        raise BadRequest(
            f"shared memory size specified with the request for output {quoted(name)} ({where.byte_size} bytes) "
            f"should be at least {size} bytes to hold the results"
        )
    return Written(where, parts, size)


def write_output(where: Slice, name: str, array: np.ndarray, datatype: str) -> None:
    output_to_write(where, name, array, datatype).write()
