"""Where the clients find the server: Triton's ports by default, or the addresses given on the command line."""

from __future__ import annotations

import argparse


def addresses(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", default="localhost:8000", help="HTTP address (default: Triton's localhost:8000)")
    parser.add_argument("--grpc-url", default="localhost:8001", help="gRPC address (default: localhost:8001)")
    parser.add_argument("--metrics-url", default="localhost:8002", help="metrics address (default: localhost:8002)")
    return parser.parse_args()
