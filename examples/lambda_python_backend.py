"""Triton's `add_sub` Python model on AWS Lambda, its files unchanged: ``examples/python_backend/models``.

Triton's own Python backend cannot run there (a stub process per model instance, and POSIX shared memory in
/dev/shm, which Lambda does not offer); here the model runs in the function's own process. Pack it as
examples/lambda_repository.py says, with ``LAMBDA_SOURCES="examples/__init__.py examples/lambda_python_backend.py
examples/python_backend/models"`` and the Handler ``examples.lambda_python_backend.handler``.
"""

from __future__ import annotations

from pathlib import Path

import oip_asgi_lambda
from oip_asgi import ModelRepository, oip_app

MODELS = Path(__file__).parent / "python_backend" / "models"

# Loaded at import, in Lambda's init phase. Only add_sub: the decoupled examples answer over a gRPC stream,
# which Lambda's request-response invocations cannot carry, and the others are not needed here.
handler = oip_asgi_lambda.handler(
    oip_app(
        model_repository=ModelRepository(MODELS, model_control_mode="explicit", load_models=["add_sub"]),
        max_body_size=oip_asgi_lambda.MAX_BODY_SIZE,
    )
)
