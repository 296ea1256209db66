"""run_smoke against a real HTTP server on 127.0.0.1 (stdlib, canned SGLang-shaped answers).

The fake server stands in for SGLang only where faults cannot be caused for real cheaply (500s,
malformed bodies, a server dying between requests); the end-to-end tests use the lab server.
"""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from k26ctl.cli.present.smoke import render_table
from k26ctl.errors import ConfigError, PermissionDeniedError, UnreachableError
from k26ctl.smoke import SmokeOptions, SmokeTarget, run_smoke
from k26ctl.smoke.baseline import Baseline
from k26ctl.smoke.suite import Suite, parse_suite
from tests.support.fake_sglang import FakeSGLang, Fault
from tests.support.ports import refused_port

ANSWERS = {
    "prose": "Air molecules scatter blue sunlight more strongly than red light, so the whole sky glows blue.",
    "count": "one two three four five",
    "json": '{"name": "Ada Lovelace", "born": 1815}',
    "think": "The answer is 391.",
    "raw": " Mainz around 1440, where Johannes Gutenberg set movable metal type in a wooden screw press.",
}

SUITE_DATA: dict[str, Any] = {
    "name": "unit",
    "temperatures": [0.0, 0.7],
    "prompts": [
        {
            "id": "prose",
            "kind": "prose",
            "prompt": "Why is the sky blue?",
            "max_tokens": 64,
            "chat_template_kwargs": {"thinking": False},
        },
        {"id": "count", "kind": "short", "prompt": "Count to five in words.", "max_tokens": 32},
        {
            "id": "json",
            "kind": "json",
            "prompt": "Give Ada's record as JSON.",
            "max_tokens": 32,
            "expect": [{"type": "json"}, {"type": "contains", "value": "1815"}],
        },
        {
            "id": "think",
            "kind": "short",
            "prompt": "What is 17 times 23?",
            "max_tokens": 64,
            "expect": [{"type": "answer", "value": "391"}],
        },
        {
            "id": "raw",
            "kind": "prose",
            "api": "generate",
            "prompt": "The printing press began in",
            "max_tokens": 96,
        },
    ],
}


def unit_suite(**changes: Any) -> Suite:
    return parse_suite({**SUITE_DATA, **changes})


def prompt_id(path: str, body: dict[str, Any]) -> str:
    if path == "/generate":
        return "raw"
    text = body["messages"][-1]["content"]
    return next(p["id"] for p in SUITE_DATA["prompts"] if p["prompt"] == text)


def healthy(path: str, body: dict[str, Any]) -> str | tuple[str, str] | Fault:
    pid = prompt_id(path, body)
    if pid == "think":
        return ANSWERS["think"], "17 times 20 is 340, plus 17 times 3 is 51, so 391."
    return ANSWERS[pid]


def with_override(pid: str, answer: Callable[[], str | tuple[str, str] | Fault]) -> Any:
    def responder(path: str, body: dict[str, Any]) -> Any:
        return answer() if prompt_id(path, body) == pid else healthy(path, body)

    return responder


def run(fake: FakeSGLang, suite: Suite | None = None, **options: Any) -> Any:
    return run_smoke(SmokeTarget(fake.url), suite or unit_suite(), options=SmokeOptions(**options))


def test_healthy_server_passes_with_two_requests_in_flight() -> None:
    with FakeSGLang(healthy, delay=0.05) as fake:
        report = run(fake)
    assert report.passed, report.summary()
    # 5 prompts x 2 temperatures + 5 determinism repeats
    assert len(report.results) == 15
    assert fake.max_in_flight >= 2
    assert report.model == "fake-model"
    raw = [r for r in report.results if r.prompt_id == "raw"]
    assert all(r.accept_length == pytest.approx(3.5) for r in raw)
    assert all(r.tokens_per_s and r.tokens_per_s > 0 for r in report.results)
    assert report.server_accept_after == pytest.approx(3.4)
    assert report.server_identity["version"] == "0.5.15-fake"


