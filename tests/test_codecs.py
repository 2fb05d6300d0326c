"""Property tests: every datatype and shape round-trips through JSON and binary, requests and responses."""

from __future__ import annotations

import asyncio
import math
from decimal import Decimal
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from starlette.applications import Starlette

from oip_asgi import mount
from oip_asgi._numbers import number_texts

from ._client import as_array, binary_outputs, binary_request, bytes_tensor, client, split_response

DTYPES = {
    "BOOL": np.dtype(bool), "UINT8": np.dtype("u1"), "UINT16": np.dtype("u2"), "UINT32": np.dtype("u4"),
    "UINT64": np.dtype("u8"), "INT8": np.dtype("i1"), "INT16": np.dtype("i2"), "INT32": np.dtype("i4"),
    "INT64": np.dtype("i8"), "FP16": np.dtype("f2"), "FP32": np.dtype("f4"), "FP64": np.dtype("f8"),
}  # fmt: skip

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


@st.composite
def tensors(draw: st.DrawFn) -> tuple[str, np.ndarray]:
    datatype = draw(st.sampled_from([*DTYPES, "BYTES"]))
    shape = draw(shapes)
    if datatype == "BYTES":
        items = draw(st.lists(st.binary(max_size=12), min_size=math.prod(shape), max_size=math.prod(shape)))
        array = np.empty(len(items), dtype=object)
        array[:] = items
        return datatype, array.reshape(shape)
    elements = (
        st.floats(allow_nan=False, allow_infinity=False, width=DTYPES[datatype].itemsize * 8)
        if datatype.startswith("FP")
        else None
    )
    return datatype, draw(hnp.arrays(DTYPES[datatype], shape, elements=elements))


APP = Starlette()
mount(APP, {"echo": lambda **inputs: inputs})


def call(body: bytes | None, json: Any = None, headers: dict[str, str] | None = None) -> Any:
    async def run() -> Any:
        async with client(APP) as http:
            return await http.post("/v2/models/echo/infer", content=body, json=json, headers=headers)

    return asyncio.run(run())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensor=tensors(), binary_in=st.booleans(), binary_out=st.booleans(), nested=st.booleans())
def test_tensors_round_trip(tensor: tuple[str, np.ndarray], binary_in: bool, binary_out: bool, nested: bool) -> None:
    datatype, array = tensor
    json_ok = datatype != "BYTES" or all(_is_utf8(item) for item in array.ravel())
    if not json_ok:
        binary_in = binary_out = True
    spec: dict[str, Any] = {"name": "t", "shape": list(array.shape), "datatype": datatype}
    request = {"inputs": [spec], "outputs": [{"name": "t", "parameters": {"binary_data": binary_out}}]}
    if binary_in:
        raw = (
            bytes_tensor(list(array.ravel()))
            if datatype == "BYTES"
            else array.astype(array.dtype.newbyteorder("<")).tobytes()
        )
        spec["parameters"] = {"binary_data_size": len(raw)}
        body, headers = binary_request(request, raw)
        response = call(body, headers=headers)
    else:
        values = [item.decode() for item in array.ravel()] if datatype == "BYTES" else array.ravel().tolist()
        spec["data"] = (
            np.array(values, dtype=object).reshape(array.shape).tolist() if nested and array.ndim > 1 else values
        )
        response = call(None, json=request)
    assert response.status_code == 200, response.text
    header, payload = split_response(response)
    output = header["outputs"][0]
    assert output["shape"] == list(array.shape) and output["datatype"] == datatype
    result = as_array(output, binary_outputs(header, payload)["t"] if binary_out else None)
    assert result.shape == array.shape
    assert result.tolist() == array.tolist()


def _is_utf8(item: bytes) -> bool:
    try:
        item.decode()
    except UnicodeDecodeError:
        return False
    return True


def _same_numbers(texts: list[str], values: np.ndarray) -> bool:
    # numpy's str() of a scalar is the shortest text that round-trips at the scalar's own precision.
    return [Decimal(text) for text in texts] == [Decimal(str(value)) for value in values]


def test_every_finite_float16_prints_as_its_shortest_text() -> None:
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = every[np.isfinite(every)]
    assert _same_numbers(number_texts(finite), finite)


@given(
    hnp.arrays(
        st.sampled_from([np.dtype(name) for name in ("f2", "f4", "f8", "i1", "u2", "i8", "u8")]),
        hnp.array_shapes(max_dims=2, max_side=50),
        elements={"allow_nan": False, "allow_infinity": False},
    )
)
def test_numbers_print_at_their_own_precision(values: np.ndarray) -> None:
    assert _same_numbers(number_texts(values), values.reshape(-1))
