"""Instructions per request, in-process: the figure a change to the hot path is judged by.

callgrind counts instructions, which the machine's other load does not change. Each case's request
is made `--low` and `--high` times in two processes under ``PYTHONHASHSEED=0`` (without a fixed seed
the counts move by a few percent) and ``OPENBLAS_NUM_THREADS=1`` (numpy's BLAS threads spin while they wait,
for as long as the scheduler lets them: through uvicorn the floor's count moved by 18 k between runs under
load, ours by 23 k); the difference, divided by the difference of the counts, cancels
the start-up (and the imports). The cases:

- `W1`: W1's request driven straight into the app mounted in Starlette (`inprocess.requester`: no server, no
  event loop); `floor` the floor's app, `W1cli` ours as the serve command serves it, `W1mw` mounted under a
  host's pass-through middleware, `W1fast` the same with `bypass_host_middleware=True`; each with `-server`
  through uvicorn's own httptools protocol on uvloop (the whole server's instructions but the kernel's);
- `W2s`: the same tensor as tritonclient sends it by default, binary after the JSON, its output asked back
  binary (a small W2), driven the same way;
- `G1`, `G1-floor`: G1's ModelInfer through a grpc.aio server and client in one process, ours or a bare echo;
  `G1handler`: G1's request through ours' ModelInfer handler alone, as grpcio calls it, without grpcio (the
  handler's own share of `G1`);
  `G1codec`: the same tensor in a ModelInferRequest's raw_input_contents through the gRPC codec alone (parsed,
  decoded, the identity's outputs built, encoded and serialized: what ModelInfer adds around the core);
- `W10grpc`, `W10grpc-floor`: W10's gRPC stream, per frame of one ModelStreamInfer call;
- `import-floor`, `import-ours`, `import-serve`: what a process imports before it serves (W5); `start-serve`:
  those imports and the serve command's app of a plain model built and loaded; `import-floor-server`,
  `import-floor-numpy`, `import-ours-server`: W5's two servers' imports (the floor's with and without numpy
  and msgspec); `ready-floor`, `ready-ours`: W5 in-process (`w5_ready.py`: the imports, the app built, its
  lifespan's startup and one ready answer);
- `W1s`: the same body to the sync identity, through the app on a uvloop loop (`w9_inprocess`'s
  requester), the model on the loop once measured cheaper than the hop to a worker thread (`_core/inline.py`;
  on the worker thread in trees from before that rule): what a cheap sync model's request costs;
- `W9s1`, `W9x1`, `W9o1`: W9's [1,100] request to each model file through the app on a uvloop loop,
  and `W9s1-library` etc.: that library's own call on the same array (`w9_files.library_calls`), so
  that a file's request minus its library call is what the path around it costs.
- `W11`: W11's streamed chat through `openai_app` on a uvloop loop, per chunk: one request of `--low` chunks
  and one of `--high` (the counts are chunks here, not requests); `W11vllm`, `W11usage`, `W11logprobs`: the
  same from a model of the vLLM backend's whole convention (bench/apps/_tokens.py), asked for nothing more
  (its finish_reason), for the usage (`stream_options.include_usage`: its token counts too) and for token
  logprobs (`logprobs`, `top_logprobs` 1): what usage and logprobs cost a chunk (issue 38). Each with
  `-server` (`W11-server`, `W11usage-server`, ...): the same served by uvicorn (uvloop, httptools) in the measured
  process, the client a process of its own (not counted): the server's whole cost of a chunk, its sending too.
- `W12shim`, `W12native`: W12's add_sub request (FP32 [4] twice, JSON) through the app serving its
  repository on a uvloop loop, as a `TritonPythonModel` through the Python-backend shim or as the same
  logic in our model.py form; `W12shim-call`, `W12native-call`: the model's call alone, as the core
  makes it (a list of one decoded request to the shim, keyword arrays to the function).
- `E2ensemble`, `E2calls`: W1's body through an ensemble of two trivial async models (each passes its FP32
  [1,16] on), served from a repository on a uvloop loop, against the same two calls made by a client (a
  request to the first model, then one to the second): what routing a tensor through the server costs
  against a round trip of the client's (issue 39's measure).

    python bench/instructions.py [--cases W1,W1s] [--low 1000] [--high 3000] [--bodies DIR]

`--bodies` is the harness's bodies folder with W9's files trained in it (`w9/`), for the W9 cases.
Needs valgrind on the PATH and an interpreter that imports oip_asgi (and the W9 libraries for those).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# What a process imports before it serves (W5): the floor's baseline, `import oip_asgi`, and the serve
# command's own modules; each counted once, less an interpreter that imports nothing.
UVICORN_SERVER = (
    "uvicorn.main, uvicorn.config, uvicorn.server, uvicorn.lifespan.on, uvicorn.loops.uvloop, "
    "uvicorn.protocols.http.httptools_impl, uvicorn.protocols.websockets.auto, uvloop, httptools"
)
READY = (
    "import runpy, sys; sys.argv = ['', '{server}']; "
    f"runpy.run_path({str(HERE / 'w5_ready.py')!r}, run_name='__main__')"
)
IMPORTS = {
    "import-floor": "import msgspec, numpy, starlette",
    "import-ours": "import oip_asgi",
    "import-serve": "import oip_asgi._hosts.cli.command",
    # The serve command's app for a plain model built and its models loaded: what start-up imports beyond them.
    "start-serve": "import asyncio, oip_asgi._hosts.cli.command as c, oip_asgi as o; "
    "asyncio.run(c.Served(o.oip_app({'m': lambda x: x})).app.load())",
    # W5's two servers' imports before they serve: the floor's app (Starlette) and uvicorn's modules that a
    # server on uvloop and httptools imports; the same with numpy and msgspec, which any protocol server needs;
    # and ours as W5 starts it (apps/ours_app.py: the serve command's app), its bench-only `_mlp` left out.
    "import-floor-server": f"import {UVICORN_SERVER}, starlette.applications, starlette.routing, starlette.responses",
    "import-floor-numpy": f"import {UVICORN_SERVER}, starlette.applications, starlette.routing, "
    "starlette.responses, numpy, msgspec",
    "import-ours-server": f"import {UVICORN_SERVER}, oip_asgi, oip_asgi._hosts.cli.served",
    # W5 in-process: those imports, the app built, its lifespan's startup and one ready answer (w5_ready.py).
    "ready-floor": READY.format(server="floor"),
    "ready-ours": READY.format(server="ours"),
}
# W1's request to each app, in-process and (`-server`) through uvicorn's protocol: the floor's, ours as the
# serve command serves it, mounted in Starlette, mounted under a host's middleware, and in front of it.
W1_APPS = ("floor", "W1", "W1cli", "W1mw", "W1fast", "W1s", "W1scli")
# G1's ModelInfer through a grpc.aio server and client in this process: the floor's echo, ours; their
# difference is ours' handler (the client and grpcio's own share are alike in both); `G1codec`: ModelInfer's
# codec alone around the identity, no grpcio.
G1_CASES = ("G1-floor", "G1", "G1handler", "G1codec")
# W10's gRPC stream: one ModelStreamInfer call of `count` frames (tokens), the floor's prepared messages or ours.
W10_CASES = ("W10grpc-floor", "W10grpc")
CASES = (*W1_APPS, *(f"{app}-server" for app in W1_APPS), *IMPORTS, *G1_CASES, *W10_CASES, "W2s",
         *(f"W9{kind}1{library}" for kind in "sxo" for library in ("", "-library")),
         *(f"W11{kind}{server}" for kind in ("", "vllm", "usage", "logprobs") for server in ("", "-server")),
         *(f"W12{server}{call}" for server in ("shim", "native") for call in ("", "-call")),
         "E2ensemble", "E2calls")  # fmt: skip


class Passthrough:
    """A host's middleware that does nothing: what any pure-ASGI middleware costs at the least."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def w1_app(case: str, body: bytes) -> tuple[Any, str]:
    """The app a W1 case drives, and the path it posts to."""
    import floor_app
    import ours_app
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    import oip_asgi

    if case == "floor":
        return floor_app.build(body), "/v2/models/fixed/infer"
    sync = case.startswith("W1s")
    name = "identity_sync" if sync else "identity"
    models = {name: ours_app.identity_sync if sync else ours_app.identity}
    path = f"/v2/models/{name}/infer"
    kind = case.removeprefix("W1s" if sync else "W1")
    if kind == "cli":
        from oip_asgi._hosts.cli.served import Served

        return Served(oip_asgi.oip_app(models)), path
    app = Starlette(middleware=[Middleware(Passthrough)] if kind in ("mw", "fast") else [])
    if kind == "fast":
        oip_asgi.mount(app, models, path="/v2", bypass_host_middleware=True)
    else:
        oip_asgi.mount(app, models, path="/v2")
    return app, path