def test_requests_carry_sampling_and_template_settings() -> None:
    with FakeSGLang(healthy) as fake:
        run(fake, unit_suite(top_p=0.9, seed=7))
    chats = [b for p, b in fake.requests if p == "/v1/chat/completions"]
    prose = [b for b in chats if b["messages"][-1]["content"] == "Why is the sky blue?"]
    assert all(b["chat_template_kwargs"] == {"thinking": False} for b in prose)
    assert {b["temperature"] for b in chats} == {0.0, 0.7}
    sampled = [b for b in chats if b["temperature"] > 0]
    assert all(b["top_p"] == 0.9 and b["seed"] == 7 for b in sampled)
    assert all("logprobs" not in b and "response_format" not in b and "regex" not in b for b in chats)
    gens = [b for p, b in fake.requests if p == "/generate"]
    assert gens and all(b["sampling_params"]["max_new_tokens"] == 96 for b in gens)


def test_degenerate_answer_fails_with_named_finding() -> None:
    with FakeSGLang(with_override("prose", lambda: "The.r" + "!" * 80)) as fake:
        report = run(fake)
    assert not report.passed
    failed = {r.prompt_id for r in report.failed_results}
    assert failed == {"prose"}
    assert any(f.detector == "char_run" for r in report.failed_results for f in r.findings)
    assert "char_run" in report.summary()


def test_reasoning_content_is_checked_too() -> None:
    loop = "Let me think. " + "Wait, let me recompute. " * 12
    with FakeSGLang(with_override("think", lambda: ("391", loop))) as fake:
        report = run(fake)
    bad = [r for r in report.failed_results if r.prompt_id == "think"]
    assert bad and all(any(f.detector.startswith("reasoning.") for f in r.findings) for r in bad)


def test_json_answer_that_stops_mid_document_is_broken() -> None:
    with FakeSGLang(with_override("json", lambda: '{"name": "Ada Lovelace", "born": 1815')) as fake:
        report = run(fake)
    bad = [r for r in report.failed_results if r.prompt_id == "json"]
    assert bad and all({"broken_json", "expect.json"} <= {f.detector for f in r.findings} for r in bad)


def test_expectation_failure_and_warn_severity() -> None:
    with FakeSGLang(with_override("json", lambda: "name: Ada Lovelace, born: 1815")) as fake:
        report = run(fake)
    bad = [r for r in report.failed_results if r.prompt_id == "json"]
    assert bad and all(any(f.detector == "expect.json" for f in r.findings) for r in bad)

    data = json.loads(json.dumps(SUITE_DATA))
    data["prompts"][2]["expect"][0]["severity"] = "warn"
    with FakeSGLang(with_override("json", lambda: "name: Ada Lovelace, born: 1815")) as fake:
        report = run(fake, parse_suite(data))
    assert report.passed
    assert any(r.verdict == "warn" for r in report.results if r.prompt_id == "json")


def test_a_sampled_answer_that_misses_its_expectation_is_reported_not_failed() -> None:
    """Real SGLang samples anew on every run (the seed counts only under deterministic inference): a
    wrong fact at temperature 0.7 is a warning; the same miss at temperature 0 still fails."""
    with FakeSGLang(with_override("think", lambda: "The answer is four hundred.")) as fake:
        sampled_only = run(fake, parse_suite({**SUITE_DATA, "temperatures": [0.7]}))
        both = run(fake)
    assert sampled_only.passed, sampled_only.summary()
    warned = [f for r in sampled_only.results if r.prompt_id == "think" for f in r.findings]
    assert [(f.detector, f.severity) for f in warned] == [("expect.answer", "warn")], warned
    assert "temperature 0.7" in warned[0].message
    assert not both.passed  # the temperature-0 copies miss it too, and those fail
    assert {r.temperature for r in both.failed_results if r.prompt_id == "think"} == {0.0}


def test_expectations_switched_off_by_suite_or_option() -> None:
    wrong = with_override("think", lambda: "The answer is four hundred.")
    with FakeSGLang(wrong) as fake:
        assert not run(fake).passed
        assert run(fake, unit_suite(expectations=False)).passed
        assert run(fake, expectations=False).passed


