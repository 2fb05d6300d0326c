"""``oip-asgi serve MODULE:ATTR``: the protocol at ``/v2`` from uvicorn, in one process or several.

Imported only to run the command (``oip_asgi`` itself never imports it): it brings in argparse, and
serving brings in uvicorn. With ``--workers N`` uvicorn's own supervisor runs the processes; the
parent never imports MODULE, each worker does (``worker_app``), so each loads its models once and
the parent holds none.

Exit status: 0 after a clean stop (SIGTERM or SIGINT; requests in flight finish first), 2 for a
usage error, 3 when serving could not start: MODULE:ATTR cannot be served (the reason on one line of
stderr, no traceback), the port is taken, a worker could not start.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import importlib.util
import json
import logging
import os
import signal
import sys
import sysconfig
import threading
import traceback
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from types import FrameType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from starlette.types import Message, Receive, Scope, Send

from ._app import OIPApp
from ._errors import NotFound
from ._models import Model
from ._paths import is_under, route_path
from ._responses import send_error
from ._version import __version__

logger = logging.getLogger("uvicorn.error")  # the server's own log, where uvicorn says where it listens

PREFIX = "/v2"
USAGE = 2
STARTUP_FAILURE = 3  # uvicorn's own code for a server that did not start; its supervisor stops on it

# What the parent hands its workers: they read it in `worker_app` and import MODULE:ATTR themselves.
SETTINGS_ENV = "OIP_ASGI_SERVE_SETTINGS"


class TargetError(Exception):
    """MODULE:ATTR cannot be served; the message is the one line the user sees."""


def load_target(target: str, *, metrics: bool = False) -> OIPApp:
    """The app for MODULE:ATTR: a models mapping, a `Model` (served under ATTR's name) or an `OIPApp`.

    `metrics` registers the models' Prometheus metrics, unless ATTR is an app: it chose when built.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise TargetError(f"{target!r} is not MODULE:ATTR (for example mymodels:models)")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise TargetError(
                f"no module named {exc.name!r} (run from the directory that holds it, or name it with --app-dir)"
            ) from None
        raise TargetError(f"importing {module_name} failed: {_described(exc)}") from None
    except Exception as exc:
        raise TargetError(f"importing {module_name} failed: {_described(exc)}") from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise TargetError(f"module {module_name} has no attribute {attribute!r}") from None
    try:
        if isinstance(value, OIPApp):
            return value
        if isinstance(value, Model):
            return OIPApp({attribute.rsplit(".", 1)[-1]: value}, metrics=metrics)
        if isinstance(value, Mapping):
            return OIPApp(value, metrics=metrics)
    except (TypeError, ValueError) as exc:
        raise TargetError(f"{target}: {exc}") from None
    kind = "a function" if callable(value) else f"a {type(value).__name__}"
    raise TargetError(
        f"{target} is {kind}, not a models mapping, a Model or an OIPApp"
        + (" (wrap a bare callable: Model(function))" if callable(value) else "")
    )


