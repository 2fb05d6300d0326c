"""What every wire tells, as this wire's messages: the core's metadata and statistics (typed values,
built into their messages field by field) and a served version's model configuration.

A model configuration is Triton's ModelConfig JSON, as the model configuration extension has it on
REST (derived from the declaration, or read from a repository's config.pbtxt); it is parsed into its
message once per served version, and its response kept serialized for as long as that version serves.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format

from .._core.metadata import ModelMetadata, ServerMetadata, TensorMetadata
from .._core.serving import ServedModel
from .._core.statistics import InferStatistics, ModelStats, StatisticDuration, StatisticsResponse
from .._protobuf import inference_pb2 as pb


def server_metadata_response(metadata: ServerMetadata) -> pb.ServerMetadataResponse:
    return pb.ServerMetadataResponse(name=metadata.name, version=metadata.version, extensions=metadata.extensions)


def model_metadata_response(metadata: ModelMetadata) -> pb.ModelMetadataResponse:
    return pb.ModelMetadataResponse(
        name=metadata.name,
        versions=metadata.versions,
        platform=metadata.platform,
        inputs=[_tensor(item) for item in metadata.inputs],
        outputs=[_tensor(item) for item in metadata.outputs],
        properties=metadata.properties,
    )


def _tensor(tensor: TensorMetadata) -> pb.ModelMetadataResponse.TensorMetadata:
    return pb.ModelMetadataResponse.TensorMetadata(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)


def statistics_response(statistics: StatisticsResponse) -> pb.ModelStatisticsResponse:
    return pb.ModelStatisticsResponse(model_stats=[_model_statistics(entry) for entry in statistics.model_stats])


def _model_statistics(entry: ModelStats) -> pb.ModelStatistics:
    return pb.ModelStatistics(
        name=entry.name,
        version=entry.version,
        last_inference=entry.last_inference,
        inference_count=entry.inference_count,
        execution_count=entry.execution_count,
        inference_stats=_inference_statistics(entry.inference_stats),
        batch_stats=[
            pb.InferBatchStatistics(
                batch_size=batch.batch_size,
                compute_input=_duration(batch.compute_input),
                compute_infer=_duration(batch.compute_infer),
                compute_output=_duration(batch.compute_output),
            )
            for batch in entry.batch_stats
        ],
    )


def _inference_statistics(stages: InferStatistics) -> pb.InferStatistics:
    return pb.InferStatistics(**{stage: _duration(getattr(stages, stage)) for stage in stages.__struct_fields__})


def _duration(duration: StatisticDuration) -> pb.StatisticDuration:
    return pb.StatisticDuration(count=duration.count, ns=duration.ns)


class ModelConfigs:
    """Each served version's ModelConfigResponse, serialized: built the first time it is asked for."""

    def __init__(self) -> None:
        # A reload or an unload serves new versions: the ones replaced leave with their responses.
        self._known: weakref.WeakKeyDictionary[ServedModel, bytes] = weakref.WeakKeyDictionary()

    def response(self, model: ServedModel, config: Callable[[ServedModel], dict[str, Any]]) -> bytes:
        """`model`'s response, whose configuration `config` tells (the core's ModelConfig JSON)."""
        known = self._known.get(model)
        if known is None:
            message = json_format.ParseDict({"config": config(model)}, pb.ModelConfigResponse())
            known = self._known[model] = message.SerializeToString()
        return known