def test_nothing_accepted_fails_as_a_broken_drafter_and_the_floor_still_applies() -> None:
    with FakeSGLang(healthy, accept_length=1.02, server_avg_accept=1.05) as fake:
        report = run(fake)
    assert not report.passed
    suite = {f.detector: f for f in report.suite_findings}
    assert "drafter_accepts_nothing" in suite
    assert "drafter accepts nothing" in suite["drafter_accepts_nothing"].message
    # each request only warns: one short answer may well accept nothing
    per_request = [f for r in report.results for f in r.findings if f.detector == "accept_none"]
    assert per_request and all(f.severity == "warn" for f in per_request)

    with FakeSGLang(healthy, accept_length=2.1, server_avg_accept=2.2) as fake:
        assert run(fake).passed
        report = run(fake, min_accept_length=2.5)
    assert {f.detector for r in report.results for f in r.findings} >= {"accept_floor"}
    assert any(f.detector == "measured_accept_floor" for f in report.suite_findings)
    assert not report.passed


def test_low_acceptance_is_a_warning_not_a_failure() -> None:
    """Slow is not broken: an accept length under the low mark (1.25 here, no draft depth reported)
    passes, with a warning that names the number, in the summary and the JSON."""
    with FakeSGLang(healthy, accept_length=1.15, server_avg_accept=1.2) as fake:
        report = run(fake)
    assert report.passed, report.summary()
    low = [f for f in report.suite_findings if f.detector == "measured_accept_low"]
    assert len(low) == 1 and low[0].severity == "warn"
    assert "1.15" in low[0].message
    assert "warnings=measured_accept_low" in report.summary()
    data = report.to_json()
    assert data["passed"] is True
    assert any("1.15" in w and "is low" in w for w in data["warnings"])
    assert data["accept_rule"]["algorithm"] == "DDTREE"


def test_a_collapse_against_the_same_configurations_past_fails() -> None:
    from k26ctl.smoke.acceptance import PriorAccept

    prior = PriorAccept(3.0, "2026-12-01T10:00:00+00:00", "this host's deploy history")
    with FakeSGLang(healthy, accept_length=1.6, server_avg_accept=1.6) as fake:
        collapsed = run(fake, prior_accept=prior)
    with FakeSGLang(healthy, accept_length=2.6, server_avg_accept=2.6) as fake:
        held = run(fake, prior_accept=prior)
    finding = next(f for f in collapsed.suite_findings if f.detector == "measured_accept_collapse")
    assert not collapsed.passed
    assert finding.threshold == pytest.approx(2.0)  # half the gain over 1.0 kept
    assert "3.00" in finding.message and "deploy history" in finding.message
    assert held.passed, held.summary()


def test_smoke_url_remembers_what_the_configuration_accepted(tmp_path: Path) -> None:
    from k26ctl.smoke.accept_memory import AcceptMemory

    memory = AcceptMemory(tmp_path / "accept.json")
    with FakeSGLang(healthy, accept_length=3.2, server_avg_accept=3.2) as fake:
        first = run(fake, accept_memory=memory)
        assert first.passed
        assert first.accept_rule is not None and first.accept_rule.prior is None
        fake.accept_length = 1.5  # the same server, same configuration: drafts now mostly rejected
        second = run(fake, accept_memory=memory)
    assert not second.passed
    assert any(f.detector == "measured_accept_collapse" for f in second.suite_findings)
    assert second.accept_rule is not None and second.accept_rule.prior is not None
    reached = first.measured_accept_length
    assert reached is not None and reached > 3.0
    assert second.accept_rule.prior.accept_length == pytest.approx(reached, abs=1e-3)
    # a failed run is not remembered: the reference stays what the configuration achieved
    entries = json.loads((tmp_path / "accept.json").read_text())
    assert [e["accept_length"] for e in entries.values()] == [pytest.approx(reached, abs=1e-3)]


