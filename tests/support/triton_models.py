"""Triton Python models that do what Triton's own test models for its Python backend do (its server
repository's ``qa/python_models/`` and ``qa/L0_backend_python/``, r24.10), written anew: helpers beside
model.py, decoupled async executes that overlap, BLS from an async execute and from initialize, a batched
decoupled model, response senders in a model that is not decoupled, cancellation, Triton's gRPC error
mode and its reserved parameters. `write_repository` lays them out as Triton lays a repository out; the
in-process tests (tests/python_backend/test_as_triton_runs_them.py) and the end-to-end ones
(tests/e2e/test_python_backend_triton_e2e.py) serve the same files.

The models decide on events, never on time: each waits for what it needs (the other requests in flight, a
file the test writes) and gives up, with an error that says what did not happen, after `HANG` seconds.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

HANG = 60  # seconds: only a server that is stuck takes this long (tests/support/waiting.py)
HEADER = "import asyncio, json, threading, time\nimport numpy as np\nimport triton_python_backend_utils as pb_utils\n"
KEY_IO = """
input [{ name: "ROUND", data_type: TYPE_INT32, dims: [1] }, { name: "KEY", data_type: TYPE_INT32, dims: [1] }]
output [{ name: "KEY", data_type: TYPE_INT32, dims: [1] }]
"""


def _model(body: str) -> str:
    return HEADER + f"HANG = {HANG}\nFINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL\n" + textwrap.dedent(body)


# name: (config.pbtxt, {path under the model's folder: source}); model.py goes in version 1.
MODELS: dict[str, tuple[str, dict[str, str]]] = {}

# -- helpers beside model.py (Triton's qa/python_models/multi_file, and two models with a model_common each) ------

_IMPORTS = """
import model_common  # beside model.py
import shared  # in the model's folder, beside config.pbtxt
from file1 import FILE

from . import file2  # model.py imported as part of a package


class TritonPythonModel:
    def execute(self, requests):
        import model_common as again  # an import inside execute finds the same module

        text = f"{model_common.NAME}:{again.NAME}:{FILE}:{file2.FILE}:{shared.WHERE}"
        out = np.array([text.encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]) for _ in requests]
