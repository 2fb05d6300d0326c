"""Every app's command line: --port and the other ports the harness hands it (bench/harness/servers.py)."""

from __future__ import annotations

import argparse


def parser(*flags: str) -> argparse.ArgumentParser:
    """--port and each of `flags` (--grpc-port, --metrics-port), all required; add the app's own options."""
    found = argparse.ArgumentParser()
    for flag in ("--port", *flags):
        found.add_argument(flag, type=int, required=True)
    return found


def ports(*flags: str) -> argparse.Namespace:
    return parser(*flags).parse_args()
