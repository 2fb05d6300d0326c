"""Ray Serve: `serve run deploy/ray/serve.yaml`, a local Ray instance, driven by tritonclient, then shut down."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.servers import ROOT, free_port, serving, triton_round_trip

if importlib.util.find_spec("ray") is None:  # looked up, not imported: Ray runs in the server process only
    pytest.skip("Ray Serve is not installed", allow_module_level=True)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

# How long `serve run` may take to stop after SIGINT, from Ray's own bounds: the command waits up to 30 s for
# the Serve controller's graceful shutdown (ServeControllerClient.shutdown), within which a replica drains
# (graceful_shutdown_wait_loop_s, 2 s, once idle); ray.shutdown then gives each process of its instance a
# second after SIGTERM before SIGKILL. It takes about 7 s here, also with the machine loaded. (It never
# stopped where the test run ignored SIGINT, as one started in the background does: `serving` sees to it.)
STOP_BUDGET = 60
START_BUDGET = 120  # a local Ray instance takes 20 to 45 s to start here


def session_members(session: int) -> list[int]:
    """Processes still in `session` (Ray's own processes stay in the session of the command that started them)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[3]) == session:  # after the name: state, ppid, pgrp, session
            members.append(int(stat.parent.name))
    return members


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to check that Ray is gone")
@pytest.mark.timeout(START_BUDGET + STOP_BUDGET + 60)  # the run's 120 s would cut a slow start's stop short
def test_tritonclient_against_a_local_ray_serve(tmp_path: Path) -> None:
    import numpy as np
    import tritonclient.http as httpclient
    import yaml

    config = yaml.safe_load((ROOT / "deploy" / "ray" / "serve.yaml").read_text())
    port = free_port()
    config["http_options"]["port"] = port
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump(config))
    # `serve run`, Ray's own command; Ctrl-C (SIGINT) is how it shuts Serve and its Ray instance down.
    argv = ["-c", "import sys; from ray.serve.scripts import cli; sys.exit(cli())", "run", str(tmp_path / "serve.yaml")]
    with serving(argv, port, timeout=START_BUDGET, stop=signal.SIGINT, stop_timeout=STOP_BUDGET) as server:
        triton_round_trip(server.address)
        client = httpclient.InferenceServerClient(server.address)
        try:
            features = httpclient.InferInput("FEATURES", [2, 4], "FP32")
            features.set_data_from_numpy(np.array([[0, 1, 0, 0], [0, 0, 0, 1]], dtype=np.float32), binary_data=True)
            scores = httpclient.InferRequestedOutput("SCORES", binary_data=True, class_count=2)
            result = client.infer("animals", [features], outputs=[scores])
            assert result.as_numpy("SCORES").tolist() == [[b"2.0:1:dog", b"0.5:2:bird"], [b"3.0:2:bird", b"0.2:1:dog"]]
        finally:
            client.close()
        # Ctrl-C, as docs/deploy.md says: Serve drains the replica (the app's lifespan shutdown runs), then the
        # command's exit stops the Ray instance it started. Waited for here, so a stop that hangs shows its log.
        server.process.send_signal(signal.SIGINT)
        try:
            server.process.wait(STOP_BUDGET)
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve run did not stop within {STOP_BUDGET} s of SIGINT; its log:\n{server.output()[-6000:]}")
    assert server.process.returncode == 0
    deadline = time.monotonic() + 30  # Ray's processes finish their own shutdown after the command exits
    while (left := session_members(server.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], "Ray processes outlived `serve run`"
