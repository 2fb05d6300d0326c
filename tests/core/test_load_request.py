"""Triton's load request as typed arguments: the repository extension's parameters, and pb_utils.load_model's."""

from __future__ import annotations

import re

import pytest

from oip_asgi._core.load_request import LoadArguments, load_arguments, python_load_arguments
from oip_asgi._declarations.errors import BadRequest

REFUSED = [
    ({"config": "nope"}, "failed to load 'm': parameter config is not JSON: Expecting value"),
    ({"config": "[1]"}, "failed to load 'm': parameter config must be a JSON object"),
    ({"file:1/model.py": "text"}, "failed to load 'm': parameter 'file:1/model.py' must be bytes"),
    ({"file:1/model.py": b"x"}, "failed to load 'm': file parameters need a config parameter too"),
    ({"file:a": "text", "config": "nope"}, "parameter 'file:a' must be bytes"),  # in the parameters' order
]


def test_the_parameters_become_the_config_and_the_files() -> None:
    parameters = {"config": '{"backend": "python"}', "file:1/model.py": b"x", "other": 1}
    assert load_arguments("m", parameters) == LoadArguments({"backend": "python"}, {"1/model.py": b"x"})
    assert load_arguments("m", {}) == LoadArguments(None, None)
    assert load_arguments("m", {"config": b"{}"}) == LoadArguments({}, None)  # gRPC's bytes_param


@pytest.mark.parametrize(("parameters", "message"), REFUSED, ids=[message for _, message in REFUSED])
def test_parameters_are_refused_in_tritons_words(parameters: dict[str, object], message: str) -> None:
    with pytest.raises(BadRequest, match=re.escape(message)):
        load_arguments("m", parameters)


def test_pb_utils_load_model_arguments_are_checked_alike() -> None:
    assert python_load_arguments("m", "", None) == LoadArguments(None, None)
    assert python_load_arguments("m", "{}", {"1/model.py": b"x"}) == LoadArguments({}, {"1/model.py": b"x"})
    with pytest.raises(BadRequest, match="file parameters need a config parameter too"):
        python_load_arguments("m", "", {"1/model.py": b"x"})
    with pytest.raises(BadRequest, match="parameter config is not JSON"):
        python_load_arguments("m", "nope", None)