def _described(exc: BaseException) -> str:
    """The exception's type and message, and the line of the user's code it came from."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError):  # its message names its file and line already
        return text
    libraries = tuple({sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")})
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not frame.filename.startswith("<")]
    theirs = [frame for frame in frames if not frame.filename.startswith(libraries)] or frames
    if theirs:  # the deepest frame outside the standard library and the installed packages
        text += f" ({theirs[-1].filename}, line {theirs[-1].lineno})"
    return text


class Served:
    """`app` at /v2 of a whole server, and what starts and stops with it: gRPC, a metrics port.

    `metrics` is (host, first port, ports to try): a worker takes the first port of the range it
    can bind, so N workers started on one range each get their own.
    """

    def __init__(
        self, app: OIPApp, *, grpc_address: str | None = None, metrics: tuple[str, int, int] | None = None
    ) -> None:
        self.app = app
        self.grpc_address = grpc_address
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # websockets are not part of the protocol
        path = route_path(scope)
        if is_under(path, PREFIX):
            await self.app({**scope, "root_path": scope.get("root_path", "") + PREFIX}, receive, send)
        else:
            message = f"no such path {path!r}: this server serves the Open Inference Protocol at {PREFIX}"
            await send_error(send, NotFound(message))

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.grpc_address is None and self.metrics is None:
            await self.app(scope, receive, send)
            return
        async with AsyncExitStack() as companions:

            async def started(message: Message) -> None:
                if message["type"] == "lifespan.startup.complete":
                    try:
                        await self._start(companions)
                    except Exception as exc:
                        await send({"type": "lifespan.startup.failed", "message": str(exc)})
                        return
                await send(message)

            async def stopping() -> Message:
                message = await receive()
                if message["type"] == "lifespan.shutdown":
                    await companions.aclose()  # before the app's own shutdown
                return message

            await self.app(scope, stopping, started)

    async def _start(self, companions: AsyncExitStack) -> None:
        if self.grpc_address is not None:
            grpc = importlib.import_module("oip_asgi.grpc")  # the grpc extra, checked before serving
            try:
                await companions.enter_async_context(grpc.serving(self.app, address=self.grpc_address))
            except Exception as exc:
                raise RuntimeError(f"gRPC could not serve on {self.grpc_address}: {type(exc).__name__}: {exc}") from exc
        if self.metrics is not None:
            server = _metrics_server(*self.metrics)
            companions.callback(server.server_close)
            companions.callback(server.shutdown)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a line per scrape would drown the server's log


def _metrics_server(host: str, first: int, count: int) -> WSGIServer:
    """prometheus_client's default registry on the first port from `first` that is free, from a thread."""
    from prometheus_client import REGISTRY, make_wsgi_app
    from prometheus_client.exposition import ThreadingWSGIServer

    for port in range(first, first + count):
        try:
            server = make_server(host, port, make_wsgi_app(REGISTRY), ThreadingWSGIServer, _QuietHandler)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                continue  # another worker's
            raise RuntimeError(f"metrics could not serve on {host}:{port}: {exc}") from exc
        threading.Thread(target=server.serve_forever, name="oip-asgi-metrics", daemon=True).start()
        logger.info("Prometheus metrics of process %d at http://%s:%d/metrics", os.getpid(), host, port)
        return server
    last = f" to {first + count - 1}" if count > 1 else ""
    raise RuntimeError(f"metrics could not serve: port {first}{last} taken")


def worker_app() -> Served:
    """uvicorn's app factory in each worker process: it imports MODULE:ATTR itself."""
    settings = json.loads(os.environ[SETTINGS_ENV])
    try:
        app = load_target(settings["target"], metrics=settings["metrics"] is not None)
    except TargetError as exc:
        _error(str(exc))
        sys.exit(STARTUP_FAILURE)  # uvicorn's supervisor stops the other workers, and does not restart
    metrics = settings["metrics"]
    return Served(app, grpc_address=settings["grpc"], metrics=tuple(metrics) if metrics else None)


def _error(message: str) -> None:
    print(f"oip-asgi: error: {message}", file=sys.stderr, flush=True)


def _stopped(signum: int, frame: FrameType | None) -> None:
    # uvicorn drains on SIGTERM, then raises it again for the handler it found: ours ends the process
    # with 0, the status Kubernetes expects from a clean stop, where the default handler would give -15.
    raise SystemExit(0)


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="oip-asgi",
        description="Serve models over the Open Inference Protocol (KServe V2 / Triton REST).",
    )
    command.add_argument("--version", action="version", version=f"oip-asgi {__version__}")
    commands = command.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve MODULE:ATTR at /v2",
        description=(
            "Serve MODULE:ATTR over the Open Inference Protocol at /v2. ATTR is a mapping of model names "
            "to models, a Model (served under ATTR's name) or an OIPApp. The port is bound at once and the "
            "models load behind it: /v2/health/ready answers 400 until they have loaded, "
            "/v2/health/live 200 all along. SIGTERM lets requests in flight finish, then exits 0."
        ),
        epilog=(
            "exit status: 0 after a clean stop, 2 for a usage error, 3 when serving could not start "
            "(MODULE:ATTR cannot be served, the port is taken, a worker could not start)"
        ),
    )
    serve.add_argument("target", metavar="MODULE:ATTR", help="for example mymodels:models or mymodels:doubler")
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to bind (default: %(default)s; in a container: 0.0.0.0)"
    )
    serve.add_argument(
        "--port", type=int, default=8000, help="the HTTP port (default: %(default)s; KServe's convention is 8080)"
    )
    serve.add_argument(
        "--workers",
        type=_positive,
        default=1,
        metavar="N",
        help="worker processes sharing the port, each loading the models once (default: %(default)s)",
    )
    serve.add_argument(
        "--grpc-port",
        type=int,
        metavar="PORT",
        help="also serve the protocol's gRPC half on this port, from every worker (KServe's convention is 8081; "
        "needs the grpc extra)",
    )
    serve.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="also serve Prometheus metrics (Triton's names) at http://HOST:PORT/metrics; with --workers N, "
        "each worker takes the first free port from PORT to PORT+N-1 and reports its own requests "
        "(needs the metrics extra)",
    )
    serve.add_argument(
        "--app-dir",
        default=".",
        metavar="DIR",
        help="the directory MODULE is imported from, before the installed packages (default: the current one)",
    )
    serve.add_argument(
        "--timeout-graceful-shutdown",
        type=_positive,
        metavar="SECONDS",
        help="after SIGTERM, how long requests in flight may take before they are cut (default: no limit)",
    )
    serve.add_argument(
        "--timeout-keep-alive",
        type=_positive,
        default=5,
        metavar="SECONDS",
        help="close an idle connection after this long; keep it above a load balancer's idle timeout "
        "(default: %(default)s)",
    )
    serve.add_argument(
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        default="info",
        help="uvicorn's log level (default: %(default)s)",
    )
    serve.add_argument("--no-access-log", action="store_true", help="do not log a line per request")
    return command


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return serve(args)


