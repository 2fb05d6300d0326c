"""Triton's shared memory extensions on gRPC: the system regions' status, register and unregister, and CUDA's
status and unregister, which answer as a Triton without GPUs does (no region to tell or unregister); its
register is refused (`_core/extensions.py`). The regions are the core's (`_core/shared_memory.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf.message import Message

from .._core.shared_memory import SharedMemory
from .._protobuf import inference_pb2 as pb

Parsed = Callable[[type[Any], Callable[[Any], Awaitable[Message]]], Callable[[bytes], Awaitable[Message]]]


def shared_memory_rpcs(memory: SharedMemory, parsed: Parsed) -> dict[str, Callable[[bytes], Awaitable[Message]]]:
    """The RPCs by name, each parsing its request with `parsed`."""

    async def status(request: pb.SystemSharedMemoryStatusRequest) -> pb.SystemSharedMemoryStatusResponse:
        response = pb.SystemSharedMemoryStatusResponse()
        for region in memory.status(request.name or None):
            entry = response.regions[region.name]
            entry.name, entry.key, entry.offset, entry.byte_size = (
                region.name,
                region.key,
                region.offset,
                region.byte_size,
            )
        return response

    async def register(request: pb.SystemSharedMemoryRegisterRequest) -> pb.SystemSharedMemoryRegisterResponse:
        memory.register(request.name, request.key, request.offset, request.byte_size)
        return pb.SystemSharedMemoryRegisterResponse()

    async def unregister(request: pb.SystemSharedMemoryUnregisterRequest) -> pb.SystemSharedMemoryUnregisterResponse:
        memory.unregister(request.name or None)
        return pb.SystemSharedMemoryUnregisterResponse()

    async def cuda_status(request: pb.CudaSharedMemoryStatusRequest) -> pb.CudaSharedMemoryStatusResponse:
        if request.name:  # no CUDA region is ever registered here
            raise memory.no_cuda_region(request.name)
        return pb.CudaSharedMemoryStatusResponse()

    async def cuda_unregister(request: pb.CudaSharedMemoryUnregisterRequest) -> pb.CudaSharedMemoryUnregisterResponse:
        return pb.CudaSharedMemoryUnregisterResponse()  # nothing to unregister, as in Triton without GPUs

    return {
        "SystemSharedMemoryStatus": parsed(pb.SystemSharedMemoryStatusRequest, status),
        "SystemSharedMemoryRegister": parsed(pb.SystemSharedMemoryRegisterRequest, register),
        "SystemSharedMemoryUnregister": parsed(pb.SystemSharedMemoryUnregisterRequest, unregister),
        "CudaSharedMemoryStatus": parsed(pb.CudaSharedMemoryStatusRequest, cuda_status),
        "CudaSharedMemoryUnregister": parsed(pb.CudaSharedMemoryUnregisterRequest, cuda_unregister),
    }
