"""``python -m oip_asgi serve MODULE:ATTR``: the same command as ``oip-asgi``."""

from __future__ import annotations

import sys

from oip_asgi._hosts.cli import main

if __name__ == "__main__":
    sys.exit(main())
