"""MLServer as every MLServer app runs it: in-process (parallel_workers=0), its ports on 127.0.0.1."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from mlserver import MLServer
from mlserver.settings import ModelSettings, Settings


def serve(args: argparse.Namespace, models: list[ModelSettings], **settings: Any) -> None:
    options = Settings(
        host="127.0.0.1",
        http_port=args.port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        parallel_workers=0,
        debug=False,
        load_models_at_startup=True,
        **settings,
    )
    asyncio.run(MLServer(options).start(models))
