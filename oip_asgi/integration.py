"""The API that framework adapters build on (the Django, Flask, WSGI and Lambda adapters use only this
and the names in ``oip_asgi``): an app from models or options, a mount point, and errors as HTTP.

- `as_oip_app(models, **options)`: a models mapping as an `OIPApp` (an `OIPApp` as it is).
- `mounted_scope(scope, prefix)`: the scope an app mounted at `prefix` sees, or None when the
  request's path is not under it; `is_under(path, prefix)` for a path alone.
- `checked_prefix(prefix)`: a mount point ("/v2": a leading "/", no trailing one), or ValueError.
- `render_error(error)`: an `OIPError`'s response headers and JSON body, for servers that are not ASGI.
- `needs_extra(extra, what)`: around an adapter's imports, a missing package said with the extra that
  brings it and how to install it.
"""

from __future__ import annotations

from ._declarations.extras import needs_extra
from ._http.paths import checked_prefix, is_under, mounted_scope
from ._rest.app import AppOptions, as_oip_app
from ._rest.responses import render_error

__all__ = ["AppOptions", "as_oip_app", "checked_prefix", "is_under", "mounted_scope", "needs_extra", "render_error"]
