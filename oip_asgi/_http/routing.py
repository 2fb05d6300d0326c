"""One router under the HTTP wires: each wire's route table mounted at a path prefix, and one error boundary.

A `Route` is a path pattern below its table's mount point, the methods it takes, its endpoint and the
restricted API group it belongs to. A `Table` is a wire's routes and how that wire answers: the rules
of its restricted groups, its error format, what it says of a path it has no route for, and the core
whose `answer` turns an exception into what a client is told. A `Router` is the ASGI app over tables
mounted at prefixes (a router mounted in another lends it its tables; a wire's app is a `WireApp`, the
router of its one table), matching as Starlette's does:

- a request is offered to each table whose prefix holds its path, in the order they were mounted; the
  first route whose pattern matches and which takes the method answers (Starlette's ``Match.FULL``);
- else the first route whose pattern matched (``Match.PARTIAL``) makes it a 405, whose ``Allow`` names
  the methods of every route that matched;
- else the first table whose prefix holds the path answers 404 in its own words and format; a path
  under no prefix gets the router's `fallback` table's.

The first table's first route may be its wire's *front* (REST's inference): the router tries it first, with
one match of its pattern under its prefix, and its endpoint gets the request's scope as it came (such an
endpoint reads no path from it). It answers what the tables would have: the first route of the first table.

The route's group is checked before it answers, or is a 405: a restricted path tells nothing more.
Whatever an endpoint raises ends at the boundary: a client that left is nobody to answer, a response
that failed to send can only be logged, and anything else is answered in the table's error format.

Patterns: ``{name}`` is one path segment, ``{name:path}`` the rest of the path, ``[...]`` is optional,
and a route takes its path with a trailing slash too unless built with ``trailing_slash=False``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from starlette.types import Receive, Scope, Send

from .._core.server import ServerCore
from .._declarations.errors import ClientDisconnected, MethodNotAllowed, OIPError
from .._declarations.restricted import Restriction
from .headers import header
from .lifespan import serve_lifespan
from .paths import checked_prefix, is_under, mounted_scope, route_path

# An endpoint may hand back the coroutine that answers (one coroutine frame fewer); what it returns is dropped.
Endpoint = Callable[[Scope, Receive, Send, "re.Match[str]"], Awaitable[object]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_PARTS = re.compile(r"\{(\w+)(:path)?\}|\[|\]")


class SendFailed(Exception):
    """Sending a response failed for another reason than a client that left: it may have started,
    so nothing more can be sent to this client (the cause is the server's to log)."""


def compile_pattern(pattern: str, *, trailing_slash: bool = True) -> re.Pattern[str]:
    """The regular expression of a route's `pattern`, whose groups are its parameters."""
    regex = []
    position = 0
    for part in _PARTS.finditer(pattern):
        regex.append(re.escape(pattern[position : part.start()]))
        if part[0] == "[":
            regex.append("(?:")
        elif part[0] == "]":
            regex.append(")?")
        else:
            regex.append(f"(?P<{part[1]}>{'.+' if part[2] else '[^/]+'})")
        position = part.end()
    regex.append(re.escape(pattern[position:]) + ("/?" if trailing_slash else ""))
    return re.compile("".join(regex))


def path_templates(pattern: str) -> list[str]:
    """Each path `pattern` stands for, as OpenAPI writes one (``/models/{name}``): its optional parts left
    out, then put in; the root as ``/``."""
    pieces = re.split(r"(\[[^\]]*\])", re.sub(r"\{(\w+):path\}", r"{\1}", pattern))
    choices = [[""] + [piece[1:-1]] if piece.startswith("[") else [piece] for piece in pieces]
    return ["".join(chosen) or "/" for chosen in itertools.product(*choices)]


class Route:
    """A path pattern below its table's mount point, the methods it takes, its endpoint, and its API group
    (Triton's names, which a restricted API rule names). `name` is what it does (the OpenAPI operation)."""

    __slots__ = ("endpoint", "front", "fullmatch", "group", "methods", "name", "pattern", "trailing_slash")

    def __init__(
        self,
        pattern: str,
        endpoint: Endpoint,
        group: str,
        *,
        methods: Iterable[str] = ("GET",),
        name: str = "",
        trailing_slash: bool = True,
        front: bool = False,
    ) -> None:
        self.pattern = pattern
        self.endpoint = endpoint
        self.group = group
        self.methods = tuple(methods)
        self.name = name
        self.trailing_slash = trailing_slash
        self.fullmatch = compile_pattern(pattern, trailing_slash=trailing_slash).fullmatch
        # The wire's most frequent request: tried first, its endpoint handed the scope as it came (unmounted).
        self.front = front

    def __repr__(self) -> str:
        return f"Route({self.pattern!r}, methods={self.methods}, group={self.group!r}, name={self.name!r})"


@dataclass(slots=True)
class Table:
    """A wire's routes, in the order they are tried, and how the wire answers.

    `send_error` sends an error in the wire's format; `not_found` is the error for a path below the
    mount point (the request's scope as mounted) that no route matches; `core.client_error` makes any
    exception what the client is told. `first_request` runs at a router's first request. `authorize`,
    where given, checks every request the table answers, before anything else (an API key): it raises
    the error that refuses one.
    """

    routes: Sequence[Route]
    core: ServerCore
    send_error: Callable[[Send, OIPError], Awaitable[None]]
    not_found: Callable[[Scope, str], OIPError]
    restrictions: Mapping[str, Restriction] = field(default_factory=dict)
    first_request: Callable[[Scope], None] | None = None
    authorize: Callable[[Scope], None] | None = None


class Router:
    """The ASGI app of route tables mounted at path prefixes (``""`` for the router's own mount point).

    `lifespan` answers the lifespan scope; `fallback` is the table whose 404 a path under no prefix
    gets (the first table's, unless given).
    """

    def __init__(
        self,
        mounts: Iterable[tuple[str, Table | Router]],
        *,
        lifespan: ASGIApp | None = None,
        fallback: Table | None = None,
    ) -> None:
        tables: list[tuple[str, Table]] = []
        for prefix, mounted in mounts:
            checked_prefix(prefix, allow_empty=True)
            if isinstance(mounted, Router):
                tables += [(prefix + inner, table) for inner, table in mounted.mounts]
            else:
                tables.append((prefix, mounted))
        if not tables:
            raise ValueError("a router needs a table to route to")
        self.mounts: tuple[tuple[str, Table], ...] = tuple(tables)
        self._lifespan_app = lifespan
        self._fallback = tables[0][1] if fallback is None else fallback
        self._seen_first = False
        self._front: tuple[Callable[[str], re.Match[str] | None], Table, Route] | None = None
        prefix, first = tables[0]
        if first.routes and first.routes[0].front:  # the first route of all: what `_match` would find first
            route = first.routes[0]
            pattern = re.escape(prefix) + compile_pattern(route.pattern, trailing_slash=route.trailing_slash).pattern
            self._front = re.compile(pattern).fullmatch, first, route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan" and self._lifespan_app is not None:
                await self._lifespan_app(scope, receive, send)
            return  # websockets are not part of the protocols; refusing the handshake closes them
        if not self._seen_first:
            self._before_first_request(scope)
        path: str = scope["path"]
        if scope.get("root_path"):
            path = route_path(scope)
        front = self._front
        route: Route | None
        if front is not None and scope["method"] in front[2].methods and (match := front[0](path)) is not None:
            table, route = front[1], front[2]
        else:
            table, route, match, prefix = self._match(path, scope["method"])
            if prefix:
                scope = mounted_scope(scope, prefix) or scope  # under it: _match found it there
        try:
            if table.authorize is not None:
                table.authorize(scope)
            if route is None:
                raise table.not_found(scope, path[len(prefix) :])
            restriction = table.restrictions.get(route.group)
            if restriction is not None and not restriction.allows(header(scope, restriction.header.encode("latin-1"))):
                raise restriction.refusal()  # before the method: a restricted path tells nothing more
            if match is None:
                allowed = ", ".join(self._allowed(path))
                raise MethodNotAllowed(f"method {scope['method']} is not allowed here; use {allowed}", allow=allowed)
            await route.endpoint(scope, receive, send, match)
        except ClientDisconnected:
            pass
        except SendFailed as exc:  # the response may have started: only the log can tell
            table.core.client_error(exc.__cause__ or exc, f"{scope.get('method')} {scope.get('path')}")
        except Exception as exc:
            error = table.core.client_error(exc, f"{scope.get('method')} {scope.get('path')}")
            with contextlib.suppress(ClientDisconnected, SendFailed):
                await table.send_error(send, error)

    def _match(self, path: str, method: str) -> tuple[Table, Route | None, re.Match[str] | None, str]:
        """The table and route that answer, with the path's match (None for a 405) and the table's prefix."""
        partial: tuple[Table, Route | None, None, str] | None = None
        home: tuple[Table, None, None, str] | None = None
        for prefix, table in self.mounts:
            if not prefix:
                below = path
            elif is_under(path, prefix):
                below = path[len(prefix) :]
            else:
                continue
            for route in table.routes:
                match = route.fullmatch(below)
                if match is not None:
                    if method in route.methods:
                        return table, route, match, prefix
                    if partial is None:
                        partial = table, route, None, prefix
            if home is None:
                home = table, None, None, prefix
        return partial or home or (self._fallback, None, None, "")

    def _allowed(self, path: str) -> list[str]:
        """The methods of every route whose pattern matches the path."""
        allowed: list[str] = []
        for prefix, table in self.mounts:
            if is_under(path, prefix):
                for route in table.routes:
                    if route.fullmatch(path[len(prefix) :]) is not None:
                        allowed += [method for method in route.methods if method not in allowed]
        return allowed

    def _before_first_request(self, scope: Scope) -> None:
        self._seen_first = True
        for _, table in self.mounts:
            if table.first_request is not None:
                table.first_request(scope)


class WireApp(Router):
    """A wire's app: a router over the wire's one table at the app's mount point, which serves the lifespan
    of the table's core when it is the root app. Its `restrictions` are the table's (settable)."""

    def __init__(self, table: Table) -> None:
        self._table = table
        super().__init__([("", table)], lifespan=functools.partial(serve_lifespan, table.core))

    @property
    def restrictions(self) -> Mapping[str, Restriction]:
        return self._table.restrictions

    @restrictions.setter
    def restrictions(self, rules: Mapping[str, Restriction]) -> None:
        self._table.restrictions = rules
