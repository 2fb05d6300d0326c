"""The docs do not call unsupported what the server does: each extension its metadata lists, and perf_analyzer.

A sentence of a page that names an extension the server serves (or perf_analyzer, which bench/ runs)
must not also say it is not there. This caught docs/grpc.md and docs/model-configuration.md calling
the gRPC repository RPCs UNIMPLEMENTED, and docs/benchmarks.md saying perf_analyzer cannot run (issue 30).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oip_asgi import ModelRepository, oip_app

from ._servers import ROOT

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

# How the pages name each extension (Triton's names; the RPCs and paths that are the extension).
NAMES = {
    "binary_tensor_data": ["binary_tensor_data", "binary tensor"],
    "classification": ["classification"],
    "model_configuration": ["model_configuration", "model configuration", "ModelConfig RPC", "`ModelConfig`"],
    "statistics": ["statistics extension", "ModelStatistics", "/stats"],
    "model_repository": ["model_repository", "model repository extension", "RepositoryIndex", "RepositoryModelLoad"],
    "perf_analyzer": ["perf_analyzer"],
}
ABSENT = re.compile(
    r"UNIMPLEMENTED|unserved|not supported|unsupported|not implemented|cannot run|can't run|not offered",
    re.IGNORECASE,
)


def sentences(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # code is checked by running it
    parts = re.split(r"(?<=[.!?])\s+|\n\s*\n|\n\s*[-|*] ", text)
    return [part.strip().removeprefix("- ") for part in parts if part.strip()]


def offered() -> list[str]:
    app = oip_app({}, model_repository=ModelRepository(ROOT / "examples" / "repository"))
    return [*app.core.server_metadata.extensions, "perf_analyzer"]


def test_every_extension_the_server_lists_has_names_here() -> None:
    assert set(offered()) <= set(NAMES)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_page_calls_what_the_server_offers_unsupported(page: Path) -> None:
    contradictions = [
        (extension, sentence)
        for sentence in sentences(page)
        if ABSENT.search(sentence)
        for extension in offered()
        if any(name.lower() in sentence.lower() for name in NAMES[extension])
    ]
    assert contradictions == []


def test_the_check_finds_a_contradiction(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Intro.\n\n- The RepositoryIndex RPC answers `UNIMPLEMENTED`, as every method without a handler.\n")
    assert [sentence for sentence in sentences(page) if ABSENT.search(sentence)] == [
        "The RepositoryIndex RPC answers `UNIMPLEMENTED`, as every method without a handler."
    ]
