"""`python3 bench/run.py --workloads W12` under its former name (bench/README.md)."""

import sys

import run

run.main(["--workloads", "W12", *sys.argv[1:]])