"""
for _name in ("imports_a", "imports_b"):
    MODELS[_name] = (
        'backend: "python"\ninput [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
        'output [{ name: "OUT", data_type: TYPE_STRING, dims: [1] }]\n',
        {
            "1/model.py": _model(_IMPORTS),
            "1/model_common.py": f"NAME = {_name[-1]!r}\n",
            "1/file1.py": "FILE = 'file1'\n",
            "1/file2.py": "FILE = 'file2'\n",
            "shared.py": f"WHERE = 'the folder of {_name}'\n",
        },
    )

# -- a decoupled async model whose executes overlap: four in flight, answered last first ----------------------------

MODELS["overlap"] = (
    'backend: "python"\nmodel_transaction_policy { decoupled: true }\n' + KEY_IO,
    {
        "1/model.py": _model("""
        class TritonPythonModel:
            def initialize(self, args):
                self.rounds = {}  # round: [executes entered, responses sent]

            async def execute(self, requests):
                request = requests[0]
                round_ = int(pb_utils.get_input_tensor_by_name(request, "ROUND").as_numpy()[0])
                key = int(pb_utils.get_input_tensor_by_name(request, "KEY").as_numpy()[0])
                counts = self.rounds.setdefault(round_, [0, 0])
                counts[0] += 1
                sender = request.get_response_sender()
                deadline = time.monotonic() + HANG
                # All four are in flight before any answers (run one at a time, the first would wait here alone),
                # then each answers once those after it have: the last first.
                while counts[0] < 4 or counts[1] != 3 - key:
                    if time.monotonic() > deadline:
                        error = pb_utils.TritonError(f"round {round_}: {counts[0]} executes in flight, not 4")
                        sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)
                        return None
                    await asyncio.sleep(0.001)
                counts[1] += 1
                out = pb_utils.Tensor("KEY", np.array([key], np.int32))
                sender.send(pb_utils.InferenceResponse([out]), flags=FINAL)
                return None
        """)
    },
)

# -- BLS: sync exec() and exec(decoupled=True) from an async execute; async_exec(decoupled=True) with next() --------

MODELS["double"] = (
    'backend: "python"\ninput [{ name: "X", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "Y", data_type: TYPE_INT32, dims: [1] }]\n',
    {
        "1/model.py": _model("""
        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X")
                                                                    .as_numpy() * 2)]) for r in requests]
        """)
    },
)
MODELS["count"] = (  # decoupled: N responses 1..N for IN = [N]
    'backend: "python"\nmodel_transaction_policy { decoupled: true }\n'
    'input [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n',
    {
        "1/model.py": _model("""
        class TritonPythonModel:
            def execute(self, requests):
                for request in requests:
                    sender = request.get_response_sender()
                    for value in range(1, int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0]) + 1):
                        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))]))
                    sender.send(flags=FINAL)
                return None
        """)
    },
)
MODELS["count_final"] = (  # decoupled: N responses 1..N for IN = [N], the last sent with the FINAL flag
    'backend: "python"\nmodel_transaction_policy { decoupled: true }\n'
    'input [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n',
    {
        "1/model.py": _model("""
        class TritonPythonModel:
            def execute(self, requests):
                for request in requests:
                    sender = request.get_response_sender()
                    n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
                    for value in range(1, n + 1):
                        out = pb_utils.Tensor("OUT", np.array([value], np.int32))
                        sender.send(pb_utils.InferenceResponse([out]), flags=FINAL if value == n else 0)
                return None
        """)
    },
)
MODELS["bls_from_async"] = (
    'backend: "python"\ninput [{ name: "X", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "DOUBLED", data_type: TYPE_INT32, dims: [1] },'
    ' { name: "COUNTED", data_type: TYPE_INT32, dims: [-1] }, { name: "NEXT", data_type: TYPE_INT32, dims: [-1] },'
    ' { name: "SIZES", data_type: TYPE_INT32, dims: [2] }]\n',
    {
        "1/model.py": _model("""
        def _values(response):
            tensor = pb_utils.get_output_tensor_by_name(response, "OUT")
            return [] if tensor is None else tensor.as_numpy().tolist()


        class TritonPythonModel:
            async def execute(self, requests):
                out = []
                for request in requests:
                    x = pb_utils.get_input_tensor_by_name(request, "X")
                    # Sync BLS from an async execute: it blocks this instance's loop (as Triton's), not the server's.
                    doubled = pb_utils.InferenceRequest(model_name="double", requested_output_names=["Y"],
                                                        inputs=[pb_utils.Tensor("X", x.as_numpy())]).exec()
                    if doubled.has_error():
                        raise pb_utils.TritonModelException(doubled.error().message())
                    n = pb_utils.Tensor("IN", x.as_numpy())
                    counted = [v for r in pb_utils.InferenceRequest(model_name="count", inputs=[n],
                               requested_output_names=["OUT"]).exec(decoupled=True) for v in _values(r)]
                    streamed = await pb_utils.InferenceRequest(model_name="count", inputs=[n],
                                                               requested_output_names=["OUT"]).async_exec(decoupled=True)
                    first = next(streamed)  # an iterator: next() and for take it, each response as it comes
                    rest = [v for r in streamed for v in _values(r)]
                    # As Triton's iterator: an empty last response only where the final flag came alone.
                    sizes = [len(list(pb_utils.InferenceRequest(model_name=name, inputs=[n], requested_output_names=[
                             "OUT"]).exec(decoupled=True))) for name in ("count", "count_final")]
                    out.append(pb_utils.InferenceResponse([
                        pb_utils.Tensor("DOUBLED", pb_utils.get_output_tensor_by_name(doubled, "Y").as_numpy()),
                        pb_utils.Tensor("COUNTED", np.array(counted, np.int32)),
                        pb_utils.Tensor("NEXT", np.array(_values(first) + rest, np.int32)),
                        pb_utils.Tensor("SIZES", np.array(sizes, np.int32)),
                    ]))
                return out
        """)
    },
)
MODELS["bls_in_initialize"] = (  # Triton's qa/python_models/bls_init_error: its load fails
    'backend: "python"\noutput [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n',
    {
        "1/model.py": _model("""
        class TritonPythonModel:
            def initialize(self, args):
                pb_utils.InferenceRequest(model_name="count", inputs=[pb_utils.Tensor("IN", np.array([1], np.int32))],
                                          requested_output_names=["OUT"]).exec(decoupled=True)

            def execute(self, requests):
                return None
        """)
    },
)

# -- a decoupled model that batches: two requests in one execute, one of them failed through its sender -----------

MODELS["batched_decoupled"] = (
    # The batch runs once it holds 2 rows; its delay is far beyond any test.
    'backend: "python"\nmax_batch_size: 2\ndynamic_batching { max_queue_delay_microseconds: 600000000 }\n'
    "model_transaction_policy { decoupled: true }\n"
    'input [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "OUT", data_type: TYPE_INT32, dims: [2] }]\n',
    {
        "1/model.py": _model("""
        class TritonPythonModel:
            def execute(self, requests):
                for request in requests:
                    key = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0][0])
                    sender = request.get_response_sender()
                    if key < 0:  # this request only fails
                        error = pb_utils.TritonError(f"key {key} refused", pb_utils.TritonError.INVALID_ARG)
                        sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)
                        continue
                    out = np.array([[key, len(requests)]], np.int32)  # and how many requests its execute took
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]),
                                flags=FINAL)
                return None
        """)
    },
)

# -- a model that is not decoupled, answering through its response sender (Triton 24.06 on) ------------------------

_SENDER_IO = (
    'input [{ name: "HOW", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n'
)
_SENDER = """
import os

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def response(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


def waited(ready):
    deadline = time.monotonic() + HANG
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.001)


