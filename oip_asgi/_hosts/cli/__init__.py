"""``oip-asgi serve MODULE:ATTR``: the protocol at ``/v2`` from uvicorn, in one process or several.

Imported only to run the command (``oip_asgi`` itself never imports it): it brings in argparse, and
serving brings in uvicorn. With ``--workers N`` uvicorn's own supervisor runs the processes; the
parent never imports MODULE, each worker does (``worker_app``), so each loads its models once and
the parent holds none.

Exit status: 0 after a clean stop (SIGTERM or SIGINT; requests in flight finish first), 2 for a
usage error, 3 when serving could not start: MODULE:ATTR cannot be served (the reason on one line of
stderr, no traceback), the port is taken, a worker could not start.

One module per job: ``target`` imports MODULE:ATTR, ``served`` is the whole server's ASGI app,
``metrics_server`` the Prometheus port, ``arguments`` the command line, ``logs`` uvicorn's log
configuration, ``command`` runs uvicorn.
"""

from __future__ import annotations

from .arguments import parser
from .command import main, serve, worker_app
from .served import Served
from .target import TargetError, load_target

__all__ = ["Served", "TargetError", "load_target", "main", "parser", "serve", "worker_app"]