def run(case: str, count: int, bodies: Path | None) -> None:
    sys.path[:0] = [str(HERE), str(HERE / "apps")]
    import numpy as np
    from starlette.applications import Starlette
    from workloads.http_bodies import SEED, W9_KINDS, json_request

    import oip_asgi

    if case.startswith(("W1s", "W12native")):
        with contextlib.suppress(ImportError):  # (a tree from before the rule)
            from oip_asgi._core import inline

            # These cases' plain `def`s run natively in 0.3-1.3 µs, on the loop (10 calls in 20,000 over the
            # 30 µs budget, on this loaded machine); callgrind stretches their wall time 60-100x and its garbage
            # collections and thread switches more (4-8 ms pauses every 30-100 calls), which would put them on
            # threads: the budget is put out of their reach, so that the counts are of the placement a server
            # at full speed makes. (The W9 files are left to the budget, as before.)
            inline.BUDGET_NS = 10**15
    body = json_request("INPUT0", np.random.default_rng(SEED).standard_normal((1, 16)).astype(np.float32))
    if case == "W2s":  # W1's tensor in binary, mounted in Starlette
        from harness.inprocess import requester
        from inprocess import identity

        app = Starlette()
        oip_asgi.mount(app, {"identity": identity}, path="/v2")
        body, header_length = binary_request()
        request = requester(app, "/v2/models/identity/infer", body, header_length)
        for _ in range(count):
            request()
        return
    if case == "G1codec":
        grpc_codec(count)
        return
    import ours_app
    import uvloop
    from harness.inprocess import app_requester, requester, server_requester

    loop = uvloop.new_event_loop()
    if case.startswith("E2"):
        ensemble(loop, case == "E2calls", body, count)
        return
    app_case, server, _ = case.partition("-server")
    if app_case in W1_APPS:
        app, path = w1_app(app_case, body)
        if server or app_case.startswith("W1s"):  # on the loop (a sync model's worker thread, uvicorn)
            (server_requester if server else app_requester)(loop, app, path, body)(count)
        else:  # driven with no loop at all: the app's own work
            request = requester(app, path, body)
            for _ in range(count):
                request()
        return
    if case == "G1handler":
        loop.run_until_complete(g1_handler(count))
        return
    if case in G1_CASES:
        loop.run_until_complete(g1(case, count))
        return
    if case in W10_CASES:
        loop.run_until_complete(w10_stream(case, count))
        return
    if case.startswith("W11"):
        w11(loop, case, count)
        return
    if case.startswith("W12"):
        server, _, call = case[3:].partition("-")
        (w12_calls if call else w12)(loop, server, count)
        return
    assert bodies is not None, "the W9 cases need --bodies"
    key, _, library = case.partition("-")
    kind = W9_KINDS[key[2]][0]
    if library:
        import w9_files

        x = np.load(bodies / "w9" / "requests.npz")["x1"]
        call = w9_files.library_calls(bodies / "w9")[kind]
        for _ in range(count):
            call(x)
        return
    models = ours_app.file_models(bodies / "w9")
    app = Starlette()
    served = oip_asgi.mount(app, {f"w9_{kind}": models[f"w9_{kind}"]}, path="/v2")
    loop.run_until_complete(served.load())  # as a server's start-up does
    app_requester(loop, app, f"/v2/models/w9_{kind}/infer", (bodies / f"{key.lower()}.json").read_bytes())(count)


