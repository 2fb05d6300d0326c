"""What XGBoost and LightGBM models share: from an objective, which outputs a model has and how to make them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..spec import TensorSpec
from ._common import Runner, batch_rows, spec


@dataclass(frozen=True)
class Task:
    """A tree model's task, as its objective says: binary, multi-class, or a number per row (or per target)."""

    kind: str  # "binary", "multiclass" or "regression"
    classes: int = 0
    targets: int = 1

    def outputs(self, datatype: str) -> list[TensorSpec]:
        if self.kind == "regression":
            return [spec("predict", datatype, [-1] if self.targets == 1 else [-1, self.targets])]
        return [spec("predict", "INT64", [-1]), spec("predict_proba", datatype, [-1, self.classes])]


class TreeModel(Runner):
    """`probabilities` (or the predicted values) of a table of rows, as MLServer names the outputs."""

    def __init__(
        self, task: Task, score: Callable[[np.ndarray], np.ndarray], features: int, file: str, datatype: np.dtype
    ) -> None:
        self.task = task
        self.score = score
        self.features = features
        self.file = file
        self.datatype = datatype
        self.outputs = ["predict"] if task.kind == "regression" else ["predict", "predict_proba"]

    def __repr__(self) -> str:
        return f"<{self.task.kind} model {self.file!r}>"

    def __call__(self, **inputs: np.ndarray) -> Mapping[str, np.ndarray]:
        (name, array), *_ = inputs.items()
        scores = np.asarray(self.score(batch_rows(array, name, self.features)), dtype=self.datatype)
        if self.task.kind == "regression":
            return {"predict": scores}
        if self.task.kind == "binary" and scores.ndim == 1:  # the positive class's probability
            scores = np.stack([1 - scores, scores], axis=1)
        results = {"predict": np.argmax(scores, axis=1).astype(np.int64), "predict_proba": scores}
        return {name: results[name] for name in self.outputs}
