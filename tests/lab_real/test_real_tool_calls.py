"""Tool calls and schemas on real SGLang 0.5.15 (CPU, --tool-call-parser kimi_k2).

The real tiny model was never taught the Kimi K2 format, and on the CPU the real server cannot write a
call for it: a grammar (`tool_choice: required`, a `strict` tool, `response_format`) makes 0.5.15's
xgrammar raise "Unsupported device: cpu" in the scheduler, and the server dies. So this checks what can
be checked here: a smoke run with a tool-call prompt and a schema prompt leaves the real server up
(tools go out non-strict with tool_choice auto, no response_format to a CPU server), judges the
missing call as a missing call, and an answer without a call has the stand-in's shape. The call's own
shape is checked against the real parser in test_tool_call_parser.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from k26ctl.smoke import SmokeOptions, SmokeTarget, run_smoke
from k26ctl.smoke.suite import parse_suite
from tests.support.lab_server import lab_server

from .realserver import GOOD, k26_json, sets, url

pytestmark = [pytest.mark.realsglang, pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(1200)]

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
SUITE = {
    "name": "real-structured",
    "temperatures": [0.0],
    "determinism": False,
    "prompts": [
        {
            "id": "weather",
            "prompt": "What is the weather in Paris?",
            "max_tokens": 48,
            "chat_template_kwargs": {"thinking": False},
            "tools": [WEATHER],
            "expect": [{"type": "tool_call", "value": "get_weather"}],
        },
        {
            "id": "paris-json",
            "kind": "json",
            "prompt": "Describe Paris as JSON.",
            "max_tokens": 48,
            "chat_template_kwargs": {"thinking": False},
            "schema": {"type": "object", "required": ["city"]},
            "expect": [{"type": "json_schema"}],
        },
    ],
}


@pytest.fixture(scope="module")
def real(real_host: Any) -> Iterator[str]:
    code, doc = k26_json("deploy", GOOD, *sets(real_host, "sglang.tool_call_parser=kimi_k2"), "--yes")
    assert code == 0, doc
    yield url(real_host, "")


def test_structured_prompts_leave_the_real_cpu_server_up_and_are_judged(real: str) -> None:
    report = run_smoke(SmokeTarget(real), parse_suite(SUITE), options=SmokeOptions(concurrency=2))
    assert report.health_after == 200
    weather, paris = report.results
    assert weather.error is None and weather.tool_calls is None
    assert [f.reason() for f in weather.failures] == [
        "tool_call: no tool call parsed (no message.tool_calls)"
    ]
    assert paris.error is None and paris.constrained is False  # checked, never sent as response_format
    assert [f.detector for f in paris.failures] == ["json_schema"]  # the real tiny model writes no JSON


def test_an_answer_without_a_call_has_the_real_shape(real: str) -> None:
    def shape(base: str, model: str) -> Any:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "temperature": 0,
            "max_tokens": 48,
            "chat_template_kwargs": {"thinking": False},
            "tools": [{"type": "function", "function": WEATHER}],
            "tool_choice": "auto",
        }
        choice = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=300).json()["choices"][0]
        message = choice["message"]
        return (
            choice["finish_reason"],
            "tool_calls" in message,
            message.get("tool_calls"),
            "Paris" in message["content"],
        )

    with lab_server("ddtree-b7-tools") as stand_in:
        shapes = {"stand-in": shape(stand_in.url, "k26lab-tiny"), "real": shape(real, "k26real-tiny")}
    assert shapes["stand-in"] == shapes["real"], shapes
