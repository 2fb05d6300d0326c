"""Running the command: one uvicorn server, or uvicorn's supervisor over worker processes."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging.config
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any

from ..._core.trace_settings import start_setting
from ..._declarations.extras import install_line
from ..._declarations.model_repository import ModelRepository
from .arguments import API_KEY_ENV, parser, triton_booleans
from .logs import LogOptions, log_config, trace_config
from .security import SecurityError, checked
from .served import Served
from .target import FileOptions, TargetError, is_model_file, load_target

USAGE = 2
STARTUP_FAILURE = 3  # uvicorn's own code for a server that did not start; its supervisor stops on it

# What the parent hands its workers: they read it in `worker_app` and import MODULE:ATTR themselves.
SETTINGS_ENV = "OIP_ASGI_SERVE_SETTINGS"
# uvicorn imports the workers' app factory by this name, in each worker process.
WORKER_APP = "oip_asgi._hosts.cli:worker_app"


WORKERS_SHARE_NO_REGIONS = (
    "oip-asgi serve --workers N runs N processes, each of which would hold regions of its own, and a client's "
    "register would reach one of them at random: serve with one worker (as Triton serves from one process)"
)


def worker_app() -> Served:
    """uvicorn's app factory in each worker process: it imports MODULE:ATTR itself."""
    from . import timeouts  # uvicorn's protocols: imported where uvicorn is known to be installed

    settings = json.loads(os.environ[SETTINGS_ENV])
    LogOptions(**settings["log"]).start()  # uvicorn configured this process's logging from the same options
    timeouts.read_timeout = settings["timeout_request_read"]
    repository = ModelRepository(**settings["repository"]) if settings["repository"] else None
    files = FileOptions(**{**settings["files"], "trust_skops_types": tuple(settings["files"]["trust_skops_types"])})
    try:
        app = load_target(
            settings["target"],
            metrics=settings["metrics"] is not None,
            repository=repository,
            restricted_apis=settings["security"]["http_restricted_api"],
            files=files,
            strict_readiness=settings["strict_readiness"],
            max_body_size=settings["max_input_size"],
            tracing=settings["tracing"],
        )
    except TargetError as exc:
        _error(str(exc))
        sys.exit(STARTUP_FAILURE)  # uvicorn's supervisor stops the other workers, and does not restart
    # Each worker would hold its own regions, and a client's register reach one of them at random.
    app.core.offer_no_shared_memory(WORKERS_SHARE_NO_REGIONS)
    metrics = settings["metrics"]
    return Served(
        app,
        grpc_address=settings["grpc"],
        metrics=tuple(metrics) if metrics else None,
        grpc=settings["security"]["grpc"],
        openai=settings["openai"],
        openai_api_key=os.environ.get(API_KEY_ENV) if settings["openai_api_key"] else None,
        max_body_size=settings["max_input_size"],
        url=settings["url"],
    )


def _error(message: str) -> None:
    print(f"oip-asgi: error: {message}", file=sys.stderr, flush=True)


def _stopped(signum: int, frame: FrameType | None) -> None:
    # uvicorn drains on SIGTERM, then raises it again for the handler it found: ours ends the process
    # with 0, the status Kubernetes expects from a clean stop, where the default handler would give -15.
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(triton_booleans(list(sys.argv[1:] if argv is None else argv)))
    return serve(args)


def _repository(args: argparse.Namespace) -> ModelRepository | None:
    """--model-repository and its options, checked as the app will check them."""
    if args.model_repository is None:
        given = [
            option
            for option, value in (
                ("--model-control-mode", args.model_control_mode != "none"),
                ("--load-model", args.load_model),
                ("--kserve-name", args.kserve_name),
            )
            if value
        ]
        if given:
            raise TargetError(f"{' and '.join(given)} go{'es' if len(given) == 1 else ''} with --model-repository DIR")
        return None
    if not os.path.isdir(args.model_repository):
        raise TargetError(f"--model-repository {args.model_repository!r} is not a directory")
    path = os.path.abspath(args.model_repository)
    if args.kserve_name is not None:
        from .kserve import scratch_folder, storage_repository

        try:
            path = str(storage_repository(Path(path), args.kserve_name, scratch_folder(), trusted=args.trust_pickles))
        except (OSError, ValueError) as exc:
            raise TargetError(f"--kserve-name: {exc}") from None
    elif args.trust_pickles and not any(map(is_model_file, args.target)):
        raise TargetError(
            "--trust-pickles goes with a model FILE or --kserve-name: a repository's model trusts its file in its "
            'config.pbtxt (parameters { key: "trusted" value: { string_value: "true" } })'
        )
    if args.load_model and args.model_control_mode != "explicit":
        raise TargetError("--load-model names the models to load at start with --model-control-mode explicit")
    if not args.repository_poll_secs > 0:
        raise TargetError(f"--repository-poll-secs must be above 0, got {args.repository_poll_secs}")
    return ModelRepository(
        path,
        model_control_mode=args.model_control_mode,
        load_models=tuple(args.load_model),
        repository_poll_secs=args.repository_poll_secs,
    )


