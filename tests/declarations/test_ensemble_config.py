"""An ensemble's config.pbtxt read and checked on its own (`_declarations/repository/_ensemble.py`).

What can be told from the config alone is refused in Triton's words, the texts Triton's own
qa/L0_model_config expects (autofill_noplatform/ensemble/*/expected); a cycle among the steps is named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from oip_asgi._declarations.repository import RepositoryError, composing_models, read_model

Tensor = tuple[str, str, Sequence[int]]
StepSpec = tuple[str, Mapping[str, str], Mapping[str, str]]


def ensemble_config(
    name: str,
    steps: Sequence[StepSpec],
    *,
    inputs: Sequence[Tensor] = (("IN", "TYPE_INT32", [-1]),),
    outputs: Sequence[Tensor] = (("OUT", "TYPE_INT32", [-1]),),
    head: str = 'platform: "ensemble"',
    extra: str = "",
) -> str:
    """An ensemble's config.pbtxt: `steps` as (model, its input -> ensemble tensor, its output -> ensemble tensor)."""

    def tensors(kind: str, declared: Sequence[Tensor]) -> str:
        items = ", ".join(
            f'{{ name: "{n}", data_type: {t}, dims: [ {", ".join(map(str, d))} ] }}' for n, t, d in declared
        )
        return f"{kind} [ {items} ]"

    def step(model: str, taken: Mapping[str, str], made: Mapping[str, str]) -> str:
        maps = [f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in taken.items()]
        maps += [f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in made.items()]
        named = f'model_name: "{model}" ' if model else ""
        return f"{{ {named}model_version: -1 {' '.join(maps)} }}"

    scheduling = f"ensemble_scheduling {{ step [ {', '.join(step(*spec) for spec in steps)} ] }}" if steps else ""
    return "\n".join([f'name: "{name}"', head, tensors("input", inputs), tensors("output", outputs), scheduling, extra])


def write_ensemble(root: Path, name: str, config: str, versions: Sequence[str] = ("1",)) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for version in versions:
        (folder / version).mkdir(parents=True, exist_ok=True)  # an ensemble's version folders are empty
    (folder / "config.pbtxt").write_text(config)
    return folder


CHAIN: list[StepSpec] = [("add", {"x": "IN"}, {"y": "mid"}), ("double", {"a": "mid"}, {"b": "OUT"})]


def test_an_ensemble_reads_as_its_versions_declaring_its_tensors_and_its_steps(tmp_path: Path) -> None:
    write_ensemble(
        tmp_path,
        "pipe",
        ensemble_config("pipe", CHAIN, extra='parameters { key: "team" value: { string_value: "ml" } }'),
        ("1", "2"),
    )
    read = read_model(tmp_path, "pipe")
    assert read.ensemble is not None and read.warnings == []
    assert [step.model_name for step in read.ensemble.steps] == ["add", "double"]
    assert read.ensemble.steps[0].input_map == {"x": "IN"} and read.ensemble.steps[1].output_map == {"b": "OUT"}
    assert read.ensemble.models == ("add", "double")
    assert [model.version for model in read.versions] == ["2"]  # the default policy: the latest version
    (model,) = read.versions
    assert model.platform == "ensemble" and model.properties == {"team": "ml"}
    assert [(spec.name, spec.datatype, list(spec.shape)) for spec in model.inputs or ()] == [("IN", "INT32", [-1])]
    assert model.max_batch_size is None and not model.decoupled  # the core serves it: its steps batch, not it
    assert read.config is not None
    assert read.config["platform"] == "ensemble" and "backend" not in read.config  # Triton's: no backend
    assert read.config["ensemble_scheduling"]["step"][0] == {
        "model_name": "add", "model_version": -1, "input_map": {"x": "IN"}, "output_map": {"y": "mid"}
    }  # fmt: skip
    assert composing_models(tmp_path, "pipe") == ("add", "double")
    assert composing_models(tmp_path, "nowhere") is None


def test_fields_an_ensemble_does_not_act_on_are_named_in_its_warning(tmp_path: Path) -> None:
    extra = "max_batch_size: 8\nresponse_cache { enable: true }\nmodel_transaction_policy { decoupled: true }"
    inputs, outputs = (("IN", "TYPE_INT32", [4]),), (("OUT", "TYPE_INT32", [4]),)
    write_ensemble(tmp_path, "pipe", ensemble_config("pipe", CHAIN, inputs=inputs, outputs=outputs, extra=extra))
    read = read_model(tmp_path, "pipe")
    # Triton decides whether an ensemble is decoupled from its steps; and no response is cached here.
    assert read.warnings == ["config fields not acted on: model_transaction_policy, response_cache"]
    (model,) = read.versions
    assert list(model.inputs[0].shape) == [-1, 4] and model.max_batch_size is None  # type: ignore[index]


