"""An OIP app as a WSGI application, through a2wsgi (shared by the Django and Flask adapters)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, cast

from a2wsgi import ASGIMiddleware

from oip_asgi import LengthRequired, OIPApp, OIPError
from oip_asgi.integration import render_error

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

_CHUNKED_WITHOUT_LENGTH = (
    "the request body came chunked without a Content-Length, and this WSGI server passes such bodies on in a"
    " way that reads as empty; send a Content-Length header, or serve with waitress, which buffers chunked"
    " bodies and sets it"
)


class WSGIBridge:
    """`app` as a WSGI application, on one a2wsgi event-loop thread per process."""

    def __init__(self, app: OIPApp, *, preload: bool = True) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._middleware, loop = _middleware(app)
        if preload:
            asyncio.run_coroutine_threadsafe(app.load(), loop).result()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        # a2wsgi reads exactly CONTENT_LENGTH bytes: without it, a chunked body would reach the
        # model as an empty one.
        if not environ.get("CONTENT_LENGTH") and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            return _error(LengthRequired(_CHUNKED_WITHOUT_LENGTH), start_response)
        return self._current()(environ, start_response)

    def _current(self) -> WSGIApplication:
        # The event loop runs in a thread, and threads do not survive a fork (gunicorn --preload
        # imports the app before forking its workers): a forked process starts its own.
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._middleware, _ = _middleware(self.app)
                    self._pid = os.getpid()
        return self._middleware


def _error(error: OIPError, start_response: StartResponse) -> Iterable[bytes]:
    headers, body = render_error(error)
    status = HTTPStatus(error.status_code)
    start_response(f"{status.value} {status.phrase}", headers)
    return [body]


def _middleware(app: OIPApp) -> tuple[WSGIApplication, asyncio.AbstractEventLoop]:
    # a2wsgi types ASGI and WSGI with TypedDicts of its own that no starlette- or typeshed-typed
    # callable matches.
    middleware = ASGIMiddleware(cast(Any, app))
    return cast("WSGIApplication", middleware), middleware.loop
