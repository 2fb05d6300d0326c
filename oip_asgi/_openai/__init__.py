"""The OpenAI-compatible wire: /v1/models, /v1/completions, /v1/chat/completions, /v1/embeddings over the core."""
