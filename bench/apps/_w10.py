"""W10's shared terms: one model, `tokens`, that answers a request with `max_tokens` one-token responses.

Inputs `text_input` BYTES [1] and `max_tokens` INT32 [1]; each response carries `text_output` BYTES [1], the
same small token every time (the model's own work is nil: what is measured is the server's cost per frame).
"""

from __future__ import annotations

MODEL = "tokens"
TOKEN = b"token"
