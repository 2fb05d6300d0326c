"""scikit-learn estimators: skops files, and joblib or pickle files the caller says they trust.

Outputs are named as MLServer's sklearn runtime names them (``predict``, ``predict_proba``,
``transform``), so its clients keep working; a Pipeline's last step decides which it has.
"""

from __future__ import annotations

import json
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..datatypes import datatype_of
from ._common import (
    AdvisedError,
    FileModel,
    MissingExtra,
    ModelFileError,
    Runner,
    batch_rows,
    check_options,
    require,
    spec,
)

_SKOPS_INSTEAD = (
    "Better, save the model with skops (skops.io.dump(model, 'model.skops')), which runs no code it was not told "
    "to trust"
)


def _pickle_refused(file: Path) -> AdvisedError:
    problem = (
        f"model file {str(file)!r} is a pickle: loading a pickle runs whatever code it holds, so a joblib or "
        "pickle file is loaded only when you say you trust it"
    )
    return AdvisedError(
        problem,
        {
            "python": f": Model.from_file({str(file)!r}, trusted=True). {_SKOPS_INSTEAD}",
            "command line": f": add --trust-pickles to oip-asgi serve. {_SKOPS_INSTEAD}",
            "repository": f": {_trusted_parameter('true')} in its config.pbtxt. {_SKOPS_INSTEAD}",
        },
    )


def _types_refused(file: Path, refused: list[str]) -> AdvisedError:
    return AdvisedError(
        f"model file {str(file)!r} holds types skops does not trust by default: {', '.join(refused)}",
        {
            "python": f"; if you trust them: Model.from_file({str(file)!r}, trusted={refused!r})",
            "command line": f"; if you trust them, add --trust-skops-types {','.join(refused)} to oip-asgi serve",
            "repository": "; if you trust them: "
            + _trusted_parameter(",".join(refused))
            + " in its config.pbtxt (or the value true)",
        },
    )


def _trusted_parameter(value: str) -> str:
    """The config.pbtxt parameter by which a repository's model trusts its file: "true", or skops types."""
    return f'parameters {{ key: "trusted" value: {{ string_value: "{value}" }} }}'


def read(file: Path, options: dict[str, Any], declared: Mapping[str, Any]) -> FileModel:
    check_options(options, ("trusted",), "sklearn")
    trusted = options.get("trusted", False)
    # A skops file is named so, or is a zip archive whatever its name; anything else is a pickle (joblib's or plain).
    skops = file.suffix.lower() == ".skops" or zipfile.is_zipfile(file)
    estimator = _skops_load(file, trusted) if skops else _pickle_load(file, trusted)
    return describe(estimator, file)


def _skops_load(file: Path, trusted: bool | Sequence[str]) -> Any:
    sio = require("skops.io", f"model file {file.name!r} (skops)")
    try:
        untrusted = list(sio.get_untrusted_types(file=file))
        allowed = untrusted if trusted is True else [] if trusted is False else list(trusted)
        refused = [name for name in untrusted if name not in allowed]
        if refused:
            raise _types_refused(file, refused)
        return sio.load(file, trusted=allowed)
    except AdvisedError:
        raise
    except Exception as exc:  # skops raises whatever its zip, json or the estimator's own code raise
        raise ModelFileError(f"cannot read model file {str(file)!r} with skops: {type(exc).__name__}: {exc}") from exc


def _pickle_load(file: Path, trusted: bool | Sequence[str]) -> Any:
    if trusted is not True:
        raise _pickle_refused(file)
    joblib = require("joblib", f"model file {file.name!r} (joblib)")
    try:
        return joblib.load(file)  # reads plain pickles too
    except Exception as exc:
        raise ModelFileError(f"cannot read model file {str(file)!r}: {type(exc).__name__}: {exc}") from exc


