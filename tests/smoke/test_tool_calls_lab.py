"""Tool calls against the real lab server (python -m k26ctl.lab.serve with --tool-call-parser kimi_k2).

The healthy tool-call server passes the lab-tools suite; the tool-argument fault fails it on the tool-call
check alone: every plain answer, and every text detector, passes.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the lab server needs torch")

from k26ctl.smoke import SmokeOptions, SmokeTarget, load_suite, run_smoke
from tests.support.lab_server import lab_server

pytestmark = pytest.mark.lab

TOOL_PROMPTS = {"weather", "books"}


def test_healthy_tool_calls_pass_and_the_argument_fault_fails_only_the_tool_call_check() -> None:
    suite = load_suite("lab-tools")
    with lab_server("ddtree-b7-tools") as server:
        healthy = run_smoke(SmokeTarget(server.url), suite, options=SmokeOptions(concurrency=2))
    assert healthy.passed, [(r.name, r.failures) for r in healthy.results if not r.passed]
    calls = {r.prompt_id: r.tool_calls for r in healthy.results if r.prompt_id in TOOL_PROMPTS}
    assert calls["weather"] == [
        {
            "id": "functions.get_weather:0",
            "index": 0,
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
        }
    ]
    assert calls["books"] is not None and calls["books"][0]["function"]["name"] == "search_books"

    with lab_server("ddtree-b7-toolcall") as server:
        faulty = run_smoke(SmokeTarget(server.url), suite, options=SmokeOptions(concurrency=2))
    assert not faulty.passed
    failed = {(r.prompt_id, f.detector) for r in faulty.results for f in r.failures}
    assert failed == {("weather", "tool_call_arguments"), ("books", "tool_call_arguments")}, failed
    weather = next(r for r in faulty.results if r.prompt_id == "weather")
    assert weather.failures[0].message.startswith('arguments of get_weather are not JSON: \'{"city": =Paris')
    assert not [f for f in faulty.suite_findings if f.severity == "fail"]
    # the plain answers are the healthy server's, word for word
    plain = {
        r.name: r.text for r in healthy.results if r.prompt_id not in TOOL_PROMPTS and r.temperature == 0
    }
    assert plain == {r.name: r.text for r in faulty.results if r.name in plain}


def test_a_server_without_a_tool_call_parser_is_not_asked_the_tool_prompts() -> None:
    """Its answers would be the raw call text: the prompts are skipped with the reason, never passed."""
    with lab_server("ddtree-b7-tools", overrides=["sglang.tool_call_parser=null"]) as server:
        report = run_smoke(
            SmokeTarget(server.url), load_suite("lab-tools"), options=SmokeOptions(concurrency=2)
        )
    assert not {r.prompt_id for r in report.results} & TOOL_PROMPTS
    (skipped,) = [f for f in report.suite_findings if f.detector == "tool_call_skipped"]
    assert skipped.severity == "warn" and skipped.message == (
        "tool-call prompts not asked (books, weather): the server runs without --tool-call-parser "
        "(sglang.tool_call_parser)"
    )
    assert report.passed, [(r.name, r.failures) for r in report.results if not r.passed]
