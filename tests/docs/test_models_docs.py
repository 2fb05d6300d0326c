"""docs/models.md: every recipe runs as written, in a directory of its own."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from tests.support.servers import ROOT

DOC = ROOT / "docs" / "models.md"
RECIPE = re.compile(r"<!-- recipe: (?P<name>\S+) -->\n```python\n(?P<code>.*?)```", re.DOTALL)
RECIPES = {match["name"]: match["code"] for match in RECIPE.finditer(DOC.read_text())}
pytestmark = pytest.mark.slow  # each recipe trains a model

LIBRARY = {"sklearn": "skops", "pickle": "joblib", "onnx": "skl2onnx", "xgboost": "xgboost", "lightgbm": "lightgbm"}


def test_every_format_has_a_recipe() -> None:
    assert set(RECIPES) == {*LIBRARY, "torch"}


@pytest.mark.parametrize("name", [*LIBRARY, pytest.param("torch", marks=pytest.mark.torch)], ids=str)
def test_the_recipe_runs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = LIBRARY.get(name, name)
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed")
    monkeypatch.chdir(tmp_path)
    exec(compile(RECIPES[name], f"docs/models.md ({name})", "exec"), {"__name__": f"recipe_{name}"})
