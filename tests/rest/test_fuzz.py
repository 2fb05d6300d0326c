"""The atheris fuzz target (tests/rest/fuzz/fuzz_request.py): its seeds, the crashes it found, and a short
bounded run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rest.fuzz import fuzz_request
from tests.support.servers import ROOT

FUZZ = ROOT / "tests" / "rest" / "fuzz"
FUZZ_SECONDS = 20
MIN_RUNS = 1000  # far below what 20 s gives (thousands per second): fewer means the target barely ran

# Inputs that crashed the target (a 500), each now a 4xx naming the problem.
CRASHES = {
    "invalid-utf8-in-json-header": (400, "malformed inference request JSON: 'utf-8' codec can't decode"),
    "invalid-utf8-in-bytes-data": (400, "malformed inference request JSON: 'utf-8' codec can't decode"),
    "superscript-digits-in-header-length": (400, "Inference-Header-Content-Length must be a non-negative integer"),
    # An integer datatype's range check looked the datatype up in a set: a list there raised TypeError.
    "datatype-not-a-string": (400, "input 'big': Expected `str` - at `$.inputs[1].datatype`"),
}


def test_the_corpus_is_the_seeds() -> None:
    committed = {path.name: path.read_bytes() for path in (FUZZ / "corpus").iterdir()}
    assert committed == dict(fuzz_request.seeds()), (
        "regenerate with: fuzz_request.py --write-seeds tests/rest/fuzz/corpus"
    )


@pytest.mark.parametrize("name", sorted(dict(fuzz_request.seeds())))
def test_every_seed_is_served(name: str) -> None:
    # The seeds must reach the model, or the fuzzer starts from inputs the parser turns away.
    request = fuzz_request.decode((FUZZ / "corpus" / name).read_bytes())
    assert request is not None
    response = fuzz_request.run(request)
    assert response is not None and response.status == 200, response
    fuzz_request.check(request, response)


@pytest.mark.parametrize("name", sorted(CRASHES))
def test_crash_is_fixed(name: str) -> None:
    data = (FUZZ / "crashes" / name).read_bytes()
    fuzz_request.one_input(data)  # the whole invariant: raises on a 5xx or a malformed answer
    request = fuzz_request.decode(data)
    assert request is not None
    response = fuzz_request.run(request)
    status, message = CRASHES[name]
    assert response is not None and response.status == status, response
    assert message in response.body.decode(), response.body


def test_every_crash_has_a_regression_case() -> None:
    assert sorted(path.name for path in (FUZZ / "crashes").iterdir()) == sorted(CRASHES)


def test_harness_catches_a_500(monkeypatch: pytest.MonkeyPatch) -> None:
    # The target is only as good as its oracle: a request that makes the app fail must be a crash.
    import oip_asgi._rest.request

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(oip_asgi._rest.request, "check_inputs", broken)
    with pytest.raises(AssertionError, match="ZeroDivisionError: planted"):
        fuzz_request.one_input((FUZZ / "corpus" / "json-fp32").read_bytes())


@pytest.mark.fuzz
@pytest.mark.slow
def test_short_fuzzing_pass(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    # libFuzzer adds new inputs to the corpus it is given and writes crash files: keep both out of the tree.
    corpus = tmp_path / "corpus"
    shutil.copytree(FUZZ / "corpus", corpus)
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    command = [
        sys.executable,
        str(FUZZ / "fuzz_request.py"),
        str(corpus),
        f"-max_total_time={FUZZ_SECONDS}",
        f"-artifact_prefix={artifacts}/",
        "-timeout=10",
        "-print_final_stats=1",
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=FUZZ_SECONDS + 60)
    runs = re.search(r"stat::number_of_executed_units: (\d+)", result.stderr)
    executions = int(runs[1]) if runs else 0
    crashes = sorted(path.name for path in artifacts.iterdir())
    report = f"{executions} executions in {FUZZ_SECONDS} s, crash files {crashes}\n{result.stderr[-4000:]}"
    assert result.returncode == 0 and not crashes, report
    assert executions >= MIN_RUNS, report
