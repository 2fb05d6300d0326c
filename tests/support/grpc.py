"""A gRPC server of an `OIPApp` on a thread of its own, and the helpers the gRPC tests share."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from oip_asgi import OIPApp
from oip_asgi.grpc import inference_pb2 as pb
from oip_asgi.grpc import serving

INFER = "/inference.GRPCInferenceService/ModelInfer"
TYPED_FIELDS = {
    "BOOL": ("bool_contents", np.bool_), "UINT8": ("uint_contents", np.uint8), "UINT16": ("uint_contents", np.uint16),
    "UINT32": ("uint_contents", np.uint32), "UINT64": ("uint64_contents", np.uint64), "INT8": ("int_contents", np.int8),
    "INT16": ("int_contents", np.int16), "INT32": ("int_contents", np.int32), "INT64": ("int64_contents", np.int64),
    "FP32": ("fp32_contents", np.float32), "FP64": ("fp64_contents", np.float64), "BYTES": ("bytes_contents", object),
}  # fmt: skip


@contextmanager
def grpc_server(app: OIPApp, **options: Any) -> Iterator[str]:
    """`app` served over gRPC on 127.0.0.1 by an event loop in a thread, while the block runs; its address."""
    started = threading.Event()
    state: dict[str, Any] = {}

    async def main() -> None:
        stop = state["stop"] = asyncio.Event()
        try:
            async with serving(app, "127.0.0.1:0", **options) as port:
                state["port"] = port
                started.set()
                await stop.wait()
        except BaseException as exc:
            state["error"] = exc
            started.set()
            raise
        finally:
            app.core.pool.shutdown()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), name="grpc-test-server", daemon=True)
    thread.start()
    try:
        if not started.wait(30) or "error" in state:
            raise RuntimeError(f"the gRPC server did not start: {state.get('error')!r}")
        yield f"127.0.0.1:{state['port']}"
    finally:
        if "stop" in state:
            loop.call_soon_threadsafe(state["stop"].set)
        thread.join(30)
        loop.close()


def request(
    model: str, *tensors: tuple[str, str, np.ndarray], typed: bool = False, **fields: Any
) -> pb.ModelInferRequest:
    """A ModelInferRequest of (name, datatype, array) inputs, in raw_input_contents or typed contents."""
    message = pb.ModelInferRequest(model_name=model, **fields)
    for name, datatype, array in tensors:
        tensor = message.inputs.add(name=name, datatype=datatype, shape=array.shape)
        if typed:
            field, _ = TYPED_FIELDS[datatype]
            getattr(tensor.contents, field).extend(array.ravel().tolist())
        else:
            message.raw_input_contents.append(raw_bytes(datatype, array))
    return message


def raw_bytes(datatype: str, array: np.ndarray) -> bytes:
    if datatype == "BYTES":
        return b"".join(len(item).to_bytes(4, "little") + item for item in array.ravel().tolist())
    return np.ascontiguousarray(array).tobytes()


def output_array(response: pb.ModelInferResponse, name: str, dtype: Any = None) -> np.ndarray:
    """An output of `response`, from its raw contents or its typed ones."""
    (index,) = [i for i, output in enumerate(response.outputs) if output.name == name]
    output = response.outputs[index]
    shape = list(output.shape)
    if response.raw_output_contents:
        raw = response.raw_output_contents[index]
        if output.datatype == "BYTES":
            items, position = [], 0
            while position < len(raw):
                length = int.from_bytes(raw[position : position + 4], "little")
                items.append(raw[position + 4 : position + 4 + length])
                position += 4 + length
            array = np.empty(len(items), dtype=object)
            array[:] = items
            return array.reshape(shape)
        return np.frombuffer(raw, dtype=dtype).reshape(shape)
    field, typed_dtype = TYPED_FIELDS[output.datatype]
    values = list(getattr(output.contents, field))
    array = np.empty(len(values), dtype=object) if typed_dtype is object else np.array(values, dtype=typed_dtype)
    if typed_dtype is object:
        array[:] = values
    return array.reshape(shape)