def describe(estimator: Any, file: Path) -> FileModel:
    """The model an estimator (or Pipeline) makes: its methods as outputs, its classes as labels."""
    base = require("sklearn.base", f"model file {file.name!r}")
    if not any(hasattr(estimator, method) for method in ("predict", "transform")):
        raise ModelFileError(
            f"model file {str(file)!r} holds a {type(estimator).__name__}, which has neither predict nor transform"
        )
    features = int(getattr(estimator, "n_features_in_", -1))
    feature_names = [str(name) for name in getattr(estimator, "feature_names_in_", ())]
    outputs = []
    labels: dict[str, list[str]] = {}
    classes = getattr(estimator, "classes_", None) if base.is_classifier(estimator) else None
    if hasattr(estimator, "predict"):
        outputs.append(spec("predict", *_prediction(base, estimator, classes)))
    if hasattr(estimator, "predict_proba") and classes is not None and np.ndim(classes) == 1:
        outputs.append(spec("predict_proba", "FP64", [-1, len(classes)]))
        labels["predict_proba"] = [str(label) for label in classes]
    if hasattr(estimator, "transform"):
        outputs.append(spec("transform", "FP64", [-1, _transformed_width(estimator)]))
    if feature_names:
        # Fitted on a DataFrame, it is called with one: without pandas it could serve no request, so it fails its load.
        require("pandas", f"model file {file.name!r}, fitted on named columns ({', '.join(feature_names)}),")
    properties = {"estimator": type(estimator).__name__}
    if feature_names:
        properties["feature_names"] = json.dumps(feature_names)
    runner = _Estimator(estimator, [output.name for output in outputs], feature_names, features, file.name)
    _warm_up(runner, features, file)
    return FileModel(
        predict=runner,
        inputs=[spec("input-0", "FP64", [-1, features])],
        outputs=outputs,
        labels=labels,
        properties=properties,
        batches_rows=True,
    )


def _warm_up(runner: _Estimator, features: int, file: Path) -> None:
    """One row of zeros through the estimator, so that a library its steps import only when called is missing
    now, failing the load, rather than at every request."""
    if features <= 0:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zeros may be an odd row for it: what it says of them is no news
        try:
            runner(**{"input-0": np.zeros((1, features))})
        except ImportError as exc:
            raise MissingExtra(f"model file {str(file)!r} cannot run: {type(exc).__name__}: {exc}") from exc
        except Exception:
            pass  # zeros may be no valid row for it; a request's own rows will tell


def _prediction(base: Any, estimator: Any, classes: Any) -> tuple[str, list[int]]:
    if classes is not None and np.ndim(classes) == 1:
        return datatype_of(np.asarray(classes).dtype) or "BYTES", [-1]
    if base.is_outlier_detector(estimator) or _is_clusterer(base, estimator):
        return "INT64", [-1]  # +1 / -1 for inliers and outliers; the cluster of each row
    targets = getattr(estimator, "n_outputs_", None)
    if targets is None:
        coefficients = getattr(estimator, "coef_", None)
        targets = coefficients.shape[0] if coefficients is not None and np.ndim(coefficients) == 2 else 1
    return "FP64", [-1] if targets == 1 else [-1, int(targets)]


def _is_clusterer(base: Any, estimator: Any) -> bool:
    is_clusterer = getattr(base, "is_clusterer", None)  # scikit-learn 1.6 on; before, the attribute said it
    if is_clusterer is not None:
        return bool(is_clusterer(estimator))
    return getattr(estimator, "_estimator_type", None) == "clusterer"


def _transformed_width(estimator: Any) -> int:
    try:
        return len(estimator.get_feature_names_out())
    except Exception:  # not every transformer can tell before it runs
        return -1


class _Estimator(Runner):
    """The estimator's methods on one table of rows, as named outputs."""

    def __init__(self, estimator: Any, methods: list[str], feature_names: list[str], features: int, file: str) -> None:
        self.estimator = estimator
        self.outputs = methods
        self.feature_names = feature_names
        self.features = features
        self.file = file

    def __repr__(self) -> str:
        return f"<{type(self.estimator).__name__} from {self.file!r}>"

    def __call__(self, **inputs: np.ndarray) -> Mapping[str, np.ndarray]:
        (name, array), *_ = inputs.items()
        rows: Any = batch_rows(array, name, self.features)
        if self.feature_names:
            # Fitted on a DataFrame: its columns by name (a ColumnTransformer selects them so), not a bare array.
            pandas = require("pandas", f"model file {self.file!r}, fitted on named columns,")
            rows = pandas.DataFrame(rows, columns=self.feature_names)
        return {method: np.asarray(getattr(self.estimator, method)(rows)) for method in self.outputs}
