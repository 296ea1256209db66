"""The probes' logic with an in-process client (no server): positions, the pass rule, a refused flush,
the JSON object, and how determinism and baseline parity use the probe verdicts."""

from __future__ import annotations

from k26ctl.smoke.baseline import Baseline, BaselineEntry
from k26ctl.smoke.probes import PassRule, ProbeAnswer, ProbeReport, run_probes
from k26ctl.smoke.report import RequestResult, SmokeReport
from k26ctl.smoke.runner import SmokeOptions, _compare_baseline, _determinism_findings, _Job, _probe_findings
from k26ctl.smoke.suite import PromptSpec


class ScriptedServer:
    """Greedy next token = a fixed 'true' continuation, except at positions listed as flipped."""

    def __init__(self, truth: dict[tuple[int, ...], list[int]], flush_ok: bool = True) -> None:
        self.truth = truth
        self.flush_ok = flush_ok
        self.flushes: list[float] = []
        self.batches: list[int] = []

    def flush_cache(self, timeout: float = 0.0) -> tuple[bool, str]:
        self.flushes.append(timeout)
        return (True, "Cache flushed.") if self.flush_ok else (False, "Flush cache failed.")

    def next_tokens(self, prefixes: list[list[int]]) -> list[int]:
        self.batches.append(len(prefixes))
        out = []
        for prefix in prefixes:
            for prompt, continuation in self.truth.items():
                if tuple(prefix[: len(prompt)]) == prompt:
                    out.append(continuation[len(prefix) - len(prompt)])
                    break
        return out

    def detokenize(self, ids: list[int]) -> str:
        return "".join(chr(96 + i) for i in ids)


TRUTH = list(range(1, 41))  # the model's greedy continuation of prompt (100, 101)
PROMPT = [100, 101]


def answer(output: list[int], prompt_id: str = "p", attempt: int = 0) -> ProbeAnswer:
    return ProbeAnswer(prompt_id, PROMPT, output, attempt)


def test_self_consistent_answer_passes_with_every_position_checked() -> None:
    server = ScriptedServer({tuple(PROMPT): TRUTH})
    report = run_probes(server, [answer(TRUTH)], concurrency=2, n_positions=16)
    assert report.flushed and report.checked == 16 and report.mismatches == []
    assert report.verdict == "pass" and report.first_mismatch is None
    assert server.batches[0] == 1  # the prompt alone first, so the rest reuse its cached KV
    assert server.flushes == [10.0]


def test_isolated_flip_passes_and_many_mismatches_fail() -> None:
    server = ScriptedServer({tuple(PROMPT): TRUTH})
    one_flip = [*TRUTH[:5], 39, *TRUTH[6:]]  # one token the model would not have chosen (a near tie)
    report = run_probes(server, [answer(one_flip)], concurrency=1, n_positions=32)
    assert [m.position for m in report.mismatches] == [5]
    assert report.verdict == "pass"  # rare and isolated: allowed

    broken = [t if i % 4 != 1 else 7 for i, t in enumerate(TRUTH)]  # one wrong token per "verify step"
    report = run_probes(server, [answer(broken)], concurrency=1, n_positions=32)
    assert report.verdict == "fail"
    first = report.first_mismatch
    assert first is not None and first.position == 1
    assert (first.expected, first.got) == ("g", "b")  # decoded text: expected 7, the server chose 2
    data = report.to_json()
    assert data["first_mismatch"] == {"prompt_id": "p", "position": 1, "expected": "g", "got": "b"}
    assert data["checked"] == 32 and data["mismatches"] == len(report.mismatches) and data["flushed"] is True
    # each answer lists its mismatches by token id; the first four are decoded, the rest are not
    tokens = data["answers"][0]["mismatch_tokens"]
    assert [t["position"] for t in tokens] == data["answers"][0]["mismatch_positions"] and len(tokens) > 4
    assert all("expected" in t and "got" in t for t in tokens[:4])
    assert (
        not any("expected" in t for t in tokens[4:])
        and tokens[5]["expected_id"] == broken[tokens[5]["position"]]
    )


