"""How to install an extra, said in the form that works today as well as the one for after publishing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def install_line(extra: str) -> str:
    """The commands that install `extra`: oip-asgi is not on PyPI yet, so the clone's form comes first."""
    return f"pip install -e '.[{extra}]' in a clone of oip-asgi (pip install 'oip-asgi[{extra}]' once it is on PyPI)"


@contextlib.contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """A package missing in the block, said in one line naming `extra` and how to install it: not a bare
    ``ModuleNotFoundError`` naming only the module. `what` is what needs it (``oip_asgi_lambda``)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] in ("oip_asgi", what.partition(".")[0]):
            raise  # our own module is broken, not an extra missing
        package = exc.name.partition(".")[0]
        raise ModuleNotFoundError(
            f"{what} needs the {package} package, which the {extra} extra brings: {install_line(extra)}",
            name=exc.name,
        ) from exc
