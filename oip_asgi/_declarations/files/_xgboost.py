"""XGBoost models (JSON, UBJSON or the legacy binary), predicted in place from numpy rows."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._common import FileModel, ModelFileError, check_options, require, spec
from ._trees import Task, TreeModel


def read(file: Path, options: dict[str, Any], declared: Mapping[str, Any]) -> FileModel:
    check_options(options, (), "xgboost")
    xgb = require("xgboost", f"model file {file.name!r}")
    try:
        if file.suffix.lower() in (".json", ".ubj"):
            booster = xgb.Booster(model_file=str(file))
        else:  # from its bytes, XGBoost tells JSON, UBJSON and its legacy binary apart without guessing by name
            booster = xgb.Booster()
            booster.load_model(bytearray(file.read_bytes()))
    except Exception as exc:  # XGBoostError, or whatever its parser raised
        raise ModelFileError(f"cannot load XGBoost model file {str(file)!r}: {type(exc).__name__}: {exc}") from exc
    learner = json.loads(booster.save_config())["learner"]
    objective = learner["objective"]["name"]
    parameters = learner["learner_model_param"]
    task = _task(objective, int(parameters.get("num_class", 0)), int(parameters.get("num_target", 1)))
    features = booster.num_features()
    properties = {"objective": objective}
    if booster.feature_names:
        properties["feature_names"] = json.dumps(list(booster.feature_names))
    return FileModel(
        predict=TreeModel(task, _scorer(booster, task, objective), features, file.name, np.dtype(np.float32)),
        inputs=[spec("input-0", "FP32", [-1, features])],
        outputs=task.outputs("FP32"),
        properties=properties,
        batches_rows=True,
    )


def _task(objective: str, classes: int, targets: int) -> Task:
    if objective in ("binary:logistic", "binary:logitraw"):
        return Task("binary", classes=2)
    if objective in ("multi:softprob", "multi:softmax"):
        return Task("multiclass", classes=classes)
    return Task("regression", targets=targets)  # reg:*, count:*, survival:*, rank:*, binary:hinge's 0/1


def _scorer(booster: Any, task: Task, objective: str) -> Any:
    # inplace_predict is thread-safe and releases the GIL; margins make softmax's and logitraw's probabilities.
    if objective == "multi:softmax":
        return lambda rows: _softmax(booster.inplace_predict(rows, predict_type="margin"))
    if objective == "binary:logitraw":
        return lambda rows: 1 / (1 + np.exp(-booster.inplace_predict(rows, predict_type="margin")))
    return booster.inplace_predict


def _softmax(margins: np.ndarray) -> np.ndarray:
    exponentials = np.exp(margins - margins.max(axis=1, keepdims=True))
    return np.asarray(exponentials / exponentials.sum(axis=1, keepdims=True))