def test_server_lifetime_accept_average_is_context_not_a_verdict() -> None:
    """/server_info's average is SGLang's lifetime figure (stale after long traffic): a collapsed value
    there does not fail a run whose own requests accept well, and it is reported with its caveat."""
    with FakeSGLang(healthy, accept_length=3.5, server_avg_accept=1.02) as fake:
        report = run(fake)
    assert report.passed
    assert report.server_accept_after == pytest.approx(1.02)
    assert (report.measured_accept_length or 0) > 3.0
    assert "lifetime average" in report.to_json()["server_avg_accept_length"]["note"]


def test_no_accept_length_without_speculative_decoding() -> None:
    with FakeSGLang(healthy, accept_length=None, server_avg_accept=None) as fake:
        report = run(fake, min_accept_length=3.0)
    assert report.passed
    assert all(r.accept_length is None for r in report.results)


def test_nondeterministic_greedy_answers_are_a_finding() -> None:
    calls = {"n": 0}
    lock = threading.Lock()

    def flaky() -> str:
        with lock:
            calls["n"] += 1
            n = calls["n"]
        return ANSWERS["prose"] if n % 2 else ANSWERS["prose"].replace("whole sky", "entire sky")

    with FakeSGLang(with_override("prose", flaky)) as fake:
        report = run(fake, suite=unit_suite(temperatures=[0.0]))
    findings = [f for r in report.results for f in r.findings if f.detector == "nondeterministic"]
    assert len(findings) == 1
    assert findings[0].score == ANSWERS["prose"].index("whole")


def test_http_500_is_a_failed_request_not_unreachable() -> None:
    with FakeSGLang(with_override("count", lambda: Fault(500))) as fake:
        report = run(fake)
    errors = [r for r in report.results if r.error]
    assert errors and all(r.prompt_id == "count" and "HTTP 500" in (r.error or "") for r in errors)
    assert not report.passed


def test_malformed_json_is_a_failed_request() -> None:
    with FakeSGLang(with_override("count", lambda: Fault(200, raw=b'{"choices": [tru'))) as fake:
        report = run(fake)
    errors = [r for r in report.results if r.error]
    assert errors and all("malformed JSON" in (r.error or "") for r in errors)


def test_server_dying_mid_suite_is_unreachable() -> None:
    with (
        FakeSGLang(with_override("json", lambda: Fault(die=True))) as fake,
        pytest.raises(UnreachableError) as info,
    ):
        run(fake)
    assert info.value.exit_code == 69
    assert "stopped answering during the suite" in info.value.message


def test_connection_refused_is_unreachable() -> None:
    with refused_port() as port, pytest.raises(UnreachableError) as info:
        run_smoke(SmokeTarget(f"http://127.0.0.1:{port}"), unit_suite(), options=SmokeOptions())
    assert "cannot reach the server" in info.value.message


def test_hanging_server_times_out_as_unreachable() -> None:
    with FakeSGLang(healthy, delay=2.0) as fake, pytest.raises(UnreachableError) as info:
        run_smoke(SmokeTarget(fake.url, model="m"), unit_suite(), options=SmokeOptions(timeout=0.3))
    assert "timeout" in info.value.message


def test_api_key_is_sent_and_a_refusal_is_exit_77() -> None:
    with FakeSGLang(healthy, api_key="s3cret") as fake:
        report = run_smoke(SmokeTarget(fake.url, api_key="s3cret"), unit_suite(), options=SmokeOptions())
        assert report.passed
        with pytest.raises(PermissionDeniedError):
            run_smoke(SmokeTarget(fake.url), unit_suite(), options=SmokeOptions())