async def g1(case: str, count: int) -> None:
    """`count` G1 calls one after another, over a grpc.aio channel to a grpc.aio server in this process."""
    import grpc
    from loadgen.grpc_unary import INFER, make_request

    import oip_asgi
    from oip_asgi.grpc import InferenceService

    if case == "G1-floor":

        async def echo(body: bytes, context: Any) -> bytes:
            return body

        methods = {"ModelInfer": grpc.unary_unary_rpc_method_handler(echo)}
        handler = grpc.method_handlers_generic_handler("inference.GRPCInferenceService", methods)
    else:
        import ours_app

        handler = InferenceService(oip_asgi.oip_app({"identity": ours_app.identity})).handler()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    body = make_request(16, 0).SerializeToString()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(INFER)
        for _ in range(count):
            await call(body)
    await server.stop(None)


def g1_handler_call() -> Any:
    """G1's request through ours' ModelInfer handler, called as grpcio calls it (body and context): a coroutine
    function of no arguments."""
    import ours_app
    from loadgen.grpc_unary import make_request

    import oip_asgi
    from oip_asgi.grpc import InferenceService

    service = InferenceService(oip_asgi.oip_app({"identity": ours_app.identity}))
    handler = service.handler().service(_Details("/inference.GRPCInferenceService/ModelInfer"))
    assert handler is not None and handler.unary_unary is not None
    call, body, context = handler.unary_unary, make_request(16, 0).SerializeToString(), _Context()
    return lambda: call(body, context)


