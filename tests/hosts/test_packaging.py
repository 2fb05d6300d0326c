"""The sdist and wheel `python -m build` makes: twine accepts both, and each holds what its users need."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

import pytest

from tests.support.servers import ROOT

pytestmark = pytest.mark.slow

HOME = "https://github.com/oip-asgi/oip-asgi"
PACKAGES = {"oip_asgi", "oip_asgi_django", "oip_asgi_flask", "oip_asgi_lambda", "oip_asgi_wsgi"}


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    outdir = tmp_path_factory.mktemp("dist")
    # No --sdist/--wheel: build makes the sdist, then the wheel from the unpacked sdist, so the wheel
    # also proves that the sdist builds. With hatchling at hand, no isolated env (no download).
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-isolation"]
    command = [sys.executable, "-m", "build", *isolation, "--outdir", str(outdir), str(ROOT)]
    built = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stdout + built.stderr
    (sdist,) = outdir.glob("*.tar.gz")
    (wheel,) = outdir.glob("*.whl")
    return sdist, wheel


def sdist_names(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as archive:
        return {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}


def wheel_metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        return HeaderParser().parsestr(archive.read(name).decode())


def test_twine_check_strict_accepts_both(dists: tuple[Path, Path]) -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, dists)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_sdist_holds_what_sam_build_needs(dists: tuple[Path, Path]) -> None:
    names = sdist_names(dists[0])
    makefile = (ROOT / "Makefile").read_text()
    sources = re.search(r"^LAMBDA_SOURCES \?= (.*)$", makefile, re.MULTILINE)
    assert sources is not None, "the Makefile names the files it copies in LAMBDA_SOURCES"
    examples = sources[1].split()
    assert examples and all(word.startswith("examples/") for word in examples)
    wanted = {"template.yaml", "Makefile", "pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", *examples}
    wanted |= {path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").iterdir()}
    wanted |= {f"adapters/{package}/__init__.py" for package in PACKAGES - {"oip_asgi"}}
    wanted.add("oip_asgi/__init__.py")
    assert wanted - names == set()


def test_wheel_holds_the_packages_and_the_license(dists: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(dists[1]) as archive:
        names = set(archive.namelist())
    top = {name.split("/", 1)[0] for name in names}
    assert {name for name in top if not name.endswith(".dist-info")} == PACKAGES
    assert {f"{package}/{file}" for package in PACKAGES for file in ("__init__.py", "py.typed")} <= names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    metadata = wheel_metadata(dists[1])
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    # PEP 639: with a License-Expression, "License ::" classifiers are deprecated and PyPI refuses the upload.
    assert [c for c in metadata.get_all("Classifier", []) if c.startswith("License ::")] == []


def test_readme_on_an_index_page_has_no_relative_links(dists: tuple[Path, Path]) -> None:
    description = wheel_metadata(dists[1]).get_payload()
    assert isinstance(description, str) and description.startswith("# oip-asgi")
    assert re.findall(r"\]\((?!https://|#)[^)]*\)", description) == []


DOCS = ["README.md", *sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md"))]
# What pip is told to install: "oip-asgi[grpc]" from an index, ".[grpc]" from a clone; not "/tmp/oip-asgi[...]".
INDEX_FORM = re.compile(r"(?<![\w/.-])oip-asgi\[([^\]]+)\](?!\s*@)")
CLONE_FORM = re.compile(r"(?<![\w/-])\.\[([^\]]+)\]")
GIT_FORM = re.compile(r"(?<![\w/.-])oip-asgi\[([^\]]+)\]\s*@")


def extras_named(line: str) -> set[str]:
    named = [*INDEX_FORM.findall(line), *CLONE_FORM.findall(line), *GIT_FORM.findall(line)]
    return {extra for group in named for extra in group.split(",")}


def index_only(lines: list[str], number: int) -> bool:
    """An install from PyPI, where oip-asgi is not yet, with neither a clone's form nor a word that says so."""
    line = lines[number]
    if not INDEX_FORM.search(line) or CLONE_FORM.search(line):
        return False
    return not any("publish" in nearby for nearby in lines[max(0, number - 3) : number + 1])


@pytest.mark.parametrize("doc", DOCS)
def test_install_lines_name_real_extras_and_work_before_publishing(dists: tuple[Path, Path], doc: str) -> None:
    metadata = wheel_metadata(dists[1])
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert f"Homepage, {HOME}" in metadata.get_all("Project-URL", [])
    lines = (ROOT / doc).read_text().splitlines()
    for number, line in enumerate(lines):
        if "pip install" not in line:
            continue
        assert extras_named(line) <= extras, line
        assert not index_only(lines, number), f"{doc}:{number + 1}: {line}"
        assert re.findall(r"git\+\S+?(?=\"|\s|$)", line) in ([], [f"git+{HOME}"]), line


def test_install_lines_in_messages_and_docstrings_name_real_extras(dists: tuple[Path, Path]) -> None:
    extras = set(wheel_metadata(dists[1]).get_all("Provides-Extra") or [])
    sources = [*(ROOT / "oip_asgi").rglob("*.py"), *(ROOT / "adapters").rglob("*.py")]
    hinted: set[str] = set()
    for source in sources:
        text = source.read_text()
        hinted |= set(re.findall(r"install_line\(['\"](\w+)['\"]\)", text))
        lines = text.splitlines()
        for number, line in enumerate(lines):
            if "pip install" in line:
                named = {extra for extra in extras_named(line) if "{" not in extra}  # install_line's own f-string
                assert named <= extras, f"{source}:{number + 1}: {line}"
                assert not index_only(lines, number), f"{source}:{number + 1}: {line}"
    assert {"bf16", "grpc", "metrics", "serve"} <= hinted <= extras
