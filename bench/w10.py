"""`python3 bench/run.py --workloads W10` under its former name (bench/README.md)."""

import sys

import run

run.main(["--workloads", "W10", *sys.argv[1:]])
