"""The classification extension: an output's top-k classes as ``"<value>:<index>[:<label>]"`` strings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._declarations.errors import BadRequest, quoted
from .number_text import number_texts


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values along the last axis, largest first, ties by lower index.

    Selection is partial (``np.partition``), so the class axis is never fully sorted; only the
    k winners are ordered.
    """
    classes = scores.shape[-1]
    k = min(k, classes)
    rows = scores.reshape(-1, classes)
    if rows.dtype.kind == "f" and np.isnan(rows).any():
        rows = np.where(np.isnan(rows), -np.inf, rows)  # NaN ranks last rather than breaking the order
    if k < classes:
        threshold = np.partition(rows, classes - k, axis=-1)[:, classes - k : classes - k + 1]
        above = rows > threshold
        # Of the values equal to the threshold, keep the lowest indices until each row holds k.
        tied = rows == threshold
        room = k - above.sum(axis=-1, keepdims=True)
        chosen = above | (tied & (np.cumsum(tied, axis=-1) <= room))
        indices = np.nonzero(chosen)[1].reshape(-1, k)
    else:
        indices = np.broadcast_to(np.arange(classes), rows.shape)
    values = np.take_along_axis(rows, indices, axis=-1)
    # A stable ascending sort of the reversed row, reversed, is descending with ties by lower index.
    order = np.argsort(values[:, ::-1], axis=-1, kind="stable")[:, ::-1]
    return np.take_along_axis(indices, k - 1 - order, axis=-1).reshape(*scores.shape[:-1], k)


def classify(name: str, scores: np.ndarray, datatype: str, k: int, labels: Sequence[str] | None) -> np.ndarray:
    """The BYTES tensor replacing `scores`: its last axis becomes the top `k` classes (`labels` name them all)."""
    if datatype in ("BOOL", "BYTES"):
        raise BadRequest(f"output {quoted(name)} is {datatype}; classification needs a numeric output")
    if scores.ndim == 0 or scores.shape[-1] == 0:
        raise BadRequest(f"output {quoted(name)} has shape {list(scores.shape)}, which has no classes to rank")
    indices = top_k_indices(scores, k)
    values = np.take_along_axis(scores, indices, axis=-1)
    texts = number_texts(values)
    flat_indices = indices.ravel().tolist()
    result = np.empty(len(texts), dtype=object)
    for position, (text, index) in enumerate(zip(texts, flat_indices, strict=True)):
        if labels is not None:
            result[position] = f"{text}:{index}:{labels[index]}".encode()
        else:
            result[position] = f"{text}:{index}".encode()
    return result.reshape(indices.shape)
