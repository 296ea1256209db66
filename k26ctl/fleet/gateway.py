"""Which gateway stands in front of a fleet, and its adapter: sglang-router 0.3.x (`Router`) or SMG
(`SmgGateway`). The fleet file names the kind (`router.kind`); without it k26ctl asks the gateway.

Both answer `GET /get_loads`: SMG with `"version": "smg-X.Y.Z"`, sglang-router 0.3.x with
`{"workers": [...]}` and no version. Anything else is not a gateway k26ctl speaks to.
"""

from __future__ import annotations

from typing import Literal

import httpx

from k26ctl.fleet.router import Router, RouterError
from k26ctl.fleet.smg import SmgGateway

GatewayKind = Literal["sglang-router", "smg"]
KINDS: dict[str, type[Router]] = {"sglang-router": Router, "smg": SmgGateway}


def detect_kind(
    url: str,
    *,
    admin_key: str | None = None,
    timeout: float = 5.0,
    transport: httpx.BaseTransport | None = None,
) -> GatewayKind:
    """Ask the gateway at `url` what it is. RouterError when it answers as neither kind."""
    with Router(url, admin_key=admin_key, timeout=timeout, transport=transport) as probe:
        response = probe._call("GET", "/get_loads")
        if response.status_code != 200:
            raise RouterError(
                f"gateway {probe.url}: GET /get_loads answered {response.status_code}: kind unknown",
                "name it in the fleet file: router.kind: smg (or sglang-router)",
            )
        try:
            body = response.json()
        except ValueError:
            body = None
    if isinstance(body, dict):
        version = body.get("version")
        if isinstance(version, str) and version.startswith("smg-"):
            return "smg"
        if isinstance(body.get("workers"), list) and "version" not in body:
            return "sglang-router"
    raise RouterError(
        f"gateway {url}: GET /get_loads is neither SMG's nor sglang-router 0.3.x's answer",
        "name it in the fleet file: router.kind: smg (or sglang-router)",
    )


def open_gateway(
    url: str,
    kind: GatewayKind | None,
    *,
    admin_key: str | None = None,
    timeout: float = 5.0,
    transport: httpx.BaseTransport | None = None,
) -> tuple[Router, bool]:
    """The adapter for the gateway at `url`, and whether its kind was detected (not named)."""
    detected = kind is None
    if kind is None:
        kind = detect_kind(url, admin_key=admin_key, timeout=timeout, transport=transport)
    return KINDS[kind](url, admin_key=admin_key, timeout=timeout, transport=transport), detected