async def g1_handler(count: int) -> None:
    """`count` G1 requests through ours' ModelInfer handler alone (`g1_handler_call`)."""
    call = g1_handler_call()
    for _ in range(count):
        await call()


class _Details:
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


class _Context:
    """The little of grpcio's servicer context a successful call reads."""

    def invocation_metadata(self) -> tuple[()]:
        return ()


async def w10_stream(case: str, count: int) -> None:
    """One ModelStreamInfer call of `count` frames over a grpc.aio channel to a grpc.aio server in this process."""
    import grpc
    from loadgen.streams import grpc_body

    import oip_asgi
    from oip_asgi.grpc import InferenceService

    if case == "W10grpc-floor":
        import floor_w10_app

        handler = floor_w10_app.grpc_handler()
    else:
        from _tokens import MODEL, tokens_model

        app = oip_asgi.oip_app({MODEL: tokens_model("max_tokens", lambda count: int(count[0]))})
        handler = InferenceService(app).handler()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")(iter([grpc_body(count)]))
        frames = 0
        async for _ in call:
            frames += 1
            if frames == count:
                break
        call.cancel()
    await server.stop(None)


# The `-server` cases' client: one streamed chat, read whole, then the server is told to stop (SIGINT).
W11_CLIENT = """
import http.client, os, signal, sys, time
port, body, server = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
while True:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
        connection.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        break
    except OSError:
        time.sleep(0.2)
assert response.status == 200 and data.endswith(b"data: [DONE]\\n\\n"), data[-200:]
os.kill(server, signal.SIGINT)
"""


