"""Property tests: every datatype and shape round-trips through JSON and binary, requests and responses."""

from __future__ import annotations

import asyncio
import json
import math
from decimal import Decimal
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from starlette.applications import Starlette

from oip_asgi import mount
from oip_asgi._core.number_text import number_texts
from oip_asgi._declarations.datatypes import rounds_to_infinity
from oip_asgi._declarations.errors import BadRequest
from oip_asgi._rest.bulk_json import bulk_request
from oip_asgi._rest.json_request import json_reason, parse_request
from oip_asgi._rest.json_tensors import array_from_json
from tests.support.client import as_array, binary_outputs, binary_request, bytes_tensor, client, split_response
from tests.support.strategies import DTYPES, tensors

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


def _edges(dtype: np.dtype) -> list[int | float]:
    """A datatype's extremes and the first values past them."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return [int(info.min) - 1, int(info.min), int(info.max), int(info.max) + 1]
    if dtype.kind == "f" and dtype.itemsize < 8:
        limit = rounds_to_infinity(dtype.type)  # the first double that overflows to infinity
        below = float(np.nextafter(limit, 0))
        return [limit, below, -limit, -below]
    return [float(np.finfo(np.float64).max), 0.1]


# Elements some datatype cannot take: out of any range, of the wrong kind, or a row where an element goes.
_odd_elements = st.one_of(
    st.integers(-(2**65), 2**65),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=2),
    st.booleans(),
    st.none(),
    st.lists(st.integers(0, 3), max_size=2),
)


def _rows(values: list[Any], shape: tuple[int, ...]) -> list[Any]:
    """`values` nested as rows of `shape` (the values may be lists themselves)."""
    if len(shape) < 2:
        return values
    step = math.prod(shape[1:])
    return [_rows(values[row * step : (row + 1) * step], shape[1:]) for row in range(shape[0])]


@st.composite
def request_texts(draw: st.DrawFn) -> tuple[bytes, bool]:
    """An inference request's JSON, and whether it is plain: flat data and no other array to account for."""
    plain = True
    inputs = []
    for index in range(draw(st.integers(0, 3))):
        datatype, array = draw(tensors())
        values = [item.decode("latin-1") for item in array.ravel()] if datatype == "BYTES" else array.ravel().tolist()
        if values and draw(st.booleans()):
            edges = st.sampled_from(_edges(DTYPES.get(datatype, np.dtype(bool))))
            odd = draw(st.one_of(edges, _odd_elements) if draw(st.booleans()) else edges)
            values[draw(st.integers(0, len(values) - 1))] = odd
            # simdjson reads no integer outside int64 and uint64 (the bulk path steps aside for msgspec's)
            plain = plain and not isinstance(odd, list) and not (isinstance(odd, int) and not -(2**63) <= odd < 2**64)
        plain = plain and not any("[" in value for value in values if isinstance(value, str))  # looks like a row
        data: Any = values
        if array.ndim > 1 and draw(st.integers(0, 3)) == 0:
            data, plain = _rows(values, array.shape), False
        shape = list(array.shape) if draw(st.integers(0, 5)) else [len(values) + 1]
        inputs.append({"name": f"t{index}", "shape": shape, "datatype": datatype, "data": data})
    request: dict[str, Any] = {"inputs": inputs, "id": "r"}
    if draw(st.booleans()):
        request["outputs"] = [{"name": "t0", "parameters": {"binary_data": draw(st.booleans())}}]
    if draw(st.integers(0, 5)) == 0:
        request["parameters"], plain = {"tags": ["a"]}, False
    text = json.dumps(request).encode()
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text) - 1))]
    return text, plain


def _outcome(name: str, datatype: str, shape: list[int], data: Any) -> tuple[str, bytes] | str:
    """The array `data` makes (its dtype and bytes), or the error it gets."""
    try:
        array = array_from_json(name, datatype, shape, data)
    except BadRequest as exc:
        return str(exc)
    assert array.flags.writeable  # a model may work in place
    return str(array.dtype), array.tobytes() if array.dtype != object else repr(array.tolist()).encode()


@settings(max_examples=400, deadline=None)
@given(request_texts())
@example((b'{"inputs": [{"name": "x", "shape": [1], "datatype": "UINT64", "data": [18446744073709551615]}]}', True))
@example((b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP64", "datatype": "FP32", "data": [0.1]}]}', False))
@example((b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [-9223372036854775809]}]}', False))
def test_the_bulk_parser_agrees_with_msgspec(request: tuple[bytes, bool]) -> None:
    """simdjson's path gives the request msgspec's gives, or steps aside; for plain requests it never steps aside."""
    text, plain = request
    bulk = bulk_request(text)
    try:
        expected = parse_request(text)
    except msgspec.MsgspecError:
        assert bulk is None
        return
    if bulk is None:  # UINT64 above 2**64 - 1 passes msgspec's schema, and numpy refuses it later
        assert not plain or any(isinstance(_outcome(t.name, t.datatype, t.shape, t.data), str) for t in expected.inputs)
        return
    assert msgspec.structs.replace(bulk, inputs=[]) == msgspec.structs.replace(expected, inputs=[])
    for got, want in zip(bulk.inputs, expected.inputs, strict=True):
        assert msgspec.structs.replace(got, data=None) == msgspec.structs.replace(want, data=None)
        assert want.data is not None and got.data is not None
        assert _outcome(got.name, got.datatype, got.shape, got.data) == _outcome(
            want.name, want.datatype, want.shape, want.data
        )


@pytest.mark.parametrize(
    "raised",
    [
        msgspec.DecodeError("Invalid UTF-8 encoded string"),  # msgspec 0.23 and later
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),  # msgspec 0.22 and before
    ],
)
def test_invalid_utf8_is_worded_alike_whichever_msgspec_raised_it(raised: Exception) -> None:
    body = b'{"inputs": [{"name": "\xff"}]}'
    assert json_reason(raised, body) == "'utf-8' codec can't decode byte 0xff in position 22: invalid start byte"
    assert json_reason(msgspec.DecodeError("trailing characters"), body) == "trailing characters"
