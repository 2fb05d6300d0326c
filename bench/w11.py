"""`python3 bench/run.py --workloads W11` under its former name (bench/README.md)."""

import sys

import run

run.main(["--workloads", "W11", *sys.argv[1:]])
