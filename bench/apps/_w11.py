"""W11's shared terms: a model that answers a chat or a completion with `max_tokens` one-token pieces.

The model's own work is nil (the same small token each time): what is measured is each server's cost per
chunk of OpenAI's API (decoding the request, rendering the prompt, one chunk per piece, the end).
"""

from __future__ import annotations

MODEL = "tokens"
TOKEN = "token"