def test_share_rule_catches_a_bug_spread_thin() -> None:
    rule = PassRule(max_per_answer=2, max_share=0.02)
    assert not rule.answer_fails(2) and rule.answer_fails(3)
    assert not rule.share_fails(8, 448) and rule.share_fails(9, 448)
    assert not rule.share_fails(2, 32)  # one answer's tolerance is never taken away by the share


def test_extra_positions_are_probed_past_the_first_n() -> None:
    server = ScriptedServer({tuple(PROMPT): TRUTH})
    late = [*TRUTH[:30], 1, 1, 1, *TRUTH[33:]]
    plain = run_probes(server, [answer(late)], concurrency=1, n_positions=8)
    assert plain.checked == 8 and plain.verdict == "pass"
    wide = run_probes(server, [ProbeAnswer("p", PROMPT, late, 0, tuple(range(28, 36)))], 1, n_positions=8)
    assert wide.checked == 16 and [m.position for m in wide.mismatches] == [30, 31, 32]


def test_refused_flush_is_a_weaker_pass_with_a_warning() -> None:
    server = ScriptedServer({tuple(PROMPT): TRUTH}, flush_ok=False)
    report = run_probes(server, [answer(TRUTH)], concurrency=1)
    assert report.flushed is False and report.verdict == "weak-pass" and report.passed
    assert "refused to flush" in (report.note or "")
    findings = _probe_findings(report, [])
    assert [(f.detector, f.severity) for f in findings] == [("probes_unflushed", "warn")]


def _pair(text_a: str, text_b: str) -> list[tuple[_Job, RequestResult]]:
    spec = PromptSpec(id="p", prompt="x")
    a = RequestResult("p", "prose", "chat", 0.0, 0, text=text_a)
    b = RequestResult("p", "prose", "chat", 0.0, 1, text=text_b)
    return [(_Job(spec, 0.0, 0), a), (_Job(spec, 0.0, 1), b)]


def _probes(clean: bool) -> ProbeReport:
    server = ScriptedServer({tuple(PROMPT): TRUTH})
    bad = [0] * 40
    answers = [answer(TRUTH, attempt=0), answer(TRUTH if clean else bad, attempt=1)]
    return run_probes(server, answers, concurrency=1)


def test_diverging_greedy_answers_pass_only_when_both_are_self_consistent() -> None:
    pairs = _pair("The sky is blue because", "The sky looks blue because")
    _determinism_findings(pairs, strict=False, probes=_probes(clean=True))
    (finding,) = pairs[1][1].findings
    assert finding.detector == "nondeterministic" and finding.severity == "warn"
    assert "self-consistent" in finding.message

    pairs = _pair("The sky is blue because", "The sky looks blue because")
    _determinism_findings(pairs, strict=False, probes=_probes(clean=False))
    assert pairs[1][1].findings[0].severity == "fail"

    pairs = _pair("The sky is blue because", "The sky looks blue because")
    _determinism_findings(pairs, strict=True, probes=_probes(clean=True))
    assert pairs[1][1].findings[0].severity == "fail"
    assert "deterministic-inference" in pairs[1][1].findings[0].message

    pairs = _pair("same", "same")
    _determinism_findings(pairs, strict=True, probes=None)
    assert pairs[1][1].findings == []


def test_baseline_parity_accepts_self_consistent_divergence_unless_deterministic() -> None:
    baseline = Baseline({"model": "m"}, "s", {"p": BaselineEntry("p", "The sky is blue", "", 10)})
    greedy = {"p": RequestResult("p", "prose", "chat", 0.0, 0, text="The sky looks blue")}
    for deterministic, passed in ((False, True), (True, False)):
        report = SmokeReport("u", "m", "s", 2, list(greedy.values()), probes=_probes(clean=True))
        report.deterministic_server = deterministic
        comparison = _compare_baseline(baseline, greedy, SmokeOptions(), report)
        assert comparison.exact_match_rate == 0.0
        assert comparison.passed is passed
        assert comparison.self_consistent == (() if deterministic else ("p",))
