"""``pb_utils.ModelConfig``: the config that ``auto_complete_config`` completes, with Triton's rules; and
``pb_utils``'s readers of a config (its JSON, as ``args["model_config"]`` holds it).

A model may set the batch size, turn on dynamic batching, set the transaction policy, and add inputs
and outputs; what it adds must agree with what config.pbtxt already says of the same tensor.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_TENSOR_KEYS = {"input": ("name", "data_type", "dims", "optional"), "output": ("name", "data_type", "dims")}


class ModelConfig:
    def __init__(self, model_config: str | Mapping[str, Any]) -> None:
        config = json.loads(model_config) if isinstance(model_config, str) else dict(model_config)
        config.setdefault("max_batch_size", 0)
        config.setdefault("input", [])
        config.setdefault("output", [])
        self._model_config: dict[str, Any] = config

    def as_dict(self) -> dict[str, Any]:
        return self._model_config

    def max_batch_size(self) -> int:
        size: int = self._model_config["max_batch_size"]
        return size

    def _name(self) -> str:
        return str(self._model_config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        configured = self._model_config["max_batch_size"]
        if configured > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {configured}, but in auto-complete-config function for "
                f"model '{self._name()}' specified max_batch_size {max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._model_config:
                raise ValueError(
                    f"configuration specified scheduling_choice as '{other}', but auto-complete-config function "
                    f"for model '{self._name()}' tries to set scheduling_choice as 'dynamic_batching'"
                )
        self._model_config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, transaction_policy_dict: Mapping[str, Any]) -> None:
        unknown = [key for key in transaction_policy_dict if key != "decoupled"]
        if unknown:
            raise ValueError(
                f"model transaction property in auto-complete-config function for model '{self._name()}' "
                f"contains property other than 'decoupled': {', '.join(unknown)}"
            )
        decoupled = bool(transaction_policy_dict.get("decoupled", False))
        configured = self._model_config.get("model_transaction_policy")
        if configured is not None and bool(configured.get("decoupled", False)) != decoupled:
            raise ValueError(
                f"trying to change decoupled property in auto-complete-config for model '{self._name()}', "
                "which is already set in its configuration"
            )
        self._model_config["model_transaction_policy"] = {"decoupled": decoupled}

    def add_input(self, input: Mapping[str, Any]) -> None:
        self._add("input", input)

    def add_output(self, output: Mapping[str, Any]) -> None:
        self._add("output", output)

    def _add(self, kind: str, tensor: Mapping[str, Any]) -> None:
        allowed = _TENSOR_KEYS[kind]
        name = tensor.get("name")
        extra = [key for key in tensor if key not in allowed]
        if extra:
            raise ValueError(
                f"{kind} '{name}' in auto-complete-config function for model '{self._name()}' contains property "
                f"other than {', '.join(repr(key) for key in allowed)}: {', '.join(extra)}"
            )
        for key in ("name", "data_type", "dims"):
            if key not in tensor:
                what = f"{kind} '{name}'" if name else kind
                raise ValueError(
                    f"{what} in auto-complete-config function for model '{self._name()}' is missing '{key}' property."
                )
        added = {**tensor, "dims": [int(dim) for dim in tensor["dims"]]}
        for current in self._model_config[kind]:
            if current["name"] != name:
                continue
            if current.get("data_type", "TYPE_INVALID") not in ("TYPE_INVALID", added["data_type"]):
                raise ValueError(
                    f"unable to load model '{self._name()}', configuration expects datatype {current['data_type']} "
                    f"for {kind} '{name}', model provides {added['data_type']}"
                )
            if current.get("dims") and list(current["dims"]) != added["dims"]:
                raise ValueError(
                    f"model '{self._name()}', tensor '{name}': the model expects dims {added['dims']} but the model "
                    f"configuration specifies dims {list(current['dims'])}"
                )
            current.update(added)
            return
        self._model_config[kind].append(added)


def get_input_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return _tensor_config(model_config, "input", name)


def get_output_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return _tensor_config(model_config, "output", name)


def _tensor_config(model_config: Mapping[str, Any], kind: str, name: str) -> dict[str, Any] | None:
    for tensor in model_config.get(kind, []):
        if tensor["name"] == name:
            found: dict[str, Any] = tensor
            return found
    return None


def using_decoupled_model_transaction_policy(model_config: Mapping[str, Any]) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))
