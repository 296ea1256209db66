"""From one canary cycle to a verdict: healthy, degraded, failing or unreachable, with the evidence.

failing: the answers are wrong. Any failing smoke finding (degenerate text, a probe verdict of a
verify bug, an accept-length collapse, baseline parity lost without self-consistency), or every
request erroring.
degraded: the answers are right but something is off. Some requests erroring while others answer,
an accept length under the profile's floor (slower, not wrong), answers drifting from the baseline
in more than `drift_share` of the prompts while each is self-consistent (new weights or new flags:
coherent, but not what was there), or a request slower than `max_latency`.
A self-consistent divergence in fewer prompts is what near ties do on GPUs: healthy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from k26ctl.smoke.detectors import Finding
from k26ctl.watch.canary import CycleResult

HEALTHY, DEGRADED, FAILING, UNREACHABLE = "healthy", "degraded", "failing", "unreachable"
STATES = (HEALTHY, DEGRADED, FAILING, UNREACHABLE)
EXIT_CODES = {HEALTHY: 0, DEGRADED: 0, FAILING: 1, UNREACHABLE: 69}

# Failing findings that mean slower, not wrong.
_SLOW_ONLY = frozenset({"accept_floor", "measured_accept_floor"})


@dataclass(frozen=True)
class JudgeRules:
    max_latency: float | None = None  # seconds per canary request; None: not judged
    drift_share: float = 0.5


@dataclass
class Verdict:
    state: str
    reasons: list[str] = field(default_factory=list)
    detector_failures: dict[str, int] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    drifted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "reasons": self.reasons,
            "detector_failures": self.detector_failures,
            "drifted": self.drifted,
            "evidence": self.evidence,
        }


def _fail_findings(cycle: CycleResult) -> list[tuple[str, Finding]]:
    report = cycle.report
    assert report is not None
    found = [(r.name, f) for r in report.results for f in r.failures]
    found += [("suite", f) for f in report.suite_findings if f.severity == "fail"]
    return found


def judge(cycle: CycleResult, rules: JudgeRules | None = None) -> Verdict:
    rules = rules or JudgeRules()
    report = cycle.report
    if report is None:
        return Verdict(UNREACHABLE, [cycle.unreachable or "unreachable"])
    verdict = Verdict(HEALTHY)
    errored = [r for r in report.results if r.error is not None]
    failures = _fail_findings(cycle)
    for _, f in failures:
        verdict.detector_failures[f.detector] = verdict.detector_failures.get(f.detector, 0) + 1
    wrong = [(name, f) for name, f in failures if f.detector not in _SLOW_ONLY]
    probes = report.probes
    probes_failed = probes is not None and not probes.passed
    baseline_failed = report.baseline is not None and not report.baseline.passed
    if errored and len(errored) == len(report.results):
        verdict.state = FAILING
        verdict.reasons.append(f"every canary request failed: {errored[0].error}")
    elif wrong or probes_failed or baseline_failed:
        verdict.state = FAILING
        verdict.reasons += [f"{name}: {f.message}" for name, f in wrong[:5]]
        if probes_failed and probes is not None:
            verdict.reasons.append(probes.summary())
        if baseline_failed and not wrong:
            verdict.reasons.append("answers lost parity with the baseline")
    else:
        if errored:
            verdict.state = DEGRADED
            verdict.reasons.append(
                f"{len(errored)} of {len(report.results)} requests failed: {errored[0].error}"
            )
        slow = [f for _, f in failures if f.detector in _SLOW_ONLY]
        if slow:
            verdict.state = DEGRADED
            verdict.reasons.append(slow[0].message)
    if report.baseline is not None:
        # a divergence first seen at a near tie of the baseline is numerics (the batch around the
        # prompt changes from slice to slice), not drift; new weights diverge at clear choices
        verdict.drifted = sum(1 for p in report.baseline.prompts if not p.match and not p.near_tie)
        total = len(report.baseline.prompts)
        if verdict.state == HEALTHY and total and verdict.drifted / total > rules.drift_share:
            verdict.state = DEGRADED
            verdict.reasons.append(
                f"{verdict.drifted} of {total} answers differ from the baseline (each self-consistent): "
                "new weights or settings? `k26ctl watch --rebaseline` accepts them"
            )
    timed = [r.elapsed for r in report.results if r.error is None]
    if rules.max_latency is not None and timed and max(timed) > rules.max_latency:
        if verdict.state == HEALTHY:
            verdict.state = DEGRADED
        verdict.reasons.append(f"slowest canary request {max(timed):.1f} s (limit {rules.max_latency:g} s)")
    if report.lossy_levers:  # named in every verdict, whatever the state: the answers cannot be lossless
        verdict.reasons.append(
            "server runs lossy-by-design settings (not lossless when sampling): "
            + ", ".join(report.lossy_levers)
        )
    verdict.evidence = _evidence(cycle, wrong)
    return verdict


def _evidence(cycle: CycleResult, wrong: list[tuple[str, Finding]]) -> dict[str, Any]:
    """What an operator reads first: the first probe mismatch (decoded) and the first bad answer."""
    report = cycle.report
    assert report is not None
    evidence: dict[str, Any] = {}
    if report.probes is not None and report.probes.supported:
        first = report.probes.first_mismatch
        evidence["probes"] = {
            "checked": report.probes.checked,
            "mismatches": len(report.probes.mismatches),
            "flushed": report.probes.flushed,
        }
        if first is not None:
            evidence["first_mismatch"] = {
                "prompt_id": first.prompt_id,
                "position": first.position,
                "expected": first.expected,
                "got": first.got,
            }
    if wrong:
        name, f = wrong[0]
        evidence["first_failure"] = {"answer": name, "detector": f.detector, "message": f.message}
        bad = next((r for r in report.results if r.name == name), None)
        if bad is not None:
            evidence["first_failure"]["text"] = bad.text[:200]
    accept = report.measured_accept_length
    if accept is not None:
        evidence["accept_length"] = round(accept, 3)
    return evidence
