"""PyTriton as every PyTriton app runs it: Triton's ports on 127.0.0.1, stopped at once on SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from pytriton.triton import TritonConfig


def config(args: argparse.Namespace) -> TritonConfig:
    return TritonConfig(
        http_address="127.0.0.1",
        http_port=args.port,
        grpc_address="127.0.0.1",
        grpc_port=args.grpc_port,
        metrics_address="127.0.0.1",
        metrics_port=args.metrics_port,
    )


def serve(triton: Any) -> None:
    triton.run()
    # Triton.serve() only notices SIGINT at its monitoring period; stop on SIGTERM/SIGINT at once.
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