def serve(args: argparse.Namespace) -> int:
    if ":" not in args.target:
        _error(f"{args.target!r} is not MODULE:ATTR (for example mymodels:models)")
        return USAGE
    sys.path.insert(0, os.path.abspath(args.app_dir))  # as uvicorn's --app-dir; spawned workers inherit it
    grpc_address = metrics = None
    if args.grpc_port is not None:
        try:
            importlib.import_module("oip_asgi.grpc")
        except ImportError as exc:
            _error(
                f"--grpc-port needs the gRPC half, which this installation lacks ({exc}): pip install 'oip-asgi[grpc]'"
            )
            return USAGE
        grpc_address = f"[{args.host}]:{args.grpc_port}" if ":" in args.host else f"{args.host}:{args.grpc_port}"
    if args.metrics_port is not None:
        try:
            importlib.import_module("prometheus_client")
        except ImportError:
            _error("--metrics-port needs prometheus_client: pip install 'oip-asgi[metrics]'")
            return USAGE
        metrics = (args.host, args.metrics_port, args.workers)
    try:
        import uvicorn
    except ImportError:
        _error("serving needs uvicorn: pip install 'oip-asgi[serve]'")
        return USAGE
    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "lifespan": "on",
        "log_level": args.log_level,
        "access_log": not args.no_access_log,
        "timeout_graceful_shutdown": args.timeout_graceful_shutdown,
        "timeout_keep_alive": args.timeout_keep_alive,
    }
    if args.workers > 1:
        top = args.target.partition(":")[0].partition(".")[0]
        if importlib.util.find_spec(top) is None:
            # Said once, here, rather than by every worker; looking a top-level name up imports nothing.
            _error(f"no module named {top!r} (run from the directory that holds it, or name it with --app-dir)")
            return STARTUP_FAILURE
        return _supervise(args.workers, {"target": args.target, "grpc": grpc_address, "metrics": metrics}, options)
    try:
        app = load_target(args.target, metrics=metrics is not None)
    except TargetError as exc:
        _error(str(exc))
        return STARTUP_FAILURE
    signal.signal(signal.SIGTERM, _stopped)
    # uvicorn.run exits 3 itself when the server does not start.
    uvicorn.run(Served(app, grpc_address=grpc_address, metrics=metrics), **options)
    return 0


def _supervise(workers: int, settings: dict[str, Any], options: dict[str, Any]) -> int:
    """`--workers N`: uvicorn's supervisor, which restarts a worker that dies and stops on SIGTERM."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    os.environ[SETTINGS_ENV] = json.dumps(settings)
    config = uvicorn.Config(f"{__name__}:worker_app", factory=True, workers=workers, **options)
    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    supervisor.run()
    # A worker that could not start (MODULE:ATTR broken, gRPC port taken) stops the supervisor, which
    # then returns as after a clean stop: a crash must not exit 0.
    if any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        return STARTUP_FAILURE
    return 0
