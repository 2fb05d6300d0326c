"""A model repository on AWS Lambda: ``examples/repository``, packed beside this module, loaded at init.

Pack it with the Makefile (docs/repository.md): ``LAMBDA_SOURCES="examples/__init__.py
examples/lambda_repository.py examples/repository" LAMBDA_EXTRAS=lambda,repository`` (protobuf,
which reads the models' config.pbtxt), and point template.yaml's Handler at
``examples.lambda_repository.handler``.
"""

from __future__ import annotations

from pathlib import Path

import oip_asgi_lambda
from oip_asgi import oip_app

REPOSITORY = Path(__file__).parent / "repository"

# Built at import, in Lambda's init phase: the repository is read and its models load once per
# execution environment. An app built here keeps its own body limit: give it the handler's.
handler = oip_asgi_lambda.handler(oip_app(model_repository=REPOSITORY, max_body_size=oip_asgi_lambda.MAX_BODY_SIZE))
