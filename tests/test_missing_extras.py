"""A package of an extra missing: one line that says which extra brings it and how to install it (issue 30)."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("grpc")
import oip_asgi.grpc
from oip_asgi import Model, oip_app


@pytest.mark.anyio
@pytest.mark.parametrize(("option", "package"), [("health", "grpc_health"), ("reflection", "grpc_reflection")])
async def test_grpcs_health_and_reflection_without_their_packages_say_to_install_the_grpc_extra(
    monkeypatch: pytest.MonkeyPatch, option: str, package: str
) -> None:
    # The README's gRPC example after its first install command: grpcio (from tritonclient) without these.
    for name in [name for name in sys.modules if name == package or name.startswith(package + ".")] or [package]:
        monkeypatch.setitem(sys.modules, name, None)  # imported by an earlier test or not: importing it now fails
    monkeypatch.delitem(sys.modules, "oip_asgi.grpc._health", raising=False)
    app = oip_app({"m": Model(lambda x: x)})
    with pytest.raises(ModuleNotFoundError, match=rf"needs the {package} package, which the grpc extra brings: pip"):
        oip_asgi.grpc.server(app, **{option: True})


def test_the_grpc_wire_without_grpcio_says_to_install_the_grpc_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)
    monkeypatch.delitem(sys.modules, "oip_asgi.grpc._server", raising=False)
    monkeypatch.delitem(sys.modules, "oip_asgi.grpc._service", raising=False)
    with pytest.raises(
        ModuleNotFoundError, match=r"oip_asgi.grpc needs the grpc package, .*pip install -e '\.\[grpc\]'"
    ):
        oip_asgi.grpc.serving  # noqa: B018
