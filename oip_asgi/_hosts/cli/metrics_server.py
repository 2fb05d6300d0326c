"""`--metrics-port`: prometheus_client's exposition on a port of its own, beside uvicorn's."""

from __future__ import annotations

import errno
import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a line per scrape would drown the server's log


def metrics_server(host: str, first: int, count: int) -> WSGIServer:
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
        return server  # the server's startup line says where (served.py)
    last = f" to {first + count - 1}" if count > 1 else ""
    raise RuntimeError(f"metrics could not serve: port {first}{last} taken")
