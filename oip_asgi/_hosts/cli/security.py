"""The serve command's restricted APIs and TLS: checked at start, where a mistake is a usage error."""

from __future__ import annotations

import argparse
import os
import ssl
from typing import Any

from ..._declarations.restricted import restrictions


class SecurityError(Exception):
    """An option that cannot be served as given; the message is the one line the user sees."""


def _readable(option: str, path: str | None) -> str:
    if path is None:
        raise SecurityError(f"{option} FILE is needed")
    if not os.path.isfile(path):
        raise SecurityError(f"{option} {path!r} is not a file")
    return os.path.abspath(path)


def checked(args: argparse.Namespace) -> dict[str, Any]:
    """What the app and the gRPC server are given: the rules as checked, the TLS files as absolute paths.

    Plain values only: the workers of --workers N receive them as JSON.
    """
    for option, rules, grpc in (
        ("--http-restricted-api", args.http_restricted_api, False),
        ("--grpc-restricted-protocol", args.grpc_restricted_protocol, True),
    ):
        try:
            restrictions(rules, grpc=grpc)
        except ValueError as exc:
            raise SecurityError(f"{option}: {exc}") from None
    if args.grpc_restricted_protocol and args.grpc_port is None:
        raise SecurityError("--grpc-restricted-protocol goes with --grpc-port")
    if (args.ssl_certfile is None) != (args.ssl_keyfile is None):
        raise SecurityError("--ssl-certfile and --ssl-keyfile go together")
    if args.ssl_ca_certs is not None and args.ssl_certfile is None:
        raise SecurityError("--ssl-ca-certs goes with --ssl-certfile and --ssl-keyfile")
    grpc_tls = None
    if args.grpc_use_ssl:
        if args.grpc_port is None:
            raise SecurityError("--grpc-use-ssl goes with --grpc-port")
        grpc_tls = {
            "cert": _readable("--grpc-server-cert", args.grpc_server_cert),
            "key": _readable("--grpc-server-key", args.grpc_server_key),
            "root": _readable("--grpc-root-cert", args.grpc_root_cert) if args.grpc_use_ssl_mutual else None,
        }
    elif args.grpc_server_cert or args.grpc_server_key or args.grpc_root_cert or args.grpc_use_ssl_mutual:
        raise SecurityError(
            "--grpc-server-cert, --grpc-server-key, --grpc-root-cert and --grpc-use-ssl-mutual go with --grpc-use-ssl"
        )
    http_tls: dict[str, Any] | None = None
    if args.ssl_certfile is not None:
        http_tls = {
            "ssl_certfile": _readable("--ssl-certfile", args.ssl_certfile),
            "ssl_keyfile": _readable("--ssl-keyfile", args.ssl_keyfile),
        }
        if args.ssl_ca_certs is not None:
            http_tls["ssl_ca_certs"] = _readable("--ssl-ca-certs", args.ssl_ca_certs)
            http_tls["ssl_cert_reqs"] = int(ssl.CERT_REQUIRED)  # uvicorn asks for none otherwise
    return {
        "http_restricted_api": list(args.http_restricted_api),
        "http_tls": http_tls,
        "grpc": {
            "restricted_protocols": list(args.grpc_restricted_protocol),
            "tls": grpc_tls,
            "stream_first_request_timeout": args.grpc_stream_first_request_timeout,
        },
    }


def grpc_credentials(tls: dict[str, Any] | None) -> Any:
    """``grpc.ServerCredentials`` from the files, or None for plaintext (grpcio is imported only for TLS)."""
    if tls is None:
        return None
    import grpc

    def read(path: str) -> bytes:
        with open(path, "rb") as file:
            return file.read()

    root = None if tls["root"] is None else read(tls["root"])
    return grpc.ssl_server_credentials(
        [(read(tls["key"]), read(tls["cert"]))], root_certificates=root, require_client_auth=root is not None
    )