def _tracing(args: argparse.Namespace) -> dict[str, object] | None:
    """--trace-config as the app's tracing settings, checked as the app will check them."""
    try:
        tracing = trace_config(args.trace_config)
        if tracing is not None and start_setting(tracing).trace_level:
            importlib.import_module("opentelemetry.trace")
    except ValueError as exc:
        raise TargetError(str(exc).replace("tracing: ", "--trace-config: ", 1)) from None
    except ImportError:
        raise TargetError(f"--trace-config needs the OpenTelemetry API: {install_line('tracing')}") from None
    return tracing


def _files(args: argparse.Namespace) -> FileOptions:
    """The model files' options, each only where a model file is given to take it."""
    files = [target for target in args.target if is_model_file(target)]
    for option, value in (
        ("--trust-skops-types", args.trust_skops_types),
        ("--input-datatype", args.input_datatype),
        # With --model-repository, the repository's check says where a repository's model is trusted.
        ("--trust-pickles", args.trust_pickles and args.kserve_name is None and args.model_repository is None),
    ):
        if value and not files:
            raise TargetError(f"{option} goes with model files (FILE ...), which the command names none of")
    return FileOptions(
        trust_pickles=args.trust_pickles and args.kserve_name is None,
        trust_skops_types=tuple(args.trust_skops_types),
        input_datatype=args.input_datatype,
    )


def _unservable(target: str) -> str | None:
    """Why `target` is neither MODULE:ATTR nor a model file, or None if it may be one."""
    if ":" in target or is_model_file(target):
        return None
    if os.path.exists(target):
        return f"{target!r} is not a file: serve a directory with --model-repository DIR"
    from ..._declarations.files.formats import by_extension  # the model files' modules: for files (or this error)

    if by_extension(Path(target)) is not None or os.sep in target:
        return f"no such file: {target!r}"
    return f"{target!r} is neither MODULE:ATTR (for example mymodels:models) nor a model file"


# The distributions that install the packages an option's extra brings, where their names differ.
_DISTRIBUTIONS = {"grpc": "grpcio", "google": "protobuf", "prometheus_client": "prometheus-client"}


