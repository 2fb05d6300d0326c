"""`ModelRepository`: a model repository folder to serve, and how (Triton's model-control options)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

ModelControlMode = Literal["none", "explicit", "poll"]
MODES: tuple[ModelControlMode, ...] = ("none", "explicit", "poll")
DEFAULT_POLL_SECONDS = 15.0


@dataclass(frozen=True)
class ModelRepository:
    """A model repository directory to serve, laid out as Triton's (docs/repository.md), and how.

    `model_control_mode` is Triton's: ``"none"`` (every model loaded at start; no load or unload),
    ``"explicit"`` (the `load_models` at start, ``"*"`` for all, then what the repository API asks) or
    ``"poll"`` (every model, then the directory checked every `repository_poll_secs`).
    `allow_file_overrides` lets a load request write model files into the model's folder (Triton's
    ``file:`` parameters); off by default.
    """

    path: str | os.PathLike[str]
    model_control_mode: ModelControlMode = "none"
    load_models: Sequence[str] = ()
    repository_poll_secs: float = DEFAULT_POLL_SECONDS
    allow_file_overrides: bool = False

    def __post_init__(self) -> None:
        mode = self.model_control_mode
        if mode not in MODES:
            raise ValueError(f"model_control_mode must be one of {', '.join(MODES)}; got {mode!r}")
        if self.load_models and mode != "explicit":
            raise ValueError("load_models names the models to load at start in the explicit mode only")
        if not self.repository_poll_secs > 0:
            raise ValueError(f"repository_poll_secs must be above 0, got {self.repository_poll_secs!r}")