ONE = ("IN", "TYPE_INT32", [-1])
SCHEDULED = 'platform: "ensemble"\nensemble_scheduling { }'
TRITONS_REFUSALS = {
    "no_step": (
        ensemble_config("e", []).replace('platform: "ensemble"', SCHEDULED),
        "must specify 'step' for ensemble 'e'",
    ),
    "no_model_name": (
        ensemble_config("e", [CHAIN[0], ("", {"a": "mid"}, {"b": "OUT"})]),
        "must specify 'model_name' in step 1 of ensemble 'e'",
    ),
    "no_input_map": (
        ensemble_config("e", [CHAIN[0], ("double", {}, {"b": "OUT"})]),
        "must specify 'input_map' in step 1 of ensemble 'e'",
    ),
    "no_output_map": (
        ensemble_config("e", [CHAIN[0], ("double", {"a": "mid"}, {})]),
        "must specify 'output_map' in step 1 of ensemble 'e'",
    ),
    "has_backend": (
        ensemble_config("e", CHAIN, extra='backend: "python"'),
        "Ensemble model 'e' must have platform type 'ensemble' and empty backend type",
    ),
    "instance_group_set": (
        ensemble_config("e", CHAIN, extra="instance_group [ { kind: KIND_CPU } ]"),
        "instance group should not be specified for ensemble 'e'",
    ),
    "optimization_set": (
        ensemble_config("e", CHAIN, extra="optimization { priority: PRIORITY_MAX }"),
        "optimization should not be specified for ensemble 'e'",
    ),
    "model_warmup_set": (
        ensemble_config("e", CHAIN, extra='model_warmup [ { name: "w" batch_size: 1 } ]'),
        "model_warmup can not be specified for ensemble 'e'",
    ),
    "ensemble_scheduling_no_set": (
        ensemble_config("e", []),
        "ensemble scheduling must be set for ensemble e whose platform is ensemble",
    ),
    "scheduling_on_another_platform": (
        ensemble_config("e", CHAIN, head='backend: "python"'),
        "ensemble scheduling cannot be set for model 'e' whose platform is not ensemble",
    ),
    "output_to_tensor_overmapped": (
        ensemble_config("e", [*CHAIN, ("add", {"x": "mid"}, {"y": "mid"})]),
        "ensemble tensor 'mid' can appear in an output map only once for ensemble 'e' step 2",
    ),
    "unreachable_input": (
        ensemble_config("e", CHAIN, inputs=(ONE, ("data_2", "TYPE_INT32", [-1]))),
        "ensemble input 'data_2' for ensemble e' is not used",
    ),
    "unreachable_output": (
        ensemble_config("e", CHAIN, outputs=(("OUT", "TYPE_INT32", [-1]), ("prob_2", "TYPE_INT32", [-1]))),
        "ensemble output 'prob_2' for ensemble e' is not used",
    ),
    "unreachable_output_3": (
        ensemble_config(
            "e",
            [*CHAIN, ("add", {"x": "not_written_tensor"}, {"y": "prob_2"})],
            outputs=(("OUT", "TYPE_INT32", [-1]), ("prob_2", "TYPE_INT32", [-1])),
        ),
        "output 'prob_2' for ensemble 'e' is not written: at least one of its depending tensors, 'not_written_tensor', "
        "is not connected",
    ),
    "redundant_tensor_as_output": (
        ensemble_config("e", [*CHAIN, ("add", {"x": "IN"}, {"y": "temp_tensor_2"})]),
        "ensemble tensor 'temp_tensor_2' is unused in ensemble 'e'",
    ),
}


@pytest.mark.parametrize(("config", "message"), list(TRITONS_REFUSALS.values()), ids=list(TRITONS_REFUSALS))
def test_what_the_config_alone_shows_wrong_is_refused_in_tritons_words(
    tmp_path: Path, config: str, message: str
) -> None:
    write_ensemble(tmp_path, "e", config)
    with pytest.raises(RepositoryError) as refused:
        read_model(tmp_path, "e")
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("steps", "cycle"),
    [
        ([("add", {"x": "IN", "z": "t2"}, {"y": "OUT"}), ("double", {"a": "OUT"}, {"b": "t2"})],
         "step 0 ('add') -> step 1 ('double') -> step 0 ('add')"),
        ([("add", {"x": "IN", "z": "OUT"}, {"y": "OUT"})], "step 0 ('add') -> step 0 ('add')"),
    ],
    ids=["two steps", "one step taking its own output"],
)  # fmt: skip
def test_steps_that_wait_for_one_another_are_refused_naming_the_cycle(
    tmp_path: Path, steps: list[StepSpec], cycle: str
) -> None:
    write_ensemble(tmp_path, "e", ensemble_config("e", steps))
    with pytest.raises(RepositoryError) as refused:
        read_model(tmp_path, "e")
    assert str(refused.value) == (
        f"in ensemble 'e', steps form a cycle, so none of them can run: {cycle} (each takes a tensor the one after "
        "it makes)"
    )


def test_an_ensemble_needs_a_version_folder_as_in_triton(tmp_path: Path) -> None:
    write_ensemble(tmp_path, "e", ensemble_config("e", CHAIN), versions=())
    with pytest.raises(RepositoryError, match="has no version folders"):
        read_model(tmp_path, "e")
