"""LightGBM text models: the objective and feature names read from the model's header."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._common import FileModel, ModelFileError, check_options, require, spec
from ._trees import Task, TreeModel


def read(file: Path, options: dict[str, Any], declared: Mapping[str, Any]) -> FileModel:
    check_options(options, (), "lightgbm")
    lgb = require("lightgbm", f"model file {file.name!r}")
    try:
        booster = lgb.Booster(model_file=str(file))
    except Exception as exc:  # LightGBMError, or whatever its parser raised
        raise ModelFileError(f"cannot load LightGBM model file {str(file)!r}: {type(exc).__name__}: {exc}") from exc
    objective = _header(file).get("objective", "")
    task = _task(objective, booster.num_model_per_iteration())
    features = booster.num_feature()
    properties = {"objective": objective}
    names = booster.feature_name()
    if names != [f"Column_{index}" for index in range(len(names))]:  # LightGBM's names for unnamed features
        properties["feature_names"] = json.dumps(names)
    return FileModel(
        predict=TreeModel(task, booster.predict, features, file.name, np.dtype(np.float64)),
        inputs=[spec("input-0", "FP64", [-1, features])],
        outputs=task.outputs("FP64"),
        properties=properties,
        batches_rows=True,
    )


def _header(file: Path) -> dict[str, str]:
    """The ``key=value`` lines before the first tree (reading the file again is cheaper than dumping every tree)."""
    header: dict[str, str] = {}
    with file.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.startswith("Tree="):
                break
            key, equals, value = line.strip().partition("=")
            if equals:
                header[key] = value
    return header


def _task(objective: str, trees_per_iteration: int) -> Task:
    name = objective.split(" ", 1)[0]
    if name in ("binary", "cross_entropy", "xentropy"):
        return Task("binary", classes=2)
    if name in ("multiclass", "softmax", "multiclassova", "multiclass_ova", "ova", "ovr"):
        return Task("multiclass", classes=trees_per_iteration)
    return Task("regression")  # regression, huber, poisson, lambdarank, ...
