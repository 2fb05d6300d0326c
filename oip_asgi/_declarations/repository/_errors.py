"""The one error a model folder's reader raises: a model the repository cannot serve, and why."""

from __future__ import annotations


class RepositoryError(Exception):
    """A model the repository cannot serve; the message is the reason (the index and a request's 503 show it)."""