def w11(loop: Any, case: str, chunks: int) -> None:
    """One streamed chat of `chunks` one-token chunks through `openai_app`, from W11's model or the vLLM one;
    `-server`: through uvicorn, from a client process."""
    import json

    from _tokens import vllm_tokens_model
    from harness.inprocess import app_requester

    import oip_asgi

    case, _, server = case.partition("-")
    if case == "W11":
        model = __import__("_tokens").tokens_model(
            "sampling_parameters", lambda parameters: int(json.loads(parameters[0]).get("max_tokens", 16))
        )
    else:
        model = vllm_tokens_model()
    asked: dict[str, Any] = {
        "W11usage": {"stream_options": {"include_usage": True}},
        "W11logprobs": {"logprobs": True, "top_logprobs": 1},
    }.get(case, {})
    body = {"model": "tokens", "messages": [{"role": "user", "content": "x"}], "stream": True, "max_tokens": chunks}
    sent = json.dumps({**body, **asked})
    v2 = oip_asgi.oip_app({"tokens": model})
    if not server:
        app_requester(loop, oip_asgi.openai_app(v2), "/chat/completions", sent.encode())(1)
        return
    import socket

    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = subprocess.Popen([sys.executable, "-c", W11_CLIENT, str(port), sent, str(os.getpid())])
    app = Starlette(routes=[Mount("/v2", v2), Mount("/v1", oip_asgi.openai_app(v2))])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, loop="uvloop", http="httptools", log_level="warning")
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises the client's SIGINT again once it has stopped
        uvicorn.Server(config).run()
    assert client.wait() == 0, "the client did not read the whole answer"


def binary_request() -> tuple[bytes, int]:
    """W1's tensor as tritonclient sends it by default: binary after the JSON, its output asked for binary."""
    import json

    import numpy as np
    from workloads.http_bodies import SEED

    tensor = np.random.default_rng(SEED).standard_normal((1, 16)).astype(np.float32)
    header = {
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "parameters": {"binary_data_size": 64}}],
        "outputs": [{"name": "INPUT0", "parameters": {"binary_data": True}}],
    }
    head = json.dumps(header).encode()
    return head + tensor.tobytes(), len(head)


def grpc_codec(count: int) -> None:
    """ModelInfer's codec around the identity: the request parsed and decoded, the reply encoded and serialized."""
    import numpy as np
    from workloads.http_bodies import SEED

    import oip_asgi
    from oip_asgi._core.inference import model_outputs
    from oip_asgi._core.responding import Reply
    from oip_asgi.grpc import _codec
    from oip_asgi.grpc import inference_pb2 as pb

    tensor = np.random.default_rng(SEED).standard_normal((1, 16)).astype(np.float32)
    message = pb.ModelInferRequest(model_name="identity")
    message.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    message.raw_input_contents.append(tensor.tobytes())
    body = message.SerializeToString()
    model = oip_asgi.oip_app({"identity": lambda INPUT0: {"INPUT0": INPUT0}}).core.served.get("identity")
    for _ in range(count):
        request, raw = _codec.parse_request(body)
        decoded, typed = _codec.decode_request(request, model, raw)
        outputs, parameters = model_outputs(model, decoded, {"INPUT0": decoded.inputs["INPUT0"]})
        _codec.serialize(*_codec.encode_response(Reply(model, decoded, outputs, parameters), parameters, typed))


def w12(loop: Any, server: str, count: int) -> None:
    """W12's add_sub request through the app serving its repository: as a `TritonPythonModel` or native."""
    import json

    from harness.inprocess import app_requester
    from workloads import w12

    import oip_asgi

    root = Path(tempfile.mkdtemp())
    app = oip_asgi.oip_app(model_repository=w12.repositories(root)[server])
    loop.run_until_complete(app.load())  # as a server's start-up does
    data = [1.0, 2.0, 3.0, 4.0]
    inputs = [{"name": name, "datatype": "FP32", "shape": [4], "data": data} for name in ("INPUT0", "INPUT1")]
    body = json.dumps({"inputs": inputs}).encode()
    app_requester(loop, app, "/models/add_sub/infer", body)(count)
    shutil.rmtree(root)


