"""The one benchmark harness every workload plugs into (bench/README.md).

- `envs`: where the bench lives, and the servers' virtual environments under bench/.peers/;
- `procs`: processes: pinned, stopped by group, their CPU and memory read from /proc;
- `servers`: the servers under test (`Peer`) and one running for a block, ready;
- `loads`: the load generators: wrk, and bench/loadgen/'s scripts in a peer's environment;
- `rounds`: interleaved rounds, samples by round, medians and ratios paired by round;
- `report`: tables, targets and the results document;
- `aiperf`, `inprocess`: aiperf set up offline; an ASGI app driven with no server.

A workload (bench/workloads/) declares its servers, its load and its measures, and uses these for the rest.
"""
