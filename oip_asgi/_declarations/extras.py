"""How to install an extra, said in the form that works today as well as the one for after publishing."""

from __future__ import annotations


def install_line(extra: str) -> str:
    """The commands that install `extra`: oip-asgi is not on PyPI yet, so the clone's form comes first."""
    return f"pip install -e '.[{extra}]' in a clone of oip-asgi (pip install 'oip-asgi[{extra}]' once it is on PyPI)"
