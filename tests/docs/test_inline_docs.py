"""What the pages say about a sync model on the event loop is what `_core/inline.py` decides: the budget, the
streak a plain `def` needs, and the opt-out."""

from __future__ import annotations

import re

import pytest

from oip_asgi import Model
from oip_asgi._core import inline
from tests.support.servers import ROOT

PAGES = ["README.md", "CHANGELOG.md", "docs/models.md"]


def flat(page: str) -> str:
    return re.sub(r"\s+", " ", (ROOT / page).read_text())


@pytest.mark.parametrize("page", ["README.md", "CHANGELOG.md"])
def test_the_pages_state_the_budget_and_the_streak_inline_py_uses(page: str) -> None:
    text = flat(page)
    assert f"last {inline.FUNCTION_STREAK} calls in a row were measured under {inline.BUDGET_NS // 1000} µs" in text
    assert "inline=False" in text


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_budget_is_the_rules(page: str) -> None:
    said = re.findall(r"(\d+) µs\)?,? (?:about what the hop|two thread|of wall)", flat(page))
    budgets = {int(found) for found in said}
    assert budgets == {inline.BUDGET_NS // 1000}


def test_the_opt_out_the_pages_name_is_models_keyword() -> None:
    assert Model(lambda x: x, inline=False).inline is False