class TritonPythonModel:
    def initialize(self, args):
        self.folder = args["model_repository"]
        self.background = set()

    def later(self, send, ready):
        # Once ready() (after execute returned): from a thread (a sync execute) or a task on the instance's
        # loop (an async one).
        if not ASYNC:
            threading.Thread(target=lambda: (waited(ready), send()), daemon=True).start()
            return

        async def task():
            deadline = time.monotonic() + HANG
            while not ready() and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
            send()

        running = asyncio.get_running_loop().create_task(task())
        self.background.add(running)
        running.add_done_callback(self.background.discard)

    def answer(self, request, returned):
        # HOW: the case in its last digit, a tag for the files of this request in the others.
        how = int(pb_utils.get_input_tensor_by_name(request, "HOW").as_numpy()[0])
        case, tag = how % 10, how // 10
        sender = request.get_response_sender()
        if case == 1:  # sent, FINAL with it, before execute returns
            sender.send(response(how), flags=FINAL)
        elif case == 2:  # sent after execute returned, then FINAL on its own
            self.later(lambda: (sender.send(response(how)), sender.send(flags=FINAL)), returned.is_set)
        elif case == 3:  # sent, and returned too: the client gets the one sent first
            sender.send(response(how), flags=FINAL)
            return response(-how)
        elif case == 4:  # returned, then (once the test has its answer) sent: the send raises
            def refused():
                try:
                    sender.send(response(-how), flags=FINAL)
                    message = "sent"
                except pb_utils.TritonModelException as exc:
                    message = str(exc)
                with open(f"{self.folder}/refused.{tag}", "w") as file:
                    file.write(message)

            self.later(refused, lambda: os.path.exists(f"{self.folder}/go.{tag}"))
            return response(how)
        elif case == 5:  # FINAL before any response: Triton raises, and so the request fails
            sender.send(flags=FINAL)
        return None

    def respond(self, requests):
        returned = threading.Event()
        answers = [self.answer(request, returned) for request in requests]
        returned.set()  # (the answers sent later wait for it)
        return None if answers == [None] * len(requests) else answers
