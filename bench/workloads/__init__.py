"""The workloads, one module each, every one plugged into the harness (bench/harness/) and run by bench/run.py:
its servers (`harness.servers.Peer`s), its load, its measures, its report. `http` is W1-W9 over REST (its
bodies in `http_bodies`, its targets in `http_report`), `grpc` G1/G2/G4, `w10` streaming, `w11` OpenAI's API,
`w12` Triton's Python models."""
