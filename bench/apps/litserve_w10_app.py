"""W10 on LitServe: a streaming LitAPI (`stream=True`) whose `predict` yields `max_tokens` tokens.

LitServe runs `predict` in its inference worker process and hands each encoded piece to the API server
process, which sends it as one chunk of a chunked response: `encode_response` yields a dict per token,
which LitServe writes as one JSON line ({"text_output": "token"}\\n). One API server, one worker, CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _litserve  # siblings: the apps run as scripts
import litserve as ls
from _tokens import TOKEN


class Tokens(ls.LitAPI):
    def setup(self, device: Any) -> None:
        self.token = TOKEN

    # Unannotated on purpose: LitServe reads the annotation to pick how to parse the body; without one it
    # hands over the JSON body as a dict.
    def decode_request(self, request):  # type: ignore[no-untyped-def]
        return int(request["max_tokens"])

    def predict(self, count: int) -> Iterator[str]:
        for _ in range(count):
            yield self.token

    def encode_response(self, outputs: Iterator[str]) -> Iterator[dict[str, str]]:
        for output in outputs:
            yield {"text_output": output}


if __name__ == "__main__":
    _litserve.serve(Tokens(stream=True, api_path="/predict"))