"""
_RESPOND = "        return self.respond(requests)\n"
MODELS["sender"] = (
    'backend: "python"\n' + _SENDER_IO,
    {
        "1/model.py": _model(
            "ASYNC = False\n" + _SENDER + "\n    def execute(self, requests):\n        return self.respond(requests)\n"
        )
    },
)
MODELS["sender_async"] = (
    'backend: "python"\n' + _SENDER_IO,
    {
        "1/model.py": _model(
            "ASYNC = True\n"
            + _SENDER
            + "\n    async def execute(self, requests):\n        return self.respond(requests)\n"
        )
    },
)

# -- is_cancelled() on a request that is not decoupled -----------------------------------------------------------

_WAITS = """
class TritonPythonModel:
    def initialize(self, args):
        self.folder = args["model_repository"]

    {kind}def execute(self, requests):
        request = requests[0]
        key = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
        open(f"{{self.folder}}/running.{{key}}", "w").close()
        deadline = time.monotonic() + HANG
        while not request.is_cancelled():
            if time.monotonic() > deadline:
                return [pb_utils.InferenceResponse(error=pb_utils.TritonError("never cancelled"))]
            {sleep}
        with open(f"{{self.folder}}/cancelled.{{key}}", "w") as file:
            file.write("cancelled")
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED))]
"""
_WAITS_IO = (
    'backend: "python"\ninput [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n'
)
MODELS["waits"] = (_WAITS_IO, {"1/model.py": _model(_WAITS.format(kind="", sleep="time.sleep(0.01)"))})
MODELS["waits_async"] = (
    _WAITS_IO,
    {"1/model.py": _model(_WAITS.format(kind="async ", sleep="await asyncio.sleep(0.01)"))},
)

# -- Triton's qa/python_models/execute_grpc_error: every second request fails -----------------------------------

MODELS["every_second_fails"] = (
    'backend: "python"\ninput [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n',
    {
        "1/model.py": _model("""
        class TritonPythonModel:
            def execute(self, requests):
                out = []
                for request in requests:
                    value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                    if value[0] % 2:
                        out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"{value[0]} is odd")))
                    else:
                        out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", value)]))
                return out
        """)
    },
)

# -- what a request's parameters show the model: Triton's reserved ones taken out ---------------------------------

MODELS["parameters"] = (
    'backend: "python"\ninput [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "SEEN", data_type: TYPE_STRING, dims: [1] }]\n',
    {
        "1/model.py": _model("""
        class TritonPythonModel:
            def execute(self, requests):
                out = []
                for request in requests:
                    seen = {"parameters": json.loads(request.parameters()), "correlation_id": request.correlation_id(),
                            "flags": request.flags(), "timeout": request.timeout()}
                    text = np.array([json.dumps(seen).encode()], dtype=np.object_)
                    out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]))
                return out
        """)
    },
)

# -- the generate extension: a key of "parameters" that names an input is that input ------------------------------

MODELS["generates"] = (
    'backend: "python"\nmodel_transaction_policy { decoupled: true }\n'
    'input [{ name: "text_input", data_type: TYPE_STRING, dims: [1] },'
    ' { name: "max_tokens", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "text_output", data_type: TYPE_STRING, dims: [1] }]\n',
    {
        "1/model.py": _model("""
        class TritonPythonModel:
            def execute(self, requests):
                for request in requests:
                    text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0].decode()
                    tokens = int(pb_utils.get_input_tensor_by_name(request, "max_tokens").as_numpy()[0])
                    parameters = json.loads(request.parameters())
                    sender = request.get_response_sender()
                    for index in range(tokens):
                        word = np.array([f"{text}{index}:{sorted(parameters)}".encode()], dtype=np.object_)
                        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", word)]))
                    sender.send(flags=FINAL)
                return None
        """)
    },
)


def write_repository(root: Path, names: list[str] | None = None) -> Path:
    """The models (all, or `names`) laid out under `root` as Triton lays a repository out."""
    for name, (config, files) in MODELS.items():
        if names is not None and name not in names:
            continue
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "config.pbtxt").write_text(config)
        for path, source in files.items():
            (root / name / path).parent.mkdir(parents=True, exist_ok=True)
            (root / name / path).write_text(source)
    return root
