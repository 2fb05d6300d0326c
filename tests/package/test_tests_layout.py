"""The tests' own layout (tests/README.md): each test module in the folder of the layer it tests, the helpers
apart in tests/support/ and tests/apps/, one conftest.py, and every path of tests/ a page names still there."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
LAYERS = {"core", "rest", "grpc", "openai", "python_backend", "declarations", "hosts", "docs", "e2e", "package"}
HELPERS = {"support", "apps"}
TOP_FILES = {"__init__.py", "conftest.py", "README.md"}
README = (TESTS / "README.md").read_text()


def folders() -> set[str]:
    return {
        path.name
        for path in TESTS.iterdir()
        if path.is_dir() and path.name != "__pycache__" and not path.name.startswith(".")
    }


def test_every_test_module_sits_in_the_folder_of_a_layer() -> None:
    misplaced = [
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("test_*.py")
        if path.parent.parent != TESTS or path.parent.name not in LAYERS
    ]
    assert misplaced == [], "a test module goes in the folder of the layer it tests (tests/README.md)"


def test_tests_holds_the_layers_and_the_helpers_and_nothing_else() -> None:
    assert folders() == LAYERS | HELPERS
    assert {path.name for path in TESTS.iterdir() if path.is_file()} == TOP_FILES
    assert [folder for folder in sorted(folders()) if not (TESTS / folder / "__init__.py").is_file()] == []
    assert sorted(TESTS.rglob("conftest.py")) == [TESTS / "conftest.py"], "one conftest.py, tests/conftest.py"


def test_the_readme_says_what_each_folder_holds() -> None:
    assert [folder for folder in sorted(LAYERS | HELPERS) if f"`tests/{folder}/`" not in README] == []


# The pages and sources that may name a path of tests/; CHANGELOG.md keeps the paths of its time.
PAGES = [ROOT / "README.md", ROOT / "pyproject.toml", *(ROOT / "docs").glob("*.md"), *(ROOT / "bench").glob("*.md")]
SOURCES = {".py", ".pyi", ".proto", ".md"}
NAMED = re.compile(r"(?<![\w/.-])tests/[\w/.-]*[\w/]")


def named_paths(text: str) -> set[str]:
    return set(NAMED.findall(text))


def test_every_path_of_tests_a_page_or_a_source_names_is_there() -> None:
    sources = [path for folder in (ROOT / "oip_asgi", TESTS) for path in folder.rglob("*") if path.suffix in SOURCES]
    missing = [
        f"{page.relative_to(ROOT)}: {named}"
        for page in sorted([*PAGES, *sources])
        for named in sorted(named_paths(page.read_text()))
        if not (ROOT / named).exists()
    ]
    assert missing == [], "paths of tests/ that moved or went"


def test_the_path_check_reads_paths_in_prose_code_and_commands() -> None:
    text = "in `tests/core/test_core.py`, (tests/rest/fuzz/corpus) and cat tests/README.md; not bench/tests/x.py"
    assert named_paths(text) == {"tests/core/test_core.py", "tests/rest/fuzz/corpus", "tests/README.md"}
