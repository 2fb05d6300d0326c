"""POSIX shared-memory objects for the shared memory tests, made as a client makes them (shm_open's /dev/shm), each
removed when its block ends."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

DIRECTORY = "/dev/shm"


class Object:
    """A shared-memory object of a test: its key (as registered), and its bytes to write and read."""

    def __init__(self, key: str, fd: int) -> None:
        self.key, self.fd = key, fd

    @property
    def path(self) -> str:
        return os.path.join(DIRECTORY, self.key.lstrip("/"))

    def write(self, data: bytes | np.ndarray, offset: int = 0) -> None:
        os.pwrite(self.fd, data.tobytes() if isinstance(data, np.ndarray) else data, offset)

    def read(self, size: int, offset: int = 0) -> bytes:
        return os.pread(self.fd, size, offset)

    def array(self, dtype: type, shape: list[int], offset: int = 0) -> np.ndarray:
        count = int(np.prod(shape))
        return np.frombuffer(self.read(count * np.dtype(dtype).itemsize, offset), dtype=dtype).reshape(shape)

    def resize(self, size: int) -> None:
        os.ftruncate(self.fd, size)


@contextmanager
def shm_object(size: int, prefix: str = "oip_test") -> Iterator[Object]:
    """A new object of `size` zero bytes, whose key is unique to it."""
    key = f"/{prefix}_{uuid.uuid4().hex}"
    fd = os.open(os.path.join(DIRECTORY, key[1:]), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
        yield Object(key, fd)
    finally:
        os.close(fd)
        os.unlink(os.path.join(DIRECTORY, key[1:]))
