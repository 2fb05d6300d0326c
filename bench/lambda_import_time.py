"""Cold-start cost of the Lambda adapter: ``import oip_asgi_lambda`` in fresh interpreters.

Lambda bills and users wait for the init phase, which for a Python function is mostly imports.
This runs ``python -X importtime`` in N fresh interpreters and reports the median import time of
the adapter (and of the example handlers, which also build and load the models: the example
module's, a packed model repository's, and Triton's add_sub Python model's), with the top-level
packages that cost the most.

    python bench/lambda_import_time.py [--runs 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {
    "oip_asgi_lambda": "import oip_asgi_lambda",
    "examples.lambda_handler": "import examples.lambda_handler",
    # A packed model repository (examples/repository): read, its config.pbtxt files parsed, its models loaded.
    "examples.lambda_repository": "import examples.lambda_repository",
    # Triton's add_sub Python model (examples/python_backend/models), its files unchanged, loaded through pb_utils.
    "examples.lambda_python_backend": "import examples.lambda_python_backend",
}


def import_times(statement: str) -> dict[str, int]:
    """Microseconds spent importing each package (its modules' own time) for `statement`, freshly."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "adapters")])}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a deployed function has its bytecode cached
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    totals: dict[str, int] = defaultdict(int)
    for line in result.stderr.splitlines():
        # "import time:       self [us] |  cumulative | imported package"; self times add up
        if line.startswith("import time:") and "imported package" not in line:
            own, _, name = line[len("import time:") :].split("|")
            totals[name.strip().split(".")[0]] += int(own)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()

    import_times("pass")  # warm the bytecode cache, as a deployed function's is
    report: dict[str, object] = {"python": sys.version.split()[0], "runs": args.runs}
    for target, statement in TARGETS.items():
        samples: list[int] = []
        packages: dict[str, list[int]] = defaultdict(list)
        for _ in range(args.runs):
            totals = import_times(statement)
            samples.append(sum(totals.values()))
            for name, micros in totals.items():
                packages[name].append(micros)
        heaviest = sorted(packages.items(), key=lambda item: -statistics.median(item[1]))[:8]
        report[target] = {
            "median_ms": statistics.median(samples) / 1000,
            "min_ms": min(samples) / 1000,
            "max_ms": max(samples) / 1000,
            "heaviest_ms": {name: statistics.median(values) / 1000 for name, values in heaviest},
            "packages": sorted(packages),  # every top-level package it imported, however light
        }
    if args.json:
        print(json.dumps(report))
        return
    print(f"Python {report['python']}, {args.runs} fresh interpreters each")
    for target in TARGETS:
        numbers = report[target]
        assert isinstance(numbers, dict)
        print(f"\nimport {target}: median {numbers['median_ms']:.0f} ms", end="")
        print(f" (min {numbers['min_ms']:.0f}, max {numbers['max_ms']:.0f})")
        for name, ms in numbers["heaviest_ms"].items():
            print(f"  {name:<24}{ms:8.1f} ms")


if __name__ == "__main__":
    main()
