"""The one uvicorn configuration that ours and the floor share, so they are measured alike."""

from __future__ import annotations

from typing import Any

import uvicorn


def serve(app: Any, port: int) -> None:
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        workers=1,
        log_level="warning",
        access_log=False,
    )
