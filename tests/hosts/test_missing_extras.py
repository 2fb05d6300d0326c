"""A package of an extra missing: one line that says which extra brings it and how to install it (issues 30, 35)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import httpx
import pytest

import oip_asgi.grpc
from oip_asgi import Model, ModelRepository, oip_app
from tests.support.servers import ROOT, child_env


def missing(monkeypatch: pytest.MonkeyPatch, package: str, *importers: str) -> None:
    """`package` as if not installed, and the modules that import it (`importers`) as if never imported."""
    for name in [name for name in sys.modules if name == package or name.startswith(package + ".")] or [package]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it now fails, whether or not it was imported
    for name in [name for name in sys.modules if name.startswith(importers)] if importers else []:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.anyio
@pytest.mark.parametrize(("option", "package"), [("health", "grpc_health"), ("reflection", "grpc_reflection")])
async def test_grpcs_health_and_reflection_without_their_packages_say_to_install_the_grpc_extra(
    monkeypatch: pytest.MonkeyPatch, option: str, package: str
) -> None:
    pytest.importorskip("grpc")
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


@pytest.mark.parametrize(
    ("adapter", "package", "extra"),
    [
        ("oip_asgi_lambda", "mangum", "lambda"),
        ("oip_asgi_django", "a2wsgi", "django"),
        ("oip_asgi_flask", "flask", "flask"),
    ],
)
def test_an_adapter_without_its_extra_names_the_extra_and_the_install_line(
    monkeypatch: pytest.MonkeyPatch, adapter: str, package: str, extra: str
) -> None:
    missing(monkeypatch, package, adapter, "oip_asgi_wsgi")
    with pytest.raises(ModuleNotFoundError) as raised:
        __import__(adapter)
    assert str(raised.value) == (
        f"{adapter} needs the {package} package, which the {extra} extra brings: pip install -e '.[{extra}]' "
        f"in a clone of oip-asgi (pip install 'oip-asgi[{extra}]' once it is on PyPI)"
    )


@pytest.mark.anyio
async def test_a_triton_models_metric_family_without_prometheus_client_fails_its_load_naming_the_metrics_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing(monkeypatch, "prometheus_client", "oip_asgi._core.custom_metrics")
    repository = ModelRepository(
        ROOT / "examples" / "python_backend" / "models", model_control_mode="explicit", load_models=["custom_metrics"]
    )
    app = oip_app(model_repository=repository)
    await app.load()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
        response = await client.get("/models/custom_metrics")
    assert response.status_code == 503
    assert (
        "ModuleNotFoundError: pb_utils.MetricFamily needs the prometheus_client package, which the metrics extra "
        "brings: pip install -e '.[metrics]'" in response.json()["error"]
    )
    await app.core.close()


@pytest.mark.slow
def test_serve_with_a_grpc_port_and_no_grpcio_exits_2_at_start_naming_the_extra() -> None:
    # A fresh interpreter where grpcio cannot be imported: the command must say so before it starts serving.
    script = textwrap.dedent(
        """
        import sys
        sys.modules["grpc"] = None
        from oip_asgi._hosts.cli import main
        sys.exit(main(["serve", "examples.models:models", "--grpc-port", "8001", "--port", "0"]))
        """
    )
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-c", script],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "oip-asgi: error: --grpc-port needs grpcio, which the grpc extra brings: pip install -e '.[grpc]' in a clone "
        "of oip-asgi (pip install 'oip-asgi[grpc]' once it is on PyPI)\n"
    )
