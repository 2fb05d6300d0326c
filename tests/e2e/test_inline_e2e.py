"""A plain `def` model cheaper than the hop runs on the event loop of a real `oip-asgi serve`, whichever wire
asks (tritonclient over REST and gRPC share its measured streak), and one that says ``inline=False`` never
does (tests/apps/inline.py: each answers where it ran)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from oip_asgi._core.inline import FUNCTION_STREAK
from tests.support.servers import HOST, free_port, serving

pytest.importorskip("oip_asgi.grpc")
httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clients() -> Iterator[dict[str, Any]]:
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "tests.apps.inline:models", "--port", str(port), "--grpc-port", str(grpc_port)]
    with serving(argv, port):
        http = httpclient.InferenceServerClient(f"{HOST}:{port}")
        grpc = grpcclient.InferenceServerClient(f"{HOST}:{grpc_port}")
        yield {"http": http, "grpc": grpc}
        http.close()
        grpc.close()


def on_loop(clients: dict[str, Any], wire: str, model: str) -> bool:
    module = httpclient if wire == "http" else grpcclient
    tensor = module.InferInput("X", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], np.int32))
    (answer,) = clients[wire].infer(model, [tensor]).as_numpy("ON_LOOP").tolist()
    return bool(answer)


def test_a_cheap_def_runs_on_the_loop_after_its_streak_over_either_wire(clients: dict[str, Any]) -> None:
    wires = ["http", "grpc"] * FUNCTION_STREAK  # the streak measured over both wires, on threads
    assert [on_loop(clients, wire, "placed") for wire in wires[:FUNCTION_STREAK]] == [False] * FUNCTION_STREAK
    assert [on_loop(clients, wire, "placed") for wire in wires] == [True] * len(wires)


def test_a_def_that_says_inline_false_always_runs_on_a_thread(clients: dict[str, Any]) -> None:
    wires = ["http", "grpc"] * (2 * FUNCTION_STREAK)
    assert [on_loop(clients, wire, "kept") for wire in wires] == [False] * len(wires)