def test_baseline_record_then_compare(tmp_path: Path) -> None:
    path = tmp_path / "none.json"
    with FakeSGLang(healthy) as fake:
        recorded = run(fake, record_baseline=path)
        assert recorded.baseline_recorded == str(path)
        baseline = Baseline.load(path)
        assert set(baseline.entries) == {"prose", "count", "json", "think", "raw"}
        assert baseline.identity["model"] == "fake-model"
        assert baseline.entries["think"].reasoning.startswith("17 times")
        same = run(fake, baseline=path)
    assert same.passed and same.baseline is not None and same.baseline.exact_match_rate == 1.0

    changed = with_override("count", lambda: "one two three four five six")
    with FakeSGLang(changed) as fake:
        strict = run(fake, baseline=path)
        lenient = run(fake, baseline=path, min_exact_match=0.66)
    assert strict.baseline is not None and not strict.passed
    parity = {p.prompt_id: p for p in strict.baseline.prompts}
    assert not parity["count"].match and parity["count"].first_divergence == len("one two three four five")
    assert strict.baseline.exact_match_rate == pytest.approx(0.8)
    assert any(f.detector == "baseline_parity" for f in strict.suite_findings)
    assert lenient.passed


def test_failed_run_does_not_record_a_baseline(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    with FakeSGLang(with_override("prose", lambda: "!" * 50)) as fake:
        report = run(fake, record_baseline=path)
    assert not path.exists()
    assert any(f.detector == "baseline_not_recorded" for f in report.suite_findings)


def test_bad_baseline_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.json"
    path.write_text("{}")
    with FakeSGLang(healthy) as fake, pytest.raises(ConfigError):
        run(fake, baseline=path)


def test_report_formats() -> None:
    with FakeSGLang(with_override("prose", lambda: "GGGGGGGGGGGGGGGGGGGGGGGGGGGGGG")) as fake:
        report = run(fake)
    document = json.loads(json.dumps(report.to_json()))
    assert document["passed"] is False
    assert len(document["results"]) == len(report.results)
    prose = [r for r in document["results"] if r["prompt_id"] == "prose"]
    assert prose[0]["reasons"] and prose[0]["findings"][0]["span"] == [0, 30]

    root = ET.fromstring(report.to_junit())
    assert root.tag == "testsuite"
    assert int(root.get("tests", "0")) == len(report.results) + 1
    failures = root.findall(".//failure")
    assert int(root.get("failures", "0")) == len(failures) == len(report.failed_results)

    console = Console(record=True, width=200)
    console.print(render_table(report))
    text = console.export_text()
    for header in ("prompt", "verdict", "findings", "tokens", "tok/s", "accept len"):
        assert header in text
    assert "prose@T0" in text and "FAIL" in text and "char_run" in text


def test_server_ignoring_max_tokens_is_a_finding() -> None:
    with FakeSGLang(with_override("count", lambda: "one two three four five " * 2000)) as fake:
        report = run(fake)
    bad = [r for r in report.failed_results if r.prompt_id == "count"]
    assert bad and all(any(f.detector == "over_length" for f in r.findings) for r in bad)


def test_expected_range_follows_the_draft_depth_and_ngram_has_none() -> None:
    from k26ctl.smoke.acceptance import longest_accept, rule_for
    from k26ctl.smoke.runner import is_speculative

    assert rule_for(None).low_mark == 1.25
    assert longest_accept({"speculative_algorithm": "DDTREE", "speculative_num_draft_tokens": 8}) == 8
    assert rule_for({"speculative_algorithm": "DDTREE", "speculative_num_draft_tokens": 8}).low_mark == 2.75
    assert rule_for({"speculative_algorithm": "EAGLE", "speculative_num_steps": 1}).low_mark == 1.25
    assert rule_for({"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5}).low_mark == 2.25
    dflash = rule_for(
        {"server_args": {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 16}}
    )
    assert dflash.low_mark == 4.75 and dflash.meant_to_accept
    # NGRAM's num_draft_tokens is a tree size (SGLang resolves topk 10, steps 0): no depth, no range
    ngram = rule_for(
        {"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 8, "speculative_num_steps": 0}
    )
    assert ngram.longest is None and ngram.low_mark == 1.25 and not ngram.meant_to_accept
    assert "NGRAM" in ngram.expected_range()
    assert not is_speculative({"speculative_algorithm": None})
    assert is_speculative({"speculative_algorithm": "DDTREE"})
