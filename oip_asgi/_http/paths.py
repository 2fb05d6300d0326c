"""Where a request lands below a mount point: the one place that reads ``path`` against ``root_path``,
and the one prefix dispatcher (`mounted_scope`, `mounted_paths`) that Starlette mounting, the serve command and the
Django and Lambda adapters share."""

from __future__ import annotations

from starlette.types import Scope


def route_path(scope: Scope) -> str:
    """The path below the mount point, whether or not the server put root_path into scope["path"]."""
    path: str = scope["path"]
    root_path: str = scope.get("root_path", "")
    if root_path and (path == root_path or path.startswith(root_path + "/")):
        return path[len(root_path) :]
    return path


def is_under(path: str, prefix: str) -> bool:
    """Whether `path` is `prefix` itself or below it (an empty prefix holds every path)."""
    return not prefix or path == prefix or path.startswith(prefix + "/")


def checked_prefix(prefix: str, *, allow_empty: bool = False) -> str:
    """`prefix` when it is a mount point ('/v2': a leading '/', no trailing one); ValueError otherwise."""
    if (allow_empty and not prefix) or (prefix.startswith("/") and not prefix.endswith("/")):
        return prefix
    empty = "be empty or " if allow_empty else ""
    raise ValueError(f"prefix must {empty}start with '/' and not end with one, got {prefix!r}")


def mounted_paths(scope: Scope, prefix: str) -> tuple[str, str] | None:
    """The ``root_path`` and ``path`` an app mounted at `prefix` sees, or None when the path is not under it.

    `prefix` joins ``root_path``, and ``path`` keeps the root path in it, as the ASGI spec and
    Starlette have it, so the mounted app's `route_path` is the part below `prefix`.
    """
    route = route_path(scope)
    if not is_under(route, prefix):
        return None
    root_path: str = scope.get("root_path", "")
    return root_path + prefix, root_path + route


def mounted_scope(scope: Scope, prefix: str) -> Scope | None:
    """The scope an app mounted at `prefix` sees for this request, or None when the path is not under it."""
    paths = mounted_paths(scope, prefix)
    if paths is None:
        return None
    return {**scope, "root_path": paths[0], "path": paths[1]}
