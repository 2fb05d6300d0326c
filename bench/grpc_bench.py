"""`python3 bench/run.py --workloads G1,G2,G4` under its former name (bench/README.md)."""

import sys

import run

run.main(["--workloads", "G1,G2,G4", *sys.argv[1:]])
