from __future__ import annotations

import types

import pytest

import oip_asgi


def public_names(module: types.ModuleType) -> set[str]:
    # Subpackages (oip_asgi.grpc) show up as attributes once imported; they are not part of __all__.
    return {
        name
        for name in dir(module)
        if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType)
    } - {"annotations"}


def test_public_api_is_exactly_all() -> None:
    assert public_names(oip_asgi) == set(oip_asgi.__all__) - {"__version__"}
    assert oip_asgi.__all__ == sorted(oip_asgi.__all__)
    assert oip_asgi.__version__.count(".") == 2


def test_grpc_api_is_exactly_all() -> None:
    grpc = pytest.importorskip("oip_asgi.grpc")
    assert public_names(grpc) == set(grpc.__all__)
    assert grpc.__all__ == sorted(grpc.__all__)


def test_integration_api_is_exactly_all() -> None:
    from oip_asgi import integration

    assert public_names(integration) == set(integration.__all__)
    assert integration.__all__ == sorted(integration.__all__)
