"""The example models as a Ray Serve deployment: each replica builds its own app and loads its models once.

Run it with ``serve run deploy/ray/serve.yaml`` (or ``serve run examples.ray_serve:app``) and try
``curl localhost:8000/v2``.
"""

from __future__ import annotations

from ray import serve

import oip_asgi


def build() -> oip_asgi.OIPApp:
    # Called in each replica, not in the driver: the models are imported, built and loaded there,
    # and nothing has to be pickled across (an OIPApp holds threads and locks).
    from examples.models import models

    return oip_asgi.oip_app(models)


@serve.deployment(
    autoscaling_config={"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 8},
    ray_actor_options={"num_cpus": 1},
    max_ongoing_requests=32,
    health_check_period_s=10,
)
@serve.ingress(build)
class OIPDeployment:
    """Ray Serve runs `build`'s app in each replica, ASGI lifespan included: models load behind readiness."""


app = OIPDeployment.bind()
