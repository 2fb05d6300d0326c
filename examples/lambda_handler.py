"""The example models on AWS Lambda: ``template.yaml`` points its function at ``handler``.

Build and deploy with ``sam build && sam deploy --guided``; try it locally with
``sam build && sam local start-api``, then ``curl localhost:3000/v2``.
"""

from __future__ import annotations

import oip_asgi_lambda
from examples.models import models

# Built at import, in Lambda's init phase: the models load once per execution environment.
handler = oip_asgi_lambda.handler(models, prefix="/v2")