def ensemble(loop: Any, calls: bool, body: bytes, count: int) -> None:
    """W1's body through the ensemble `both` of two trivial models, or to each of them in turn (`calls`)."""
    from ensemble_cost import ENSEMBLE
    from harness.inprocess import app_requester, exchange

    import oip_asgi

    async def passed_on(INPUT0: Any) -> dict[str, Any]:
        return {"OUTPUT0": INPUT0}

    tensor = [oip_asgi.TensorSpec("INPUT0", "FP32", [-1, 16])], [oip_asgi.TensorSpec("OUTPUT0", "FP32", [-1, 16])]
    models = {name: oip_asgi.Model(passed_on, inputs=tensor[0], outputs=tensor[1]) for name in ("first", "second")}
    root = Path(tempfile.mkdtemp())
    (root / "both" / "1").mkdir(parents=True)
    (root / "both" / "config.pbtxt").write_text(ENSEMBLE)
    app = oip_asgi.oip_app(models, model_repository=root)
    loop.run_until_complete(app.load())  # as a server's start-up does
    if calls:
        (first, *one), (second, *other) = (exchange(f"/models/{name}/infer", body) for name in ("first", "second"))

        async def pairs() -> None:  # on one loop run, as app_requester's requests
            for _ in range(count):
                await app(dict(first), *one[:2])
                await app(dict(second), *other[:2])

        loop.run_until_complete(pairs())
        if set(one[2]) | set(other[2]) != {200}:
            raise RuntimeError(f"the calls answered {sorted(set(one[2]) | set(other[2]))}")
    else:
        app_requester(loop, app, "/models/both/infer", body)(count)
    shutil.rmtree(root)


def w12_calls(loop: Any, server: str, count: int) -> None:
    """W12's add_sub model called as the core calls it, with no app around it: the shim's own cost is
    `W12shim-call` minus `W12native-call` (the same arithmetic as a plain function)."""
    import numpy as np
    from workloads import w12

    from oip_asgi._core.request import DecodedRequest
    from oip_asgi._declarations.repository import read_model

    root = Path(tempfile.mkdtemp())
    model = read_model(w12.repositories(root)[server], "add_sub").versions[0]
    if model.load is not None:
        model.load()
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    predict: Any = model.predict
    if server == "shim":
        requests = [DecodedRequest({"INPUT0": a, "INPUT1": a})]
        for _ in range(count):
            predict(requests)
    else:
        for _ in range(count):
            predict(INPUT0=a, INPUT1=a)
    shutil.rmtree(root)


def instructions(case: str, count: int, bodies: Path | None, statement: str | None = None) -> int:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        # Without address randomisation: objects hashed by their address collide alike in every run.
        fixed = ["setarch", platform.machine(), "--addr-no-randomize"] if shutil.which("setarch") else []
        measured = [sys.executable, __file__, "--cases", case, "--run", str(count)]
        environ = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
        if statement is not None:  # an import: the statement alone, in a fresh interpreter (its bytecode cached)
            measured = [sys.executable, "-c", statement]
            environ.pop("PYTHONDONTWRITEBYTECODE", None)  # else every run compiles the modules it imports
            subprocess.run(measured, check=True, env=environ)
        if bodies is not None and statement is None:
            measured += ["--bodies", str(bodies)]
        subprocess.run(
            [*fixed, "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *measured],
            check=True,
            env=environ,
            capture_output=True,
        )
        totals = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        assert totals is not None, "callgrind wrote no totals"
        return int(totals.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="W1", help=f"comma-separated: {', '.join(CASES)}")
    parser.add_argument("--low", type=int, default=1000)
    parser.add_argument("--high", type=int, default=3000)
    parser.add_argument("--bodies", type=Path, help="the harness's bodies folder, with w9/ (the W9 cases)")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # the measured process
    args = parser.parse_args()
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    if args.run is not None:
        run(cases[0], args.run, args.bodies)
        return
    for case in cases:
        if case in IMPORTS:
            empty = instructions(case, 0, None, "pass")
            count = instructions(case, 0, None, IMPORTS[case]) - empty
            print(f"{case} ({IMPORTS[case]}): {count / 1e6:.1f} M instructions")
            continue
        low, high = instructions(case, args.low, args.bodies), instructions(case, args.high, args.bodies)
        unit = "chunk" if case.startswith("W11") else "request"
        where = "served by uvicorn" if case.endswith("-server") else "in-process"
        print(f"{case} {where}: {(high - low) / (args.high - args.low) / 1000:.1f} k instructions per {unit}")


if __name__ == "__main__":
    main()
