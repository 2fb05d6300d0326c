"""W11 on LitServe: its `OpenAISpec` (/v1/chat/completions, stream and not) over a LitAPI whose `predict`
yields `max_tokens` one-token pieces, as LitServe's OpenAI examples write it. One API server, one worker, CPU."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _litserve  # siblings: the apps run as scripts
import litserve as ls
from _tokens import TOKEN


class Tokens(ls.LitAPI):
    def setup(self, device: Any) -> None:
        self.token = TOKEN

    def predict(self, request: Any, context: dict[str, Any]) -> Iterator[str]:
        for _ in range(int(context.get("max_tokens") or 16)):
            yield self.token


if __name__ == "__main__":
    _litserve.serve(Tokens(spec=ls.OpenAISpec()))
