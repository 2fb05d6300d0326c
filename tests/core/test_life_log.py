"""A model's life in the server log, in Triton's words: each version's load (with how long it took), reload
and unload, at start and in the explicit and poll modes; failures were logged before (issue 30)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from oip_asgi import Model, ModelRepository, TensorSpec, oip_app
from tests.core.test_repository import broken_model, write_model
from tests.support.client import client

pytestmark = pytest.mark.anyio

LOADED = re.compile(r"successfully loaded '(?P<name>[^']+)' version (?P<version>\S+) in (?P<seconds>\d+\.\d{3}) s")


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The life lines logged so far, each once, and no more from then on."""
    found = [
        record.getMessage()
        for record in caplog.records
        if record.name == "oip_asgi" and record.getMessage().startswith("successfully ")
    ]
    caplog.clear()
    return found


def shortened(line: str) -> str:
    """`line` with its time cut out (it varies): "successfully loaded 'a' version 1"."""
    return re.sub(r" in \d+\.\d{3} s", "", line)


async def test_models_from_code_log_their_load_at_start_with_its_time_and_their_unload_at_shutdown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="oip_asgi")
    spec = {"inputs": [TensorSpec("x", "INT32", [-1])], "outputs": [TensorSpec("y", "INT32", [-1])]}
    app = oip_app(
        {
            "plain": Model(lambda x: x, **spec),  # type: ignore[arg-type]
            "slow": [
                Model(lambda x: x, version="1", load=lambda: np.ones(10), **spec),  # type: ignore[arg-type]
                Model(lambda x: x, version="2", load=lambda: None, **spec),  # type: ignore[arg-type]
            ],
        }
    )
    await app.load()
    logged = lines(caplog)
    assert sorted(map(shortened, logged)) == [
        "successfully loaded 'plain' version 1",
        "successfully loaded 'slow' version 1",
        "successfully loaded 'slow' version 2",
    ]
    assert all(LOADED.fullmatch(line) for line in logged)
    await app.load()  # loaded already: nothing new to tell
    assert lines(caplog) == []
    await app.core.close()
    assert sorted(lines(caplog)) == [
        "successfully unloaded 'plain' version 1",
        "successfully unloaded 'slow' version 1",
        "successfully unloaded 'slow' version 2",
    ]


async def test_a_failed_load_logs_no_success(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="oip_asgi")

    def broken() -> None:
        raise RuntimeError("weights missing")

    spec = {"inputs": [TensorSpec("x", "INT32", [-1])], "outputs": [TensorSpec("y", "INT32", [-1])]}
    app = oip_app({"m": Model(lambda x: x, load=broken, **spec)})  # type: ignore[arg-type]
    await app.load()
    assert any("failed to load" in record.getMessage() for record in caplog.records)
    assert lines(caplog) == []


async def test_explicit_mode_logs_each_load_reload_and_unload(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="oip_asgi")
    write_model(tmp_path, "a")
    write_model(tmp_path, "b")
    broken_model(tmp_path, "broken")
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit", load_models=["b"]))
    async with client(app) as http:
        await app.load()
        assert list(map(shortened, lines(caplog))) == ["successfully loaded 'b' version 1"]

        assert (await http.post("/repository/models/a/load")).status_code == 200
        assert list(map(shortened, lines(caplog))) == ["successfully loaded 'a' version 1"]
        assert (await http.post("/repository/models/a/load")).status_code == 200  # a reload: the new, then the old
        assert list(map(shortened, lines(caplog))) == [
            "successfully loaded 'a' version 1 (a reload: the versions served before unload)",
            "successfully unloaded 'a' version 1",
        ]

        assert (await http.post("/repository/models/broken/load")).status_code == 400
        assert lines(caplog) == []
        assert (await http.post("/repository/models/b/unload")).status_code == 200
        assert lines(caplog) == ["successfully unloaded 'b' version 1"]


async def test_poll_mode_logs_what_it_adds_reloads_and_removes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="oip_asgi")
    write_model(tmp_path, "a")
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="poll", repository_poll_secs=3600))
    control = app.core.control
    assert control is not None
    await app.load()
    assert list(map(shortened, lines(caplog))) == ["successfully loaded 'a' version 1"]
    write_model(tmp_path, "b")  # added
    write_model(tmp_path, "a", adds=10)  # changed
    await control.poll_once()
    assert sorted(map(shortened, lines(caplog))) == [
        "successfully loaded 'a' version 1 (a reload: the versions served before unload)",
        "successfully loaded 'b' version 1",
        "successfully unloaded 'a' version 1",
    ]
    for path in sorted((tmp_path / "b").rglob("*"), reverse=True):  # removed
        path.unlink() if path.is_file() else path.rmdir()
    (tmp_path / "b").rmdir()
    await control.poll_once()
    assert lines(caplog) == ["successfully unloaded 'b' version 1"]
    await app.core.close()
