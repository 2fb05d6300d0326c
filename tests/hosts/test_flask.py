"""Flask: the extension through Flask's test client, waitress and werkzeug's server as real peers."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("flask")
pytest.importorskip("a2wsgi")

from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import make_server

from examples import flask_app
from oip_asgi import Model, OIPApp, TensorSpec, oip_app
from oip_asgi_flask import OIP
from tests.support.servers import ROOT, chunked_infer, free_port, serving, triton_round_trip
from tests.support.waiting import HANG

SIMPLE = {
    "inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [5] * 16},
    ]
}


@pytest.fixture
def client() -> FlaskClient:
    return flask_app.app.test_client()


def spy_model(calls: list[np.ndarray], loads: list[str] | None = None) -> Model:
    def predict(X: np.ndarray) -> np.ndarray:
        calls.append(X)
        return X

    load = (lambda: loads.append("loaded")) if loads is not None else None
    return Model(predict, inputs=[TensorSpec("X", "FP32", [-1])], outputs=[TensorSpec("Y", "FP32", [-1])], load=load)


def test_flask_keeps_its_routes(client: FlaskClient) -> None:
    assert client.get("/").text.startswith("Flask serves this page")
    assert client.get("/v2x").status_code == 404


def test_the_protocol_under_the_prefix(client: FlaskClient) -> None:
    response = client.get("/v2")  # the exact prefix, no redirect
    assert response.status_code == 200
    assert response.json is not None and response.json["name"] == "oip-asgi"
    assert client.get("/v2/health/live").json == {"live": True}

    response = client.post("/v2/models/simple/infer", json=SIMPLE)
    assert response.status_code == 200
    assert response.json is not None
    assert response.json["outputs"][0]["data"] == [value + 5 for value in range(16)]

    a = np.arange(16, dtype=np.int32)
    header = json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
                {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
            ],
            "outputs": [{"name": "OUTPUT1", "parameters": {"binary_data": True}}],
        }
    ).encode()
    response = client.post(
        "/v2/models/simple/infer",
        data=header + a.tobytes() + a.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"},
    )
    assert response.status_code == 200
    assert response.content_type == "application/octet-stream"
    length = int(response.headers["Inference-Header-Content-Length"])
    np.testing.assert_array_equal(np.frombuffer(response.data[length:], np.int32), np.zeros(16))

    response = client.get("/v2/models/nope")
    assert response.status_code == 404
    assert response.json is not None and "nope" in response.json["error"]


def test_chunked_body_without_length_is_a_411_and_never_reaches_the_model() -> None:
    calls: list[np.ndarray] = []
    app = Flask(__name__)
    OIP(app, models={"spy": spy_model(calls)})
    body = json.dumps({"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [1]}]}).encode()
    client = app.test_client()
    # What gunicorn or werkzeug's server hand on for a chunked upload: no Content-Length (the test
    # client would compute one from the body).
    response = client.post(
        "/v2/models/spy/infer",
        data=body,
        headers={"Transfer-Encoding": "chunked"},
        environ_overrides={"CONTENT_LENGTH": "", "wsgi.input_terminated": True},
    )
    assert response.status_code == 411
    assert response.json is not None and "Content-Length" in response.json["error"]
    assert calls == []

    assert client.post("/v2/models/spy/infer", data=body).status_code == 200
    assert len(calls) == 1


def test_init_app_gives_each_app_its_own_oip_app_in_extensions() -> None:
    loads: list[str] = []
    extension = OIP(models={"m": spy_model([], loads)}, prefix="/oip")
    first, second = Flask("first"), Flask("second")
    extension.init_app(first)
    extension.init_app(second)
    assert isinstance(first.extensions["oip_asgi"], OIPApp)
    assert first.extensions["oip_asgi"] is not second.extensions["oip_asgi"]
    # Preloaded in init_app: the declaration is shared, but each app serves it, and loads it, itself.
    assert loads == ["loaded", "loaded"]
    assert first.test_client().get("/oip/models/m/ready").json == {"name": "m", "ready": True}
    assert first.test_client().get("/v2/models/m").status_code == 404  # Flask's own 404


def test_models_load_lazily_without_preload() -> None:
    loads: list[str] = []
    app = Flask(__name__)
    OIP(app, models={"m": spy_model([], loads)}, preload=False)
    assert loads == []
    client = app.test_client()
    # The first probe answers at once and starts loading on the bridge's event loop.
    answers = [client.get("/v2/health/ready").json]
    deadline = time.monotonic() + HANG
    while answers[-1] != {"ready": True} and time.monotonic() < deadline:
        time.sleep(0.01)
        answers.append(client.get("/v2/health/ready").json)
    assert answers[-1] == {"ready": True} and set(map(str, answers)) <= {"{'ready': False}", "{'ready': True}"}
    assert loads == ["loaded"]


def test_an_existing_oip_app_is_served_and_the_prefix_checked() -> None:
    served = oip_app({"m": spy_model([])}, name="mine")
    app = Flask(__name__)
    OIP(app, models=served)
    assert app.extensions["oip_asgi"] is served
    assert app.test_client().get("/v2").json == {"name": "mine", **app.test_client().get("/v2").json}
    with pytest.raises(ValueError, match="prefix"):
        OIP(models=served, prefix="/v2/")


FORK_CHILD = """
import os, signal, sys, wsgiref.util
from oip_asgi import oip_app
from oip_asgi_wsgi import WSGIBridge

bridge = WSGIBridge(oip_app({"m": lambda X: X}))

def live():
    environ = {"PATH_INFO": "/health/live"}
    wsgiref.util.setup_testing_defaults(environ)
    status = []
    body = b"".join(bridge(environ, lambda s, h, e=None: status.append(s)))
    return status[0], body

assert live()[0].startswith("200")
pid = os.fork()
if pid == 0:
    signal.alarm(20)  # without a loop thread of its own, the child would wait forever
    status, body = live()
    os._exit(0 if status.startswith("200") and b"true" in body else 3)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
@pytest.mark.slow
def test_a_forked_worker_gets_its_own_event_loop_thread() -> None:
    env_path = f"{ROOT}:{ROOT / 'adapters'}"
    result = subprocess.run(
        [sys.executable, "-c", FORK_CHILD], env={"PYTHONPATH": env_path}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


@pytest.mark.slow
def test_waitress_with_tritonclient_and_a_chunked_upload() -> None:
    port = free_port()
    argv = ["-m", "waitress", "--listen", f"127.0.0.1:{port}", "examples.flask_app:app"]
    with serving(argv, port) as server:
        triton_round_trip(server.address)
        # waitress buffers a chunked body and sets CONTENT_LENGTH: it just works.
        status, body = chunked_infer(server.address, SIMPLE)
        assert status == 200, body
        assert json.loads(body)["outputs"][0]["data"] == [value + 5 for value in range(16)]


@pytest.fixture
def werkzeug_server() -> Iterator[str]:
    server = make_server("127.0.0.1", 0, flask_app.app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_werkzeug_server_chunked_upload_is_a_clear_411(werkzeug_server: str) -> None:
    status, body = chunked_infer(werkzeug_server, SIMPLE)
    assert status == 411
    assert "waitress" in json.loads(body)["error"]
    triton_round_trip(werkzeug_server)  # with a Content-Length, the same server works