def _missing(module: str) -> str | None:
    """What to install that importing `module` misses (the distribution's name), or None when it imports."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        package = (getattr(exc, "name", None) or module).partition(".")[0]
        return _DISTRIBUTIONS.get(package, package)
    return None


def serve(args: argparse.Namespace) -> int:
    if not args.target and args.model_repository is None:
        _error("name what to serve: MODULE:ATTR, model files, or --model-repository DIR")
        return USAGE
    for target in args.target:
        problem = _unservable(target)
        if problem is not None:
            _error(problem)
            return USAGE
    try:  # the options' own checks, each a usage error
        files = _files(args)
        repository = _repository(args)
        security = checked(args)
        tracing = _tracing(args)
    except (TargetError, SecurityError) as exc:
        _error(str(exc))
        return USAGE
    if args.model_control_mode == "explicit" and args.workers > 1:
        # Each worker has its own models: a load or unload would reach one of them, at random.
        _error("--model-control-mode explicit serves from one process: drop --workers, or use poll")
        return USAGE
    sys.path.insert(0, os.path.abspath(args.app_dir))  # as uvicorn's --app-dir; spawned workers inherit it
    grpc_address = metrics = None
    if args.grpc_port is not None:
        # `oip_asgi.grpc` itself imports no grpcio (its names load on first use): its server module does.
        missing = _missing("oip_asgi.grpc._server")
        if missing is not None:
            _error(f"--grpc-port needs {missing}, which the grpc extra brings: {install_line('grpc')}")
            return USAGE
        grpc_address = f"[{args.host}]:{args.grpc_port}" if ":" in args.host else f"{args.host}:{args.grpc_port}"
    if args.metrics_port is not None:
        try:
            importlib.import_module("prometheus_client")
        except ImportError:
            _error(f"--metrics-port needs prometheus_client: {install_line('metrics')}")
            return USAGE
        metrics = (args.host, args.metrics_port, args.workers)
    if args.openai and importlib.util.find_spec("jinja2") is None:  # chat templates: refused now, not per request
        _error(f"--openai needs jinja2 for chat templates: {install_line('openai')}")
        return USAGE
    api_key = args.openai_api_key if args.openai_api_key is not None else os.environ.get(API_KEY_ENV) or None
    if args.openai_api_key is not None and not args.openai:
        _error("--openai-api-key goes with --openai")
        return USAGE
    if args.openai_api_key == "":
        _error("--openai-api-key KEY must not be empty")
        return USAGE
    if not args.openai:
        api_key = None  # the variable set for another server of this environment
    try:
        import uvicorn
    except ImportError:
        _error(f"serving needs uvicorn: {install_line('serve')}")
        return USAGE
    from . import timeouts  # uvicorn's own protocols, subclassed

    logs = LogOptions.of(args)
    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "lifespan": "on",
        "log_level": logs.level,
        "log_config": log_config(logs),
        "access_log": not args.no_access_log,
        "timeout_graceful_shutdown": args.timeout_graceful_shutdown,
        "timeout_keep_alive": args.timeout_keep_alive,
        "http": timeouts.PROTOCOL,  # uvicorn's own, closing requests that stop arriving
        **(security["http_tls"] or {}),
    }
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"{'https' if security['http_tls'] else 'http'}://{host}:{args.port}"
    if args.workers > 1:
        modules = [target for target in args.target if not is_model_file(target)]
        if modules:
            top = modules[0].partition(":")[0].partition(".")[0]
            if importlib.util.find_spec(top) is None:
                # Said once, here, rather than by every worker; looking a top-level name up imports nothing.
                _error(f"no module named {top!r} (run from the directory that holds it, or name it with --app-dir)")
                return STARTUP_FAILURE
        settings = {
            "target": args.target,
            "files": asdict(files),
            "grpc": grpc_address,
            "metrics": metrics,
            "security": security,
            "timeout_request_read": args.timeout_request_read,
            "strict_readiness": args.strict_readiness,
            "openai": args.openai,
            "openai_api_key": api_key is not None,  # the key itself goes by the environment, not the settings
            "max_input_size": args.http_max_input_size,
            "url": url,
            "log": asdict(logs),
            "tracing": tracing,
            "repository": None if repository is None else {**asdict(repository), "load_models": args.load_model},
        }
        if api_key is not None:
            os.environ[API_KEY_ENV] = api_key  # the workers' environment: what they inherit, not on their command line
        return _supervise(args.workers, settings, options)
    logging.config.dictConfig(options["log_config"])  # before the app is built, as a worker's is
    logs.start()
    try:
        app = load_target(
            args.target,
            metrics=metrics is not None,
            repository=repository,
            restricted_apis=security["http_restricted_api"],
            files=files,
            strict_readiness=args.strict_readiness,
            max_body_size=args.http_max_input_size,
            tracing=tracing,
        )
    except TargetError as exc:
        _error(str(exc))
        return STARTUP_FAILURE
    timeouts.read_timeout = args.timeout_request_read
    signal.signal(signal.SIGTERM, _stopped)
    # uvicorn.run exits 3 itself when the server does not start.
    served = Served(
        app,
        grpc_address=grpc_address,
        metrics=metrics,
        grpc=security["grpc"],
        openai=args.openai,
        openai_api_key=api_key,
        max_body_size=args.http_max_input_size,
        url=url,
    )
    uvicorn.run(served, **options)
    return 0


def _supervise(workers: int, settings: dict[str, Any], options: dict[str, Any]) -> int:
    """`--workers N`: uvicorn's supervisor, which restarts a worker that dies and stops on SIGTERM."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    os.environ[SETTINGS_ENV] = json.dumps(settings)
    config = uvicorn.Config(WORKER_APP, factory=True, workers=workers, **options)
    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    supervisor.run()
    # A worker that could not start (MODULE:ATTR broken, gRPC port taken) stops the supervisor, which
    # then returns as after a clean stop: a crash must not exit 0.
    if any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        return STARTUP_FAILURE
    return 0
