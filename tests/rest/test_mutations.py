"""Valid requests of any dtype/shape/encoding mix round-trip; mutations of them are 4xx, never 5xx, never a hang."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.rest.hostile_cases import IHCL, INFER, app
from tests.support.client import as_array, binary_outputs, bytes_tensor, client, split_response
from tests.support.strategies import tensors
from tests.support.waiting import HANG


@dataclass
class Built:
    """A valid request to the spec-less `echo` model, as it goes on the wire, and what it must give back."""

    header: dict[str, Any]
    parts: list[bytes]  # binary tensor bytes, in input order
    ihcl: bool  # send Inference-Header-Content-Length (required when there are parts)
    arrays: dict[str, tuple[str, np.ndarray]]
    binary_out: dict[str, bool]

    def encode(self) -> tuple[bytes, dict[str, str]]:
        head = json.dumps(self.header).encode()
        return head + b"".join(self.parts), ({IHCL: str(len(head))} if self.ihcl else {})


def _utf8(items: np.ndarray) -> bool:
    try:
        for item in items.ravel():
            item.decode()
    except UnicodeDecodeError:
        return False
    return True


@st.composite
def valid_requests(draw: st.DrawFn) -> Built:
    arrays = {f"t{index}": draw(tensors()) for index in range(draw(st.integers(1, 3)))}
    inputs: list[dict[str, Any]] = []
    parts: list[bytes] = []
    for name, (datatype, array) in arrays.items():
        tensor: dict[str, Any] = {"name": name, "shape": list(array.shape), "datatype": datatype}
        json_ok = datatype != "BYTES" or _utf8(array)
        if json_ok and draw(st.booleans()):
            values = [item.decode() for item in array.ravel()] if datatype == "BYTES" else array.ravel().tolist()
            nested = array.ndim > 1 and draw(st.booleans())
            tensor["data"] = np.array(values, dtype=object).reshape(array.shape).tolist() if nested else values
        else:
            if datatype == "BYTES":
                raw = bytes_tensor(list(array.ravel()))
            else:
                raw = array.astype(array.dtype.newbyteorder("<")).tobytes()
            tensor["parameters"] = {"binary_data_size": len(raw)}
            parts.append(raw)
        inputs.append(tensor)
    header: dict[str, Any] = {"inputs": inputs}
    # Outputs that JSON cannot carry (non-UTF-8 BYTES) must come back binary.
    forced = {name for name, (datatype, array) in arrays.items() if datatype == "BYTES" and not _utf8(array)}
    all_binary = draw(st.booleans())
    if all_binary:
        header["parameters"] = {"binary_data_output": True}
    binary_out = {name: all_binary for name in arrays}
    if forced or draw(st.booleans()):
        outputs = []
        for name in draw(st.permutations(list(arrays))):
            flag = True if name in forced else draw(st.sampled_from([None, False, True]))
            # binary_data_output covers only the outputs the request does not list (Triton's reading).
            binary_out[name] = bool(flag)
            outputs.append({"name": name} if flag is None else {"name": name, "parameters": {"binary_data": flag}})
        header["outputs"] = outputs
    return Built(header, parts, bool(parts) or draw(st.booleans()), arrays, binary_out)


def _pieces(body: bytes, size: int) -> AsyncIterator[bytes]:
    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), size):
            yield body[start : start + size]

    return chunks()


def _post(body: bytes, headers: dict[str, str], chunk: int | None) -> httpx.Response:
    """POST to echo, whole (with Content-Length) or streamed in `chunk`-byte pieces without one; never hangs."""

    async def post() -> httpx.Response:
        content: bytes | AsyncIterator[bytes] = body if chunk is None else _pieces(body, chunk)
        async with client(app) as http:
            with anyio.fail_after(HANG):
                return await http.post(
                    INFER, content=content, headers={name: value.encode("latin-1") for name, value in headers.items()}
                )

    # A loop per example, run from a sync test: hypothesis's draws then never happen inside a task.
    return anyio.run(post)


def _well_formed(response: httpx.Response) -> None:
    """A 2xx is a complete inference response; anything else a 4xx with an `{"error": ...}` body."""
    assert response.status_code < 500, response.text
    if response.status_code < 300:
        header, payload = split_response(response)
        binary_outputs(header, payload)  # the parts add up to exactly the payload
    else:
        assert 400 <= response.status_code < 500
        body = response.json()
        assert list(body) == ["error"] and isinstance(body["error"], str) and body["error"]


chunking = st.one_of(st.none(), st.integers(1, 64))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=valid_requests(), chunk=chunking)
def test_valid_mixed_requests_round_trip(request: Built, chunk: int | None) -> None:
    body, headers = request.encode()
    response = _post(body, headers, chunk)
    assert response.status_code == 200, response.text
    header, payload = split_response(response)
    parts = binary_outputs(header, payload)
    expected = [output["name"] for output in request.header.get("outputs", [])] or list(request.arrays)
    assert [output["name"] for output in header["outputs"]] == expected
    for output in header["outputs"]:
        datatype, array = request.arrays[output["name"]]
        assert (output["datatype"], output["shape"]) == (datatype, list(array.shape))
        assert ("data" not in output) == request.binary_out[output["name"]]
        result = as_array(output, parts.get(output["name"]))
        assert result.tolist() == array.tolist()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=valid_requests(), chunk=chunking, data=st.data())
def test_mutated_requests_are_4xx_never_5xx_never_a_hang(request: Built, chunk: int | None, data: Any) -> None:
    body, headers = request.encode()
    header_length = len(json.dumps(request.header).encode())  # the honest value, whether or not it is sent
    mutation = data.draw(st.sampled_from(["truncate", "flip", "append", "ihcl", "ihcl-text", "ihcl-drop", "size"]))
    must_fail = True  # False where the mutation may happen to leave the request valid
    if mutation == "truncate":
        body = body[: data.draw(st.integers(0, len(body) - 1))]
    elif mutation == "flip":
        position = data.draw(st.integers(0, len(body) - 1))
        byte = data.draw(st.integers(0, 255).filter(lambda value: value != body[position]))
        body = body[:position] + bytes([byte]) + body[position + 1 :]
        must_fail = False  # a digit or a tensor byte may change into another valid one
    elif mutation == "append":
        body += data.draw(st.binary(min_size=1, max_size=16))
        must_fail = False  # JSON whitespace after an all-JSON request is still valid
    elif mutation == "ihcl":
        lie = data.draw(st.integers(0, len(body) + 16).filter(lambda value: value != header_length))
        headers = {IHCL: str(lie)}
    elif mutation == "ihcl-text":
        headers = {IHCL: data.draw(st.sampled_from(["-1", "1e3", "0x10", " ", "²", "+5", "9" * 40]))}
    elif mutation == "ihcl-drop":
        # Dropping the header is only a lie when binary data follows the JSON.
        headers = {}
        must_fail = bool(request.parts)
    else:
        body, headers = _lie_about_a_size(request, data)
    response = _post(body, headers, chunk)
    _well_formed(response)
    if must_fail:
        assert 400 <= response.status_code < 500, (mutation, response.text)


def _lie_about_a_size(request: Built, data: Any) -> tuple[bytes, dict[str, str]]:
    """A wrong binary_data_size on one input (an honest Inference-Header-Content-Length for the new header)."""
    header = json.loads(json.dumps(request.header))
    binary = [tensor for tensor in header["inputs"] if "parameters" in tensor]
    tensor = data.draw(st.sampled_from(binary or header["inputs"]))
    size = (tensor.get("parameters") or {}).get("binary_data_size", -1)
    lies = st.sampled_from([2**40 + 1, 2**62]) | st.integers(0, size + 16).filter(lambda value: value != size)
    tensor["parameters"] = {"binary_data_size": data.draw(lies)}
    head = json.dumps(header).encode()
    return head + b"".join(request.parts), {IHCL: str(len(head))}
