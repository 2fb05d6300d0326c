from __future__ import annotations

import oip_asgi


def test_public_api_is_exactly_all() -> None:
    public = {name for name in dir(oip_asgi) if not name.startswith("_")} - {"annotations"}
    assert public == set(oip_asgi.__all__) - {"__version__"}
    assert oip_asgi.__all__ == sorted(oip_asgi.__all__)
    assert oip_asgi.__version__.count(".") == 2
