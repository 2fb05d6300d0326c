"""The command line of ``oip-asgi``: every option, its default and its help."""

from __future__ import annotations

import argparse

from ..._version import __version__

API_KEY_ENV = "OIP_OPENAI_API_KEY"  # --openai-api-key's default, as vLLM's VLLM_API_KEY


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="oip-asgi",
        description="Serve models over the Open Inference Protocol (KServe V2 / Triton): REST at /v2, gRPC "
        "(--grpc-port), and OpenAI's API at /v1 (--openai).",
    )
    command.add_argument("--version", action="version", version=f"oip-asgi {__version__}")
    commands = command.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve MODULE:ATTR, a model file or a model repository at /v2 (and over gRPC, and at /v1)",
        description=(
            "Serve MODULE:ATTR, a model file, or a model repository (--model-repository), or both, over the "
            "Open Inference Protocol at /v2. ATTR is a mapping of model names to models, a Model (served under "
            "ATTR's name) or an OIPApp; a model file (ONNX, scikit-learn, XGBoost, LightGBM, PyTorch) is served "
            "under its stem. --grpc-port serves the protocol's gRPC service too, --openai OpenAI's API at /v1. "
            "The port is bound at once and the models load behind it: /v2/health/ready answers "
            "400 until they have loaded, /v2/health/live 200 all along. SIGTERM lets requests in flight finish, "
            "then exits 0."
        ),
        epilog=(
            "exit status: 0 after a clean stop, 2 for a usage error, 3 when serving could not start "
            "(the target cannot be served, the port is taken, a worker could not start)"
        ),
    )
    serve.add_argument(
        "target",
        nargs="*",
        metavar="MODULE:ATTR|FILE",
        help="for example mymodels:models, mymodels:doubler, or model files, each served under its stem: iris.onnx "
        "forest.skops (optional with --model-repository)",
    )
    files = serve.add_argument_group("model files (docs/models.md)")
    files.add_argument(
        "--trust-skops-types",
        action="append",
        default=[],
        metavar="TYPES",
        help="let a skops file load these types it does not trust by default, comma-separated, as its refusal "
        "names them (repeatable)",
    )
    files.add_argument(
        "--input-datatype",
        metavar="DATATYPE",
        help="declare every input of the tabular files (scikit-learn, XGBoost, LightGBM) as DATATYPE, for example FP32 "
        "for an FP64 model and tritonclient's float32 arrays; the model gets the rows as sent",
    )
    repository = serve.add_argument_group("model repository (Triton's options)")
    repository.add_argument(
        "--model-repository",
        metavar="DIR",
        help="serve the models of DIR, laid out as Triton's model repository (docs/repository.md)",
    )
    repository.add_argument(
        "--model-control-mode",
        choices=["none", "explicit", "poll"],
        default="none",
        help="none: load every model at start, no load or unload; explicit: load --load-model at start, then what "
        "the repository API asks; poll: load every model and follow DIR's changes (default: %(default)s)",
    )
    repository.add_argument(
        "--load-model",
        action="append",
        default=[],
        metavar="NAME",
        help="with --model-control-mode explicit, a model to load at start (repeatable; '*' for all)",
    )
    repository.add_argument(
        "--kserve-name",
        metavar="NAME",
        help="DIR is what KServe's storage initializer put at /mnt/models: a repository, or one model's folder or "
        "files, then served as the model NAME (the InferenceService's name)",
    )
    repository.add_argument(
        "--trust-pickles",
        action="store_true",
        help="let a model FILE, or with --kserve-name the bare files, load from joblib or pickle (they run the "
        "code they hold)",
    )
    repository.add_argument(
        "--repository-poll-secs",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="with --model-control-mode poll, how often DIR is checked for changes (default: %(default)s)",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to bind (default: %(default)s; in a container: 0.0.0.0)"
    )
    serve.add_argument(
        "--port",
        "--http-port",
        type=int,
        default=8000,
        help="the HTTP port (default: %(default)s; KServe's convention is 8080; --http-port is Triton's name)",
    )
    serve.add_argument(
        "--strict-readiness",
        type=_boolean,
        metavar="BOOL",
        help="as Triton's: true (the default), /v2/health/ready is 200 only while every model serves; false, "
        "it is 200 once the loads at start have ended, even if some models failed to load",
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
        "--openai",
        action="store_true",
        help="also serve the OpenAI-compatible API (/v1/models, /v1/completions, /v1/chat/completions, "
        "/v1/embeddings) over the same models, on the same port (needs the openai extra; docs/openai.md)",
    )
    serve.add_argument(
        "--openai-api-key",
        metavar="KEY",
        help="with --openai, require 'Authorization: Bearer KEY' of every request to /v1 (a 401 otherwise), as "
        f"vLLM's --api-key (default: ${API_KEY_ENV}, where set)",
    )
    serve.add_argument(
        "--http-max-input-size",
        type=_positive,
        metavar="BYTES",
        help="the largest request body, on /v2 and /v1 alike (a 413 over it), as Triton's option (default: "
        "64 MiB on /v1, Triton's; 128 MiB on /v2)",
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
    security = serve.add_argument_group("security (Triton's and uvicorn's options; docs/security.md)")
    security.add_argument(
        "--http-restricted-api",
        action="append",
        default=[],
        metavar="API[,API...]:KEY=VALUE",
        help="serve these groups of REST endpoints only to requests with the header KEY: VALUE (others get 403); "
        "groups: health, metadata, inference, model-config, model-repository, statistics, shared-memory, trace, "
        "logging; repeatable with different keys",
    )
    security.add_argument(
        "--grpc-restricted-protocol",
        action="append",
        default=[],
        metavar="API[,API...]:KEY=VALUE",
        help="the same for gRPC: a call must carry the metadata triton-grpc-protocol-KEY: VALUE "
        "(others get UNAVAILABLE)",
    )
    security.add_argument("--ssl-certfile", metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    security.add_argument("--ssl-keyfile", metavar="FILE", help="the private key of --ssl-certfile (PEM)")
    security.add_argument(
        "--ssl-ca-certs", metavar="FILE", help="with --ssl-certfile, require client certificates signed by these CAs"
    )
    security.add_argument(
        "--grpc-use-ssl", action="store_true", help="serve gRPC over TLS (also --grpc-use-ssl=1, as Triton takes it)"
    )
    security.add_argument("--grpc-server-cert", metavar="FILE", help="with --grpc-use-ssl, the certificate (PEM)")
    security.add_argument("--grpc-server-key", metavar="FILE", help="with --grpc-use-ssl, its private key (PEM)")
    security.add_argument(
        "--grpc-root-cert",
        metavar="FILE",
        help="with --grpc-use-ssl-mutual, the CA certificates clients' are checked by",
    )
    security.add_argument(
        "--grpc-use-ssl-mutual", action="store_true", help="require a client certificate signed by --grpc-root-cert"
    )
    serve.add_argument(
        "--timeout-request-read",
        type=_positive_float,
        default=30.0,
        metavar="SECONDS",
        help="close a connection whose request (line, headers or body) has sent no byte for this long, "
        "and one that sends nothing (default: %(default)s)",
    )
    serve.add_argument(
        "--grpc-stream-first-request-timeout",
        type=_positive_float,
        default=60.0,
        metavar="SECONDS",
        help="end a gRPC ModelStreamInfer that sends no request for this long after it opens (default: %(default)s)",
    )
    logs = serve.add_argument_group(
        "logging and tracing (Triton's options; the logging and trace extensions change them while serving; "
        "docs/observability.md)"
    )
    logs.add_argument(
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        default="info",
        help="the log level of uvicorn and of the oip_asgi loggers, where an app's access_log=True lines go; "
        "debug is Triton's verbose level 1 (default: %(default)s)",
    )
    logs.add_argument(
        "--no-access-log",
        action="store_true",
        help="do not log uvicorn's line per request (an app's own access_log=True lines follow --log-level)",
    )
    logs.add_argument(
        "--log-verbose",
        type=_verbose,
        metavar="N",
        help="Triton's verbose level: 0 none, N >= 1 verbose lines up to level N (Python's DEBUG is level 1, "
        "where pb_utils.Logger.log_verbose writes); over what --log-level says",
    )
    for level in ("info", "warning", "error"):
        logs.add_argument(
            f"--log-{level}",
            type=_boolean,
            metavar="BOOL",
            help=f"Triton's switch of {level.upper()} lines, on (true) or off (false), over what --log-level says",
        )
    logs.add_argument(
        "--log-format",
        choices=["default", "ISO8601"],
        help="default: uvicorn's lines (INFO:     ...); ISO8601: Triton's (2024-05-20T20:03:26Z I 4242 life.py:24] "
        '"..."), for every line the server writes',
    )
    logs.add_argument(
        "--log-file",
        metavar="FILE",
        help="append every line to FILE instead of the console (a request cannot change where: Triton's rule)",
    )
    logs.add_argument(
        "--trace-config",
        action="append",
        default=[],
        metavar="SETTING=VALUE",
        help="Triton's global trace settings: level=OFF|TIMESTAMPS|TENSORS (repeatable), rate=N (trace one "
        "request in N), count=N (then stop; -1 never), mode=opentelemetry (the only mode: spans to the "
        "OpenTelemetry SDK the process configures; needs opentelemetry-api)",
    )
    return command


_TRITON_BOOLEANS = ("--grpc-use-ssl", "--grpc-use-ssl-mutual")


def triton_booleans(argv: list[str]) -> list[str]:
    """Triton's ``--grpc-use-ssl=1`` form as the bare flag (``=0`` or ``=false`` as none), before argparse."""
    result = []
    for argument in argv:
        name, equals, value = argument.partition("=")
        if equals and name in _TRITON_BOOLEANS:
            if value.lower() in ("1", "true", "yes", "on"):
                result.append(name)
            elif value.lower() not in ("0", "false", "no", "off"):
                result.append(argument)  # argparse then says what is wrong with it
            continue
        result.append(argument)
    return result


def _boolean(text: str) -> bool:
    """Triton's booleans: true/false, 1/0, yes/no, on/off."""
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"must be true or false, got {text!r}")


def _verbose(text: str) -> int:
    """Triton's --log-verbose: an integer >= 0, or true (1) and false (0)."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return int(lowered == "true")
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
