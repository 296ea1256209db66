"""Smoke results and their documents: a summary line, JSON and JUnit XML (the terminal table is drawn
by k26ctl/cli/present/smoke.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from k26ctl.documents import tagged
from k26ctl.smoke.acceptance import AcceptRule
from k26ctl.smoke.baseline import BaselineComparison
from k26ctl.smoke.detectors import Finding
from k26ctl.smoke.probes import ProbeReport
from k26ctl.smoke.rescoring import RescoreReport
from k26ctl.termsafe import clean


@dataclass
class RequestResult:
    """One request of the suite and everything found wrong with its answer."""

    prompt_id: str
    kind: str
    api: str
    temperature: float
    attempt: int
    text: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    completion_tokens: int | None = None
    elapsed: float = 0.0
    accept_length: float | None = None
    verify_ct: int | None = None
    surrogates_replaced: int = 0  # lone surrogate escapes in the answer (not valid Unicode), replaced
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    # token ids, when the answer came from /generate with ids (temperature 0 with probes on)
    prompt_ids: list[int] | None = field(default=None, repr=False)
    output_ids: list[int] | None = field(default=None, repr=False)
    top2_margins: list[float | None] | None = field(default=None, repr=False)  # recording a baseline
    # a sampled answer's decode log-probabilities (for the rescoring probes), when the server gave them
    decode_logprobs: list[float | None] | None = field(default=None, repr=False)
    # message.tool_calls of a prompt that declared tools (None: the server sent none)
    tool_calls: list[Any] | None = None
    constrained: bool = False  # sent with response_format (the server's grammar backend shaped it)

    @property
    def name(self) -> str:
        suffix = f"#{self.attempt + 1}" if self.attempt else ""
        return f"{self.prompt_id}@T{self.temperature:g}{suffix}"

    @property
    def tokens_per_s(self) -> float | None:
        if not self.completion_tokens or self.elapsed <= 0:
            return None
        return self.completion_tokens / self.elapsed

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "fail"]

    @property
    def passed(self) -> bool:
        return self.error is None and not self.failures

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return "error"
        if self.failures:
            return "FAIL"
        return "warn" if self.findings else "ok"

    def to_json(self) -> dict[str, Any]:
        tps = self.tokens_per_s
        return {
            "name": self.name,
            "prompt_id": self.prompt_id,
            "kind": self.kind,
            "api": self.api,
            "temperature": self.temperature,
            "attempt": self.attempt,
            "verdict": self.verdict,
            "passed": self.passed,
            "error": self.error,
            "finish_reason": self.finish_reason,
            "completion_tokens": self.completion_tokens,
            "elapsed_s": round(self.elapsed, 4),
            "tokens_per_s": round(tps, 2) if tps is not None else None,
            "accept_length": round(self.accept_length, 3) if self.accept_length is not None else None,
            "spec_verify_ct": self.verify_ct,
            "reasons": [f.reason() for f in self.failures],
            "findings": [f.to_json() for f in self.findings],
            "text": self.text,
            "reasoning": self.reasoning,
            "tool_calls": self.tool_calls,
            "constrained": self.constrained,
        }


@dataclass
class SmokeReport:
    base_url: str
    model: str
    suite: str
    concurrency: int
    results: list[RequestResult]
    suite_findings: list[Finding] = field(default_factory=list)
    server_identity: dict[str, Any] = field(default_factory=dict)
    server_accept_before: float | None = None
    server_accept_after: float | None = None
    min_accept_length: float | None = None
    baseline: BaselineComparison | None = None
    baseline_recorded: str | None = None
    wall_seconds: float = 0.0
    probes: ProbeReport | None = None
    deterministic_server: bool = False  # the server runs --enable-deterministic-inference
    generation_seconds: float = 0.0  # the suite's own requests, without the probes
    requests_sent: int = 0  # HTTP requests this run made, probes included
    health_after: int | None = None  # /health's status after the suite (200 beside a failure is the point)
    accept_rule: AcceptRule | None = None  # how the accept length was judged (speculative servers)
    rescoring: RescoreReport | None = None  # the sampled answers rescored by one prefill each
    # lossy-by-design settings the server runs with (read back from /server_info and the unit)
    lossy_levers: list[str] = field(default_factory=list)
    # the accept length against its configuration's baseline on the host (deploy/accept_baseline.py)
    accept_baseline: dict[str, Any] | None = None

    @property
    def measured_accept_length(self) -> float | None:
        """Tokens per verify pass over the suite's own requests (meta_info completion_tokens /
        spec_verify_ct), the exact figure for this run."""
        measured = [r for r in self.results if r.verify_ct and r.completion_tokens]
        verify = sum(r.verify_ct or 0 for r in measured)
        return sum(r.completion_tokens or 0 for r in measured) / verify if verify else None

    @property
    def failed_results(self) -> list[RequestResult]:
        return [r for r in self.results if not r.passed]

    @property
    def passed(self) -> bool:
        suite_failed = any(f.severity == "fail" for f in self.suite_findings)
        return (
            not self.failed_results
            and not suite_failed
            and (self.baseline is None or self.baseline.passed)
            and (self.probes is None or self.probes.passed)
            and (self.rescoring is None or self.rescoring.verdict != "fail")
        )

    @property
    def accept_lengths(self) -> list[float]:
        return [r.accept_length for r in self.results if r.accept_length is not None]

    def summary(self) -> str:
        ok = sum(r.passed for r in self.results)
        parts = [
            f"smoke {'PASSED' if self.passed else 'FAILED'}: {ok}/{len(self.results)} requests ok",
            f"suite={self.suite}",
            f"model={clean(self.model, limit=120)}",
            f"concurrency={self.concurrency}",
            f"wall={self.wall_seconds:.1f}s",
        ]
        measured = self.measured_accept_length
        if measured is not None:
            parts.append(f"accept_len={measured:.2f}")
            base = (self.accept_baseline or {}).get("baseline")
            if isinstance(base, (int, float)):
                parts.append(f"(baseline {base:.2f})")
            low = [f for f in self.suite_findings if f.detector == "measured_accept_low"]
            if low and self.accept_rule is not None:
                parts.append(f"(low: {self.accept_rule.expected_range()})")
        if self.probes is not None:
            parts.append(
                f"probes={self.probes.verdict}"
                + (f"({len(self.probes.mismatches)}/{self.probes.checked})" if self.probes.supported else "")
            )
        if self.rescoring is not None:
            parts.append(
                f"rescoring={self.rescoring.verdict}"
                + (
                    f"({self.rescoring.low_tokens} unlikely/{self.rescoring.tokens})"
                    if self.rescoring.tokens
                    else ""
                )
            )
        if self.lossy_levers:
            parts.append(f"lossy=[{', '.join(self.lossy_levers)}]")
        if self.baseline is not None:
            parts.append(f"baseline_exact={self.baseline.exact_match_rate:.0%}")
        failing = sorted(
            {f.detector for r in self.results for f in r.failures}
            | {f.detector for f in self.suite_findings if f.severity == "fail"}
        )
        if failing:
            parts.append(f"findings={','.join(failing)}")
        if self.health_after is not None and not self.passed:
            parts.append(f"/health={self.health_after}")
        warned = sorted({f.detector for f in self.suite_findings if f.severity == "warn"})
        if warned:
            parts.append(f"warnings={','.join(warned)}")
        return " ".join(parts)

    @property
    def warnings(self) -> list[Finding]:
        """Suite-wide warnings: what is worth knowing but does not fail the run (low acceptance...)."""
        return [f for f in self.suite_findings if f.severity == "warn"]

    def to_json(self) -> dict[str, Any]:
        return tagged(
            "smoke",
            {
                "passed": self.passed,
                "summary": self.summary(),
                "base_url": self.base_url,
                "model": self.model,
                "suite": self.suite,
                "concurrency": self.concurrency,
                "wall_seconds": round(self.wall_seconds, 3),
                "server": self.server_identity,
                "accept_length": self.measured_accept_length,
                "server_avg_accept_length": {
                    "before": self.server_accept_before,
                    "after": self.server_accept_after,
                    "note": "context only: SGLang's lifetime average since start or the last cache flush, "
                    "rolled up every --decode-log-interval decode steps (absent before the first); read "
                    "before the probes flushed the cache",
                },
                "deterministic_server": self.deterministic_server,
                "generation_seconds": round(self.generation_seconds, 3),
                "min_accept_length": self.min_accept_length,
                "accept_rule": self.accept_rule.to_json() if self.accept_rule else None,
                "accept_baseline": self.accept_baseline,
                "warnings": [f.message for f in self.warnings],
                "suite_findings": [f.to_json() for f in self.suite_findings],
                "baseline": self.baseline.to_json() if self.baseline else None,
                "baseline_recorded": self.baseline_recorded,
                "results": [r.to_json() for r in self.results],
                "probes": self.probes.to_json() if self.probes else None,
                "rescoring": self.rescoring.to_json() if self.rescoring else None,
                "lossy_levers": self.lossy_levers,
                "health_after": self.health_after,
            },
        )

    def to_junit(self) -> str:
        """JUnit XML: one test case per request, plus one for the suite-wide checks."""
        failures = len(self.failed_results) + (0 if self._suite_case_ok() else 1)
        suite = ET.Element(
            "testsuite",
            name=f"k26ctl-smoke.{self.suite}",
            tests=str(len(self.results) + 1),
            failures=str(failures),
            errors="0",
            time=f"{self.wall_seconds:.3f}",
        )
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("base_url", self.base_url),
            ("model", self.model),
            ("concurrency", self.concurrency),
        ):
            ET.SubElement(props, "property", name=key, value=clean(value, limit=500))
        for r in self.results:
            case = ET.SubElement(
                suite, "testcase", classname=f"smoke.{r.prompt_id}", name=r.name, time=f"{r.elapsed:.3f}"
            )
            if not r.passed:
                message = r.error or "; ".join(f.reason() for f in r.failures)
                failure = ET.SubElement(case, "failure", message=clean(message, limit=500), type=r.verdict)
                failure.text = clean(r.text, keep_newlines=True, limit=2000)
            out = ET.SubElement(case, "system-out")
            out.text = (
                f"tokens={r.completion_tokens} tok/s={r.tokens_per_s or 0:.1f} accept_len={r.accept_length}\n"
                + clean(r.text, keep_newlines=True, limit=2000)
            )
        case = ET.SubElement(suite, "testcase", classname="smoke.suite", name="suite-checks", time="0")
        if not self._suite_case_ok():
            reasons = [f.reason() for f in self.suite_findings if f.severity == "fail"]
            if self.baseline is not None and not self.baseline.passed:
                b = self.baseline
                reasons.append(f"baseline parity {b.exact_match_rate:.0%} < {b.min_exact_match:.0%}")
            ET.SubElement(case, "failure", message=clean("; ".join(reasons), limit=500), type="suite")
        ET.indent(suite)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"

    def _suite_case_ok(self) -> bool:
        return not any(f.severity == "fail" for f in self.suite_findings) and (
            self.baseline is None or self.baseline.passed
        )


def unreachable_junit(suite: str, message: str) -> str:
    """JUnit XML for a run that could not reach the server: one test case in error."""
    root = ET.Element(
        "testsuite", name=f"k26ctl-smoke.{suite}", tests="1", failures="0", errors="1", time="0"
    )
    case = ET.SubElement(root, "testcase", classname="smoke.server", name="reachable", time="0")
    ET.SubElement(case, "error", message=clean(message, limit=500), type="unreachable")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
