"""Which gateway a fleet talks to: named by `router.kind`, or asked of the gateway's /get_loads."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from k26ctl.fleet.api import gateway_note
from k26ctl.fleet.gateway import detect_kind, open_gateway
from k26ctl.fleet.router import Router, RouterError
from k26ctl.fleet.smg import SmgGateway


def answering(status: int, body: Any) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/get_loads"
        data = json.dumps(body).encode()  # a stream, as a socket gives it (the client reads it raw)
        return httpx.Response(
            status, stream=httpx.ByteStream(data), headers={"content-type": "application/json"}
        )

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ({"timestamp": "t", "version": "smg-1.13.0", "dp_rank_count": 0, "loads": []}, "smg"),
        ({"workers": []}, "sglang-router"),  # what 0.3.2 answers
    ],
)
def test_the_kind_is_read_from_get_loads(body: dict[str, Any], kind: str) -> None:
    assert detect_kind("http://gw", transport=answering(200, body)) == kind
    gateway, detected = open_gateway("http://gw", None, transport=answering(200, body))
    assert gateway.kind == kind and detected


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, {"version": "vllm-router-0.2"}),
        (200, ["workers"]),
        (404, {}),
        (200, {"workers": [], "version": "x"}),
    ],
)
def test_an_answer_of_neither_kind_asks_for_router_kind(status: int, body: Any) -> None:
    with pytest.raises(RouterError) as caught:
        detect_kind("http://gw", transport=answering(status, body))
    assert caught.value.hint is not None and "router.kind: smg" in caught.value.hint


def test_a_named_kind_is_not_asked_and_the_note_says_which_and_how() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError("a named kind sends nothing at open")

    gateway, detected = open_gateway("http://gw", "smg", transport=httpx.MockTransport(refuse))
    assert isinstance(gateway, SmgGateway) and not detected
    assert gateway_note(gateway).startswith("smg at http://gw (router.kind); no routing policy")
    router = Router("http://gw")
    router.detected = True
    assert gateway_note(router) == (
        "sglang-router at http://gw (detected from its /get_loads; name it with router.kind)"
    )
